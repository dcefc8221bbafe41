// faultline sim replay EVENTLOG --stack NAME: the command-line front of sim/replay.h, which
// re-runs the fault history recorded by a live run (its event log) in the simulator and sets
// the measured live ETTR beside the simulated one. This file holds the help text and the flag
// parsing; it builds the policy registry, calls sim::replay, prints its errors as
// "faultline: MESSAGE" with their exit codes, and prints the result as text or JSON.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "policies/builtin.h"
#include "sim/replay.h"

namespace faultline::cli {

namespace {

constexpr const char* kReplayAbout =
    R"(Re-runs the fault history of a live run's event log in the simulator and prints the
live run's measured ETTR beside the simulated one (mean and 95% CI over replicas), the
difference in percentage points, and incidents by resolution mechanism, live and
simulated.

The scenario comes from the log: cluster and job layout from its header, the healthy
step time, the run's elapsed time as the horizon, and exactly its recorded faults (no
modelled faults), each at its time on its slot. Durations the simulator would otherwise
take from large-cluster defaults are the live run's own medians: process start
(StartJob), requeue, cold replacement and standby wake (AcquireMachines by mode;
one that waited for a machine to come back is left out),
stop-time tests (RunProbe by test), stack capture, replay, the checkpoint stall (from
progress samples), the collective timeout (hang to exit) and, per fault, how long its
exit took to be seen, with its exit code and log line (a NaN or silent corruption that
no exit followed, seen only in the step samples, is replayed as a NaN that does not
exit), and, when the run rescheduled nothing, the standby pool's refill from the
machines that came back to it after an eviction. A stack that sizes its own standby
pool starts with the live run's standbys parked, as they were. The values used are printed.
Under the recorded stack each of those actions takes its own live duration instead, the
k-th of a kind as the live run's k-th (the medians where it failed, waited, or has none),
so that a fault lands in the same phase of a recovery as it did live.

The simulated ETTR is reported in the live definition (steps counted at the median
healthy step time, over the whole live clock): the simulator's own ETTR times the
live run's median/mean running step (step-time jitter) times the share of the run after
its first successful StartJob (the time before it, agents connecting, is lost in the
live run). Records after the summary (a controller shutting down) are left out.

Then the decisions: the live run's actions (notes left out), each reduced to its kind,
what it names (machines by their live names, slots, mode, test, mechanism) and its
reason's kind (the reason up to its first ": ", numbers and asides left out), aligned with
those of simulated replica 0 under the same seed. It prints "decisions: K of N match the
live run", how many mismatches the listed unmodelled differences explain, and the first
mismatch with both sides (docs/running-live.md, "Replaying a live incident").
)";

constexpr const char* kReplayEpilog =
    R"(A malformed log is an error "faultline: FILE:LINE: $.field: what was expected" (exit 2);
a torn last line (a crash mid-write) is left out with a warning.)";

}  // namespace

int sim_replay(const std::vector<std::string>& args) {
  sim::ReplayOptions opt;
  bool check_decisions = false;
  SimFlags f;
  f.replicas = 20;
  auto t = command_table("faultline sim replay EVENTLOG [options]", kReplayAbout);
  t.add({"--stack", "NAME", "a policy stack name",
         "policy stack to replay under (default: the recorded one). The\n"
         "recorded stack runs with the header's parameters, another stack\n"
         "with its defaults",
         [&opt](const std::string& v) {
           if (v.empty()) return std::string("--stack: expected a policy stack name");
           opt.stack = v;
           return std::string();
         }});
  add_sim_flags(t, f, {"text", "json", "table"}, "output (default text)",
                "also write result.json, replicas.csv and incidents.csv into DIR");
  t.toggle("--decisions", "record the policy's events and actions (decisions.log in --out)",
           &opt.decisions);
  t.toggle("--check-decisions",
           "exit 1 (after the report) when a live decision or a simulated\n"
           "one is unmatched and no listed unmodelled difference explains it",
           &check_decisions);
  add_sim_switches(t, f);
  t.positional(&opt.log_path);
  t.epilog(kReplayEpilog);
  if (const int rc = t.parse(args); rc >= 0) return rc;
  opt.sets = f.sets;
  if (f.allow_unused) opt.sets.push_back("policy.allow_unused_params=true");
  opt.replicas = f.replicas;
  opt.jobs = static_cast<int>(f.jobs);
  opt.seed = f.seed;
  opt.out_dir = f.out_dir;
  const std::string format = f.format == "table" ? "text" : f.format;
  if (opt.log_path.empty()) return usage_error("sim replay: expected EVENTLOG");
  opt.warn = [](const std::string& m) { std::fprintf(stderr, "faultline: %s\n", m.c_str()); };

  const Registry registry = policies::builtin_registry();
  sim::ReplayReport report;
  try {
    report = sim::replay(opt, registry);
  } catch (const sim::ReplayError& e) {
    if (e.usage()) return usage_error(e.what());
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return e.exit_code();
  }
  if (format == "json")
    std::cout << report.out.dump(2) << "\n";
  else
    std::cout << sim::format_replay_text(report);
  const auto& d = report.out.at("decisions");
  if (check_decisions && !d.at("ok").get<bool>()) {
    std::cout.flush();
    const auto& m = d.at("first_unexplained");
    const auto& one = m.at("live").is_null() ? m.at("sim") : m.at("live");
    std::fprintf(stderr,
                 "faultline: %s: decisions: %zu of the %zu mismatches are not explained by a "
                 "listed unmodelled difference (first: %s %s at t=%.2f s)\n",
                 opt.log_path.c_str(), d.at("unexplained").get<std::size_t>(),
                 d.at("mismatches").size(), m.at("live").is_null() ? "simulated" : "live",
                 one.at("text").get<std::string>().c_str(), one.at("t_s").get<double>());
    return 1;
  }
  return 0;
}

}  // namespace faultline::cli
