#include "realexec/trainjob/options.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "cli/flag_table.h"

namespace faultline::live::trainjob {
namespace {

template <typename T>
bool parse_int(const std::string& s, T& out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_seconds(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out) && out >= 0;
}

ParsedOptions usage_error(std::string message) {
  ParsedOptions p;
  p.exit_code = 2;
  p.message = "faultline-trainjob: " + std::move(message);
  return p;
}

// A whole-number option into `out`, in [lo, hi].
template <typename T>
cli::Flag whole(const std::string& name, const std::string& expect, const std::string& help, T lo,
                T hi, T* out) {
  return {name, "N", expect, help, [name, expect, lo, hi, out](const std::string& v) {
            T x;
            if (!parse_int(v, x) || x < lo || x > hi)
              return name + ": expected " + expect + ", got '" + v + "'";
            *out = x;
            return std::string();
          }};
}

// The command line of faultline-trainjob, applied into `o`.
cli::FlagTable option_table(Options& o, bool& steps_given) {
  cli::FlagTable t(
      "faultline-trainjob",
      "faultline-trainjob [--seed N] [--steps N] [--step-ms N] [--hidden N]\n"
      "                          [--microbatches N] [--loss-log PATH] [--version STR]\n"
      "                          [--bad-batch-at STEP] [--crash-at STEP]\n"
      "       faultline-trainjob --probe bitwise [--seed N] [--steps K]\n"
      "       faultline-trainjob --probe allgather [--deadline-ms N] [--probe-mib N]\n"
      "       faultline-trainjob --replay --steps K [--seed N]",
      "Reference data-parallel training job of faultline live mode. Environment: RANK,\n"
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, FAULTLINE_HOST_ADDR,\n"
      "FAULTLINE_REPORT_FD, FAULTLINE_CKPT_DIR, FAULTLINE_CKPT_EVERY, FAULTLINE_FAULT_FILE,\n"
      "FAULTLINE_RENDEZVOUS_S, FAULTLINE_COLLECTIVE_TIMEOUT_S.");
  constexpr std::int64_t kBig = INT64_MAX;
  t.inline_values();
  t.add(whole<std::uint64_t>("--seed", "an integer >= 0", "the job's seed (default 1)", 0,
                             UINT64_MAX, &o.seed));
  cli::Flag steps = whole<std::int64_t>("--steps", "an integer >= 0",
                                        "stop once this step is reached (0: forever; probe\n"
                                        "bitwise 1, replay 10)",
                                        0, kBig, &o.steps);
  steps.apply = [inner = steps.apply, &steps_given](const std::string& v) {
    steps_given = true;
    return inner(v);
  };
  t.add(std::move(steps));
  t.add(whole<int>("--step-ms", "an integer >= 0", "time added to every step (ms, default 0)", 0,
                   INT32_MAX, &o.step_ms));
  t.add(whole<int>("--hidden", "an integer in [1, 65536]", "model width (default 64)", 1, 65536,
                   &o.hidden));
  t.add(whole<int>("--microbatches", "an integer in [1, 65536]",
                   "micro-batches per step (default 8; divisible by WORLD_SIZE)", 1, 65536,
                   &o.microbatches));
  t.text("--loss-log", "PATH", "rank 0 appends \"step %.17g-loss\" to PATH", &o.loss_log);
  t.add({"--version", "STR", "",
         "echoed in `started` (default dev); containing \"bad\", every rank\ncrashes at step 3",
         [&o](const std::string& v) {
           o.version = v;
           return std::string();
         }});
  t.add({"--probe", "bitwise|allgather", "bitwise or allgather",
         "a stop-time test instead of training (one JSON line on stdout)",
         [&o](const std::string& v) {
           if (v == "bitwise") {
             o.mode = Mode::kProbeBitwise;
           } else if (v == "allgather") {
             o.mode = Mode::kProbeAllgather;
           } else {
             return "--probe wants bitwise or allgather, got '" + v + "'";
           }
           return std::string();
         }});
  t.add(whole<std::int64_t>("--deadline-ms", "an integer >= 1",
                            "allgather probe deadline (ms, default 30000)", 1, kBig,
                            &o.deadline_ms));
  t.add(whole<int>("--probe-mib", "an integer in [1, 1024]",
                   "allgather probe: MiB per rank (default 4)", 1, 1024, &o.probe_mib));
  t.add(whole<std::int64_t>("--bad-batch-at", "an integer >= 0",
                            "the batch of this step makes every gradient NaN", 0, kBig,
                            &o.bad_batch_at));
  t.add(whole<std::int64_t>("--crash-at", "an integer >= 1",
                            "the last rank dies in this step (an illegal memory access)", 1, kBig,
                            &o.crash_at));
  t.add({"--replay", "", "",
         "recompute --steps steps from the checkpoint; rank 0 prints the hash\nof the weights (one "
         "JSON line on stdout)",
         [&o](const std::string&) {
           o.mode = Mode::kReplay;
           return std::string();
         }});
  return t;
}

// The flags into `o`; nullopt when the job goes on, else what to exit with.
std::optional<ParsedOptions> parse_flags(const std::vector<std::string>& args, Options& o) {
  bool steps_given = false;
  ParsedOptions p;
  cli::FlagTable t = option_table(o, steps_given);
  const int rc = t.parse(args, &p.message);
  if (rc >= 0) {
    p.exit_code = rc;
    return p;
  }
  if (!steps_given && o.mode == Mode::kProbeBitwise) o.steps = 1;
  if (!steps_given && o.mode == Mode::kReplay) o.steps = 10;
  return std::nullopt;
}

}  // namespace

std::string usage_text() {
  Options o;
  bool steps_given = false;
  return option_table(o, steps_given).help();
}

ParsedOptions parse_options(const std::vector<std::string>& args, const EnvLookup& env) {
  Options o;
  if (auto exit = parse_flags(args, o)) return *exit;

  auto int_env = [&](const char* name, int& out, int lo, int hi) -> std::optional<ParsedOptions> {
    const char* v = env(name);
    if (!v) return std::nullopt;
    if (!parse_int(std::string(v), out) || out < lo || out > hi) {
      return usage_error(std::string("bad environment ") + name + "='" + v + "'");
    }
    return std::nullopt;
  };
  auto str_env = [&](const char* name, std::string& out) {
    if (const char* v = env(name); v && *v) out = v;
  };
  auto seconds_env = [&](const char* name, double& out) -> std::optional<ParsedOptions> {
    const char* v = env(name);
    if (!v) return std::nullopt;
    if (!parse_seconds(v, out)) {
      return usage_error(std::string("bad environment ") + name + "='" + v + "'");
    }
    return std::nullopt;
  };
  constexpr int kMaxRanks = 1 << 20;
  if (auto e = int_env("WORLD_SIZE", o.world_size, 1, kMaxRanks)) return *e;
  if (auto e = int_env("RANK", o.rank, 0, kMaxRanks)) return *e;
  o.local_rank = o.rank;
  if (auto e = int_env("LOCAL_RANK", o.local_rank, 0, kMaxRanks)) return *e;
  if (auto e = int_env("LOCAL_WORLD_SIZE", o.local_world_size, 1, kMaxRanks)) return *e;
  str_env("MASTER_ADDR", o.master_addr);
  if (auto e = int_env("MASTER_PORT", o.master_port, 1, 65535)) return *e;
  str_env("FAULTLINE_HOST_ADDR", o.host_addr);
  str_env("FAULTLINE_RENDEZVOUS_KEY", o.rendezvous_key);
  if (o.rendezvous_key.size() > 256)
    return usage_error("bad environment FAULTLINE_RENDEZVOUS_KEY: longer than 256 characters");
  if (const char* v = env("FAULTLINE_GEN"); v && *v) {
    int g = -1;
    if (!parse_int(std::string(v), g) || g < 0)
      return usage_error(std::string("bad environment FAULTLINE_GEN='") + v + "'");
    o.gen = g;
  }
  if (auto e = int_env("FAULTLINE_REPORT_FD", o.report_fd, 0, 1 << 24)) return *e;
  str_env("FAULTLINE_CKPT_DIR", o.ckpt_dir);
  if (auto e = int_env("FAULTLINE_CKPT_EVERY", o.ckpt_every, 1, 1 << 30)) return *e;
  str_env("FAULTLINE_FAULT_FILE", o.fault_file);
  if (auto e = seconds_env("FAULTLINE_RENDEZVOUS_S", o.rendezvous_s)) return *e;
  if (auto e = seconds_env("FAULTLINE_COLLECTIVE_TIMEOUT_S", o.collective_timeout_s)) return *e;

  if (o.mode == Mode::kProbeBitwise) {
    o.rank = 0;  // single process, no network
    o.world_size = 1;
  }
  if (o.rank >= o.world_size) {
    return usage_error("RANK " + std::to_string(o.rank) + " is not below WORLD_SIZE " +
                       std::to_string(o.world_size));
  }
  if (o.mode != Mode::kProbeAllgather && o.microbatches % o.world_size != 0) {
    return usage_error("WORLD_SIZE " + std::to_string(o.world_size) +
                       " does not divide --microbatches " + std::to_string(o.microbatches));
  }
  ParsedOptions p;
  p.options = o;
  return p;
}

}  // namespace faultline::live::trainjob
