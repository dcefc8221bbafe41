#include "cli/flags.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace faultline::cli {

std::vector<std::string> SimFlags::scenario_sets() const {
  std::vector<std::string> out = sets;
  if (seed >= 0) out.push_back("seed=" + std::to_string(seed));
  if (replicas > 0) out.push_back("replicas=" + std::to_string(replicas));
  if (allow_unused) out.push_back("policy.allow_unused_params=true");
  return out;
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "faultline: %s (see --help)\n", msg.c_str());
  return 2;
}

bool parse_int(const std::string& s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

const FlagSpec* find_flag(std::span<const FlagSpec> table, const std::string& a) {
  for (const auto& s : table)
    if (a == s.name) return &s;
  return nullptr;
}

const std::string* flag_value(const std::vector<std::string>& args, std::size_t& i) {
  return i + 1 < args.size() ? &args[++i] : nullptr;
}

std::string expected(const FlagSpec& spec) {
  return std::string(spec.name) + ": expected " + spec.value;
}

int positional_arg(const std::string& a, std::string& path) {
  if (!a.empty() && a[0] == '-') return usage_error("unknown option " + a);
  if (!path.empty()) return usage_error("unexpected argument " + a);
  path = a;
  return -1;
}

int sim_flag(const std::vector<std::string>& args, std::size_t& i, SimFlags& f,
             const std::vector<std::string>& formats) {
  const std::string& a = args[i];
  const FlagSpec* spec = find_flag(kSimFlags, a);
  if (!spec) return 0;
  if (!spec->value) {  // a switch
    (a == "--quiet" ? f.quiet : a == "--progress" ? f.progress : f.allow_unused) = true;
    return 1;
  }
  if (i + 1 >= args.size()) return usage_error(expected(*spec)), -2;
  const std::string& v = args[++i];
  if (a == "--replicas" || a == "--jobs" || a == "--seed") {
    long long x;
    const long long lo = a == "--seed" ? 0 : 1;
    if (!parse_int(v, lo, a == "--jobs" ? 4096 : (1LL << 62), &x))
      return usage_error(expected(*spec) + ", got '" + v + "'"), -2;
    (a == "--replicas" ? f.replicas : a == "--jobs" ? f.jobs : f.seed) = x;
  } else if (a == "--set") {
    f.sets.push_back(v);
  } else if (a == "--out") {
    if (v.empty()) return usage_error("--out: expected a directory"), -2;
    f.out_dir = v;
  } else {  // --format
    if (std::find(formats.begin(), formats.end(), v) == formats.end()) {
      std::string all;
      for (const auto& x : formats) all += (all.empty() ? "" : " or ") + x;
      return usage_error("--format: expected " + all + ", got '" + v + "'"), -2;
    }
    f.format = v;
  }
  return 1;
}

}  // namespace faultline::cli
