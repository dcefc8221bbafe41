#include "kernels/probe_main.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>

#include "cli/flag_table.h"
#include "kernels/evaluation.h"
#include "kernels/nvml_loader.h"
#include "kernels/rendezvous.h"
#include "kernels/watchdog.h"

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;

class NoCudaBackend final : public ProbeBackend {
 public:
  std::string_view name() const override { return "none"; }

  ProbeReport run(const ProbeOptions& options, const ProbeContext&) override {
    ProbeReport r;
    r.probe = std::string(probe_name(options.probe));
    r.verdict = Verdict::kNoGpu;
    r.notes.push_back(
        "faultline-probe was built without CUDA (FAULTLINE_WITH_CUDA off, or nvcc / cuBLAS not "
        "found when it was configured): no GPU can be used");
    if (options.probe == ProbeKind::kEnv) add_nvml_inventory(r);
    return r;
  }
};

std::string signal_description(int sig) {
  const char* text = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (text != nullptr ? std::string(" (") + text + ")" : "");
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// Parses a line the child wrote; nullopt when it is not a report.
std::optional<ProbeReport> parse_line(const std::string& line) {
  if (line.empty()) return std::nullopt;
  try {
    return report_from_json(nlohmann::json::parse(line));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Without a GPU, a multi-machine nccl probe still takes its part in the rendezvous (rank 0
// publishes a random blob of the unique id's size, the others receive it) and then reports
// no_gpu with the outcome in details.rendezvous: so the path that carries the id between
// machines (live mode relays it through its control channel) is exercised on CPU-only hosts, and
// peers waiting for this rank are not left waiting until their deadline. A rendezvous that fails
// or times out is the verdict (fail, deadline_exceeded), as with a GPU: a peer is missing.
void rendezvous_without_gpu(const ProbeOptions& options, const ProbeContext& context,
                            ProbeReport& report) {
  if (options.probe != ProbeKind::kNccl || !options.nccl.rendezvous) return;
  const auto& o = options.nccl;
  std::array<std::byte, kNcclUniqueIdBytes> blob{};
  if (o.rank == 0) {
    std::size_t filled = 0;
    while (filled < blob.size()) {
      const ssize_t n = ::getrandom(blob.data() + filled, blob.size() - filled, 0);
      if (n > 0)
        filled += static_cast<std::size_t>(n);
      else if (errno != EINTR)
        break;  // fewer random bytes: still a blob to carry
    }
  }
  report.metrics["nccl_ranks"] = o.nranks;
  report.metrics["nccl_rank"] = o.rank;
  report.metrics["nccl_local_mode"] = 0;
  const RendezvousOutcome outcome =
      exchange_blob(*o.rendezvous, o.rank, o.nranks, blob, context.soft_deadline);
  report.metrics["rendezvous_ok"] = outcome.ok ? 1 : 0;
  if (outcome.ok) {
    report.details["rendezvous"] = "ok";
    report.notes.push_back("no GPU: only the rendezvous was tested (rank " +
                           std::to_string(o.rank) + " of " + std::to_string(o.nranks) +
                           "), and it completed");
    return;
  }
  report.details["rendezvous"] = outcome.timed_out ? "timed_out" : "failed";
  report.verdict = outcome.timed_out ? Verdict::kDeadlineExceeded : Verdict::kFail;
  report.notes.push_back("no GPU, and stage 'rendezvous' failed: " + outcome.error);
}

// Everything the child does: run the probe, evaluate it, write the final line.
ProbeReport run_and_evaluate(ProbeBackend& backend, const ProbeOptions& options,
                             const ProbeContext& context, const ThresholdTable& table) {
  ProbeReport report;
  try {
    report = backend.run(options, context);
  } catch (const std::exception& e) {
    report.probe = std::string(probe_name(options.probe));
    report.verdict = Verdict::kFail;
    report.notes.push_back(std::string("probe failed: ") + e.what());
  }
  if (report.verdict == Verdict::kNoGpu) rendezvous_without_gpu(options, context, report);
  if (report.probe.empty()) report.probe = std::string(probe_name(options.probe));
  const ModelThresholds& model = table.lookup(report.device ? report.device->name : "");
  if (report.device) report.device->model = model.name;
  report.details["thresholds_source"] = table.source();
  evaluate_report(report, model, options);
  report.deadline_s = options.common.deadline_s;
  report.inject = std::string(injection_name(options.common.inject));
  report.partial = false;
  return report;
}

[[noreturn]] void hang_forever() {
  for (;;) ::pause();
}

ProbeReport deadline_report(const ProbeOptions& options, std::optional<ProbeReport> partial) {
  ProbeReport r = partial ? std::move(*partial) : ProbeReport{};
  r.probe = std::string(probe_name(options.probe));
  r.verdict = Verdict::kDeadlineExceeded;
  r.partial = false;
  r.checks.clear();
  r.notes.push_back("deadline of " + format_seconds(options.common.deadline_s) +
                    " s exceeded: the probe process was killed" +
                    (partial ? "; metrics are from its last progress report" : ""));
  return r;
}

}  // namespace

std::unique_ptr<ProbeBackend> make_no_cuda_backend() { return std::make_unique<NoCudaBackend>(); }

Clock::time_point soft_deadline_for(Clock::time_point start, double deadline_s) {
  const double margin = std::clamp(deadline_s * 0.1, 0.2, 2.0);
  const double soft = std::max(deadline_s * 0.5, deadline_s - margin);
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(soft));
}

namespace {

// The probe in a child process, watched to its deadline: the child publishes progress
// reports on a pipe, and a child that dies or runs out of time leaves its last one.
ProbeReport run_watched(ProbeBackend& backend, const ProbeOptions& options,
                        const ProbeContext& context, const ThresholdTable& table,
                        Clock::time_point start) {
  const std::string probe(probe_name(options.probe));
  ProbeReport report;
  auto body = [&](int fd) -> int {
    // Libraries may print to stdout (NCCL_DEBUG does); stdout must carry only our JSON.
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    if (options.common.inject == Injection::kHang) hang_forever();
    ProbeContext child_context = context;
    child_context.publish = [fd](const ProbeReport& snapshot) {
      ProbeReport copy = snapshot;
      copy.partial = true;
      write_all(fd, render_report(copy, false) + "\n");
    };
    const ProbeReport final_report = run_and_evaluate(backend, options, child_context, table);
    return write_all(fd, render_report(final_report, false) + "\n") ? 0 : 1;
  };
  const double remaining =
      options.common.deadline_s - std::chrono::duration<double>(Clock::now() - start).count();
  ChildResult child = run_in_child(body, std::max(remaining, 0.0));
  std::optional<ProbeReport> last = parse_line(last_complete_line(child.output));
  switch (child.kind) {
    case ChildResult::Kind::kDeadline:
      report = deadline_report(options, std::move(last));
      break;
    case ChildResult::Kind::kForkFailed:
      report.probe = probe;
      report.verdict = Verdict::kFail;
      report.notes.push_back("cannot start the probe process: " + child.error);
      break;
    case ChildResult::Kind::kExited:
    case ChildResult::Kind::kSignaled:
      if (last && !last->partial) {
        report = std::move(*last);
      } else {
        report = last ? std::move(*last) : ProbeReport{};
        report.probe = probe;
        report.partial = false;
        report.checks.clear();
        report.verdict = Verdict::kFail;
        report.notes.push_back("the probe process " +
                               (child.kind == ChildResult::Kind::kSignaled
                                    ? "died of " + signal_description(child.signal)
                                    : "exited with status " + std::to_string(child.exit_status)) +
                               " without a final report" +
                               (last ? "; metrics are from its last progress report" : ""));
      }
      break;
  }
  return report;
}

// The probe in this process, under an alarm that writes a prepared deadline report.
ProbeReport run_in_process(ProbeBackend& backend, const ProbeOptions& options,
                           const ProbeContext& context, const ThresholdTable& table,
                           std::ostream& out) {
  ProbeReport report;
  // The alarm handler can only write bytes prepared in advance. While the probe runs, fd 1
  // points at stderr (as in run_watched's child); the verdict goes to the saved stdout.
  const std::string on_deadline =
      render_report(deadline_report(options, std::nullopt), false) + "\n";
  out.flush();
  const int saved_stdout = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  {
    InProcessDeadline alarm(std::max(options.common.deadline_s, 1e-3), on_deadline, kExitDeadline,
                            saved_stdout);
    if (options.common.inject == Injection::kHang) hang_forever();
    report = run_and_evaluate(backend, options, context, table);
  }
  std::fflush(stdout);
  ::dup2(saved_stdout, STDOUT_FILENO);
  ::close(saved_stdout);
  return report;
}

}  // namespace

int probe_main(std::span<const std::string_view> args, ProbeBackend& backend, std::ostream& out,
               std::ostream& err, const ProgramEnvironment& environment) {
  const auto start = Clock::now();
  ParseResult parsed = parse_probe_args(args, environment.env);
  // `line`: the one usage-error line (cli/flag_table.h), in the report's notes too.
  auto usage_error = [&](const std::string& probe, const std::string& line) {
    ProbeReport r = make_usage_error_report(probe, line);
    r.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    out << render_report(r, false) << "\n";
    out.flush();
    err << line << "\n";
    return kExitUsage;
  };
  if (parsed.kind == ParseResult::Kind::kHelp) {
    out << parsed.text;
    out.flush();
    return kExitPass;
  }
  if (parsed.kind == ParseResult::Kind::kError) return usage_error(parsed.probe_label, parsed.text);
  const ProbeOptions& options = parsed.options;
  const std::string probe(probe_name(options.probe));

  ThresholdTable table = ThresholdTable::built_in();
  const auto path = find_thresholds_file(options.common.thresholds_path, environment.env,
                                         environment.exe_path, environment.compiled_in_thresholds);
  if (path) {
    try {
      table = ThresholdTable::load(*path);
    } catch (const ThresholdsError& e) {
      return usage_error(probe, cli::usage_line("faultline-probe", e.what()));
    }
  }

  ProbeContext context;
  context.start = start;
  context.soft_deadline = soft_deadline_for(start, options.common.deadline_s);
  context.thresholds = &table;

  out.flush();
  err.flush();
  ProbeReport report = options.common.watchdog
                           ? run_watched(backend, options, context, table, start)
                           : run_in_process(backend, options, context, table, out);
  report.deadline_s = options.common.deadline_s;
  report.inject = std::string(injection_name(options.common.inject));
  report.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  out << render_report(report, options.common.pretty) << "\n";
  out.flush();
  return exit_code_for(report.verdict);
}

}  // namespace faultline::kernels
