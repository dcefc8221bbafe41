#include "realexec/trainjob/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

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

}  // namespace

std::string usage_text() {
  return "usage: faultline-trainjob [--seed N] [--steps N] [--step-ms N] [--hidden N]\n"
         "                          [--microbatches N] [--loss-log PATH] [--version STR]\n"
         "                          [--bad-batch-at STEP] [--crash-at STEP]\n"
         "       faultline-trainjob --probe bitwise [--seed N] [--steps K]\n"
         "       faultline-trainjob --probe allgather [--deadline-ms N] [--probe-mib N]\n"
         "       faultline-trainjob --replay --steps K [--seed N]\n"
         "Reference data-parallel training job of faultline live mode. Environment: RANK,\n"
         "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, "
         "FAULTLINE_HOST_ADDR,\n"
         "FAULTLINE_REPORT_FD, FAULTLINE_CKPT_DIR, FAULTLINE_CKPT_EVERY, FAULTLINE_FAULT_FILE,\n"
         "FAULTLINE_RENDEZVOUS_S, FAULTLINE_COLLECTIVE_TIMEOUT_S.\n";
}

ParsedOptions parse_options(const std::vector<std::string>& args, const EnvLookup& env) {
  Options o;
  bool steps_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "--help" || flag == "-h") {
      ParsedOptions p;
      p.message = usage_text();
      return p;
    }
    if (flag == "--replay") {
      if (inline_value) return usage_error("--replay takes no value");
      o.mode = Mode::kReplay;
      continue;
    }
    const bool known = flag == "--seed" || flag == "--steps" || flag == "--step-ms" ||
                       flag == "--hidden" || flag == "--microbatches" || flag == "--loss-log" ||
                       flag == "--version" || flag == "--probe" || flag == "--deadline-ms" ||
                       flag == "--probe-mib" || flag == "--bad-batch-at" || flag == "--crash-at";
    if (!known) return usage_error("unknown flag " + flag);
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return usage_error(flag + " needs a value");
    }
    bool ok = true;
    if (flag == "--seed") {
      ok = parse_int(value, o.seed);
    } else if (flag == "--steps") {
      ok = parse_int(value, o.steps) && o.steps >= 0;
      steps_given = true;
    } else if (flag == "--step-ms") {
      ok = parse_int(value, o.step_ms) && o.step_ms >= 0;
    } else if (flag == "--hidden") {
      ok = parse_int(value, o.hidden) && o.hidden > 0 && o.hidden <= 65536;
    } else if (flag == "--microbatches") {
      ok = parse_int(value, o.microbatches) && o.microbatches > 0 && o.microbatches <= 65536;
    } else if (flag == "--loss-log") {
      o.loss_log = value;
      ok = !value.empty();
    } else if (flag == "--version") {
      o.version = value;
    } else if (flag == "--probe") {
      if (value == "bitwise") {
        o.mode = Mode::kProbeBitwise;
      } else if (value == "allgather") {
        o.mode = Mode::kProbeAllgather;
      } else {
        return usage_error("--probe wants bitwise or allgather, got '" + value + "'");
      }
    } else if (flag == "--deadline-ms") {
      ok = parse_int(value, o.deadline_ms) && o.deadline_ms > 0;
    } else if (flag == "--bad-batch-at") {
      ok = parse_int(value, o.bad_batch_at) && o.bad_batch_at >= 0;
    } else if (flag == "--crash-at") {
      ok = parse_int(value, o.crash_at) && o.crash_at >= 1;
    } else if (flag == "--probe-mib") {
      ok = parse_int(value, o.probe_mib) && o.probe_mib > 0 && o.probe_mib <= 1024;
    }
    if (!ok) return usage_error("bad value '" + value + "' for " + flag);
  }
  if (!steps_given && o.mode == Mode::kProbeBitwise) o.steps = 1;
  if (!steps_given && o.mode == Mode::kReplay) o.steps = 10;

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
