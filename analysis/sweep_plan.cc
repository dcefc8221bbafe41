#include "analysis/sweep_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

namespace faultline::analysis {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A readable, file-system-safe rendering of the assignments, at most `max` characters.
std::string readable(const Assignment& params, std::size_t max) {
  std::string out;
  for (const auto& [k, v] : params) {
    // The last path component is enough to read; the hash disambiguates.
    const auto dot = k.rfind('.');
    std::string part = (dot == std::string::npos ? k : k.substr(dot + 1)) + "=" + v;
    if (!out.empty()) out += "_";
    out += part;
  }
  std::string safe;
  for (char c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '=' || c == '-' || c == '_' || c == '+';
    safe += ok ? c : '_';
  }
  if (safe.size() > max) safe.resize(max);
  return safe;
}

}  // namespace

std::uint64_t fnv1a64(const std::string& s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::pair<std::string, std::vector<std::string>> parse_axis_arg(const std::string& arg,
                                                                const std::string& flag) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || trim(arg.substr(0, eq)).empty())
    throw PlanError(flag + " " + arg +
                    ": expected key=v1,v2,... e.g. policy.params.standby_pool=0,2,4");
  const std::string key = trim(arg.substr(0, eq));
  std::vector<std::string> values;
  std::string cur;
  int depth = 0;
  bool quoted = false, escaped = false;
  for (char c : arg.substr(eq + 1)) {
    if (quoted) {
      cur += c;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        quoted = false;
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      values.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  values.push_back(trim(cur));
  for (const auto& v : values)
    if (v.empty()) throw PlanError(flag + " " + arg + ": empty value in the list");
  return {key, values};
}

std::string point_id(const SweepBase& base, const Assignment& params) {
  Assignment sorted = params;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Length-prefixed fields so no two different inputs concatenate to the same text.
  std::string canon;
  auto add = [&](const std::string& s) { canon += std::to_string(s.size()) + ":" + s + ";"; };
  add(base.scenario_text);
  for (const auto& s : base.sets) add(s);
  add("seed=" + std::to_string(base.seed));
  add("replicas=" + std::to_string(base.replicas));
  for (const auto& [k, v] : sorted) add(k + "=" + v);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(canon)));
  const std::string prefix = readable(sorted, 96);
  return (prefix.empty() ? std::string("base") : prefix) + "-" + hash;
}

std::vector<SweepPoint> expand(const SweepBase& base, const std::vector<Axis>& axes) {
  std::set<std::string> seen;
  for (const auto& a : axes) {
    if (a.keys.empty()) throw PlanError("an axis without a key");
    for (const auto& k : a.keys)
      if (!seen.insert(k).second) throw PlanError("key " + k + " is swept twice");
    if (a.values.empty()) throw PlanError("axis " + a.keys[0] + " has no values");
    for (const auto& v : a.values)
      if (v.size() != a.keys.size())
        throw PlanError("--zip lists must all have the same length (" + a.keys[0] + ")");
  }
  std::vector<SweepPoint> out;
  std::vector<std::size_t> idx(axes.size(), 0);
  while (true) {
    SweepPoint p;
    for (std::size_t a = 0; a < axes.size(); ++a)
      for (std::size_t k = 0; k < axes[a].keys.size(); ++k)
        p.params.emplace_back(axes[a].keys[k], axes[a].values[idx[a]][k]);
    p.id = point_id(base, p.params);
    out.push_back(std::move(p));
    // Odometer: the last axis moves fastest.
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++idx[a] < axes[a].values.size()) break;
      idx[a] = 0;
      if (a == 0) return out;
    }
    if (axes.empty()) return out;
  }
}

std::string format_double(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace faultline::analysis
