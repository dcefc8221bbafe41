#include "traces/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <unordered_set>

namespace faultline::traces {

using nlohmann::json;

double quantile_sorted(const std::vector<double>& s, double p) {
  if (s.empty()) return NAN;
  const double h = (static_cast<double>(s.size()) - 1) * std::clamp(p, 0.0, 1.0);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (h - static_cast<double>(lo)) * (s[hi] - s[lo]);
}

double median(std::vector<double> xs) {
  if (xs.empty()) return NAN;
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

Summary summarize(std::vector<double> xs) {
  Summary s;
  s.n = xs.size();
  if (xs.empty()) return s;
  double sum = 0;
  for (double x : xs) sum += x;
  s.mean = sum / static_cast<double>(xs.size());
  double ss = 0;
  for (double x : xs) ss += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(ss / static_cast<double>(xs.size()));
  const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  s.min = *lo;
  s.max = *hi;
  // Selection instead of a full sort: a million-event trace sorts several such arrays.
  auto quantile = [&](double p) {
    const double h = (static_cast<double>(xs.size()) - 1) * p;
    const auto k = static_cast<std::size_t>(std::floor(h));
    std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
    const double a = xs[k];
    if (k + 1 >= xs.size()) return a;
    // The next order statistic is the smallest element of the upper part.
    const double b = *std::min_element(xs.begin() + static_cast<std::ptrdiff_t>(k) + 1, xs.end());
    return a + (h - static_cast<double>(k)) * (b - a);
  };
  s.median = quantile(0.5);
  s.p90 = quantile(0.9);
  return s;
}

namespace {

// Groups faults by a key: `group_of[i]` indexes `names` for fault i.
std::vector<GroupCount> groups(const std::vector<FaultSpan>& faults,
                               const std::vector<std::int32_t>& group_of,
                               const std::vector<std::string>& names) {
  std::vector<GroupCount> out(names.size());
  std::vector<std::vector<double>> repair(names.size());
  std::size_t max_node = 0;
  for (const FaultSpan& f : faults)
    max_node = std::max(max_node, static_cast<std::size_t>(f.node) + 1);
  // Distinct nodes per group: a bitmap when groups x nodes is small, else a sort.
  const bool bitmap = names.size() * max_node <= (std::size_t{1} << 26);
  std::vector<bool> seen(bitmap ? names.size() * max_node : 0);
  std::vector<std::uint64_t> node_keys;
  if (!bitmap) node_keys.reserve(faults.size());
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const auto g = static_cast<std::size_t>(group_of[i]);
    ++out[g].faults;
    const auto node = static_cast<std::size_t>(faults[i].node);
    if (bitmap) {
      if (!seen[g * max_node + node]) {
        seen[g * max_node + node] = true;
        ++out[g].nodes;
      }
    } else {
      node_keys.push_back((static_cast<std::uint64_t>(g) << 32) | static_cast<std::uint32_t>(node));
    }
    if (!faults[i].open()) repair[g].push_back(faults[i].duration_s() / 3600.0);
  }
  std::sort(node_keys.begin(), node_keys.end());
  for (std::size_t i = 0; i < node_keys.size(); ++i)
    if (i == 0 || node_keys[i] != node_keys[i - 1]) ++out[node_keys[i] >> 32].nodes;
  for (std::size_t g = 0; g < out.size(); ++g) {
    out[g].name = names[g];
    out[g].repair_h = summarize(std::move(repair[g]));
  }
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const GroupCount& g) { return g.faults == 0; }),
      out.end());
  std::stable_sort(out.begin(), out.end(), [](const GroupCount& a, const GroupCount& b) {
    return a.faults != b.faults ? a.faults > b.faults : a.name < b.name;
  });
  return out;
}

// Group index per fault for a category field (level or class).
std::vector<GroupCount> by_category_field(const Trace& t, const std::vector<FaultSpan>& faults,
                                          std::string Category::*field) {
  std::map<std::string, std::int32_t> index;
  std::vector<std::string> names;
  std::vector<std::int32_t> of_category(t.categories.size());
  for (std::size_t c = 0; c < t.categories.size(); ++c) {
    const std::string& k = t.categories[c].*field;
    auto [it, fresh] = index.emplace(k, static_cast<std::int32_t>(names.size()));
    if (fresh) names.push_back(k);
    of_category[c] = it->second;
  }
  std::vector<std::int32_t> group_of(faults.size());
  for (std::size_t i = 0; i < faults.size(); ++i)
    group_of[i] = of_category[static_cast<std::size_t>(faults[i].category)];
  return groups(faults, group_of, names);
}

json summary_json(const Summary& s) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return {
      {"n", s.n},          {"mean", num(s.mean)}, {"median", num(s.median)}, {"p90", num(s.p90)},
      {"min", num(s.min)}, {"max", num(s.max)},   {"stddev", num(s.stddev)}, {"cv", num(s.cv())}};
}

std::string fmt(const char* f, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string thousands(std::size_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

}  // namespace

TraceStats compute_stats(const Trace& t, const StatsOptions& opt) {
  TraceStats s;
  s.source = t.source;
  s.format = t.format;
  s.events = t.events.size();
  s.nodes = t.nodes.size();
  for (const Event& e : t.events) {
    switch (e.kind) {
      case EventKind::kFaultStart:
        ++s.fault_starts;
        break;
      case EventKind::kFaultEnd:
        ++s.fault_ends;
        break;
      case EventKind::kFault:
        ++s.whole_faults;
        break;
      case EventKind::kNodeJoin:
        ++s.joins;
        break;
    }
  }
  const PairingResult p = pair_faults(t);
  s.faults = p.faults.size();
  s.unmatched_ends = p.unmatched_ends;
  s.open_faults = p.open;
  auto [w0, w1] = t.observation_window();
  s.first_s = w0;
  s.last_s = w1;
  s.span_days = (w1 - w0) / 86400.0;

  if (opt.nodes > 0) {
    s.fleet_nodes = opt.nodes;
    s.fleet_source = "--nodes";
  } else if (t.fleet_nodes > 0) {
    s.fleet_nodes = t.fleet_nodes;
    s.fleet_source = "declared by the trace";
  } else {
    s.fleet_nodes = static_cast<int>(t.nodes.size());
    s.fleet_source = "distinct nodes in the trace";
  }
  if (s.faults > 0 && s.span_days > 0) {
    const double node_days = static_cast<double>(s.fleet_nodes) * s.span_days;
    s.faults_per_1000_node_days =
        node_days > 0 ? 1000.0 * static_cast<double>(s.faults) / node_days : NAN;
    s.fleet_mtbf_h = s.span_days * 24.0 / static_cast<double>(s.faults);
    s.node_mtbf_days = node_days / static_cast<double>(s.faults);
  }

  std::vector<double> repair, inter, tbf;
  repair.reserve(p.faults.size());
  inter.reserve(p.faults.size());
  std::vector<double> last_on_node(t.nodes.size(), NAN);
  double prev = NAN;
  std::vector<char> faulty(t.nodes.size(), 0);
  for (const FaultSpan& f : p.faults) {
    if (!f.open()) repair.push_back(f.duration_s() / 3600.0);
    if (!std::isnan(prev)) {
      const double gap = f.start_s - prev;
      inter.push_back(gap / 3600.0);
      if (gap == 0) ++s.simultaneous;
    }
    prev = f.start_s;
    double& last = last_on_node[static_cast<std::size_t>(f.node)];
    if (!std::isnan(last)) tbf.push_back((f.start_s - last) / 86400.0);
    last = f.start_s;
    if (!faulty[static_cast<std::size_t>(f.node)]) {
      faulty[static_cast<std::size_t>(f.node)] = 1;
      ++s.nodes_with_faults;
    }
  }
  s.repair_h = summarize(std::move(repair));
  s.interarrival_h = summarize(std::move(inter));
  s.node_tbf_days = summarize(std::move(tbf));

  s.by_level = by_category_field(t, p.faults, &Category::level);
  s.by_class = by_category_field(t, p.faults, &Category::cls);
  std::vector<std::int32_t> scope_of(p.faults.size());
  for (std::size_t i = 0; i < p.faults.size(); ++i)
    scope_of[i] = static_cast<std::int32_t>(p.faults[i].scope);
  s.by_scope = groups(p.faults, scope_of, {"node", "rack", "switch", "job"});
  return s;
}

json stats_json(const TraceStats& s) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  auto group_list = [&](const std::vector<GroupCount>& gs) {
    json a = json::array();
    for (const auto& g : gs)
      a.push_back({{"name", g.name},
                   {"faults", g.faults},
                   {"nodes", g.nodes},
                   {"repair_h", summary_json(g.repair_h)}});
    return a;
  };
  return {{"source", s.source},
          {"format", s.format},
          {"events",
           {{"total", s.events},
            {"fault_start", s.fault_starts},
            {"fault_end", s.fault_ends},
            {"fault", s.whole_faults},
            {"node_join", s.joins}}},
          {"faults", s.faults},
          {"unmatched_ends", s.unmatched_ends},
          {"open_faults", s.open_faults},
          {"nodes",
           {{"in_trace", s.nodes},
            {"with_faults", s.nodes_with_faults},
            {"fleet", s.fleet_nodes},
            {"fleet_source", s.fleet_source}}},
          {"span", {{"first_s", s.first_s}, {"last_s", s.last_s}, {"days", s.span_days}}},
          {"faults_per_1000_node_days", num(s.faults_per_1000_node_days)},
          {"fleet_mtbf_h", num(s.fleet_mtbf_h)},
          {"node_mtbf_days", num(s.node_mtbf_days)},
          {"repair_h", summary_json(s.repair_h)},
          {"interarrival_h", summary_json(s.interarrival_h)},
          {"simultaneous_faults", s.simultaneous},
          {"node_tbf_days", summary_json(s.node_tbf_days)},
          {"by_level", group_list(s.by_level)},
          {"by_class", group_list(s.by_class)},
          {"by_scope", group_list(s.by_scope)}};
}

std::string stats_table(const TraceStats& s) {
  std::string o;
  char buf[512];
  auto line = [&](const char* f, auto... args) {
    std::snprintf(buf, sizeof buf, f, args...);
    o += buf;
  };
  line("trace      %s (%s)\n", s.source.c_str(), s.format.c_str());
  line("events     %s: %zu fault_start, %zu fault_end, %zu whole faults, %zu node_join\n",
       thousands(s.events).c_str(), s.fault_starts, s.fault_ends, s.whole_faults, s.joins);
  line("faults     %s on %zu distinct nodes (%zu nodes in the trace; fleet %d nodes, %s)\n",
       thousands(s.faults).c_str(), s.nodes_with_faults, s.nodes, s.fleet_nodes,
       s.fleet_source.c_str());
  line("span       %s days (t = %s .. %s days)\n", fmt("%.2f", s.span_days).c_str(),
       fmt("%.4f", s.first_s / 86400).c_str(), fmt("%.4f", s.last_s / 86400).c_str());
  line("rate       %s faults per 1,000 node-days (%zu faults / (%d nodes x %s days))\n",
       fmt("%.3f", s.faults_per_1000_node_days).c_str(), s.faults, s.fleet_nodes,
       fmt("%.2f", s.span_days).c_str());
  line("MTBF       fleet %s h between faults anywhere; per node %s days\n",
       fmt("%.2f", s.fleet_mtbf_h).c_str(), fmt("%.1f", s.node_mtbf_days).c_str());
  line(
      "repair     %zu paired (%zu still open, %zu unmatched fault_end): median %s h, mean %s h, "
      "p90 %s h\n",
      s.repair_h.n, s.open_faults, s.unmatched_ends, fmt("%.2f", s.repair_h.median).c_str(),
      fmt("%.2f", s.repair_h.mean).c_str(), fmt("%.2f", s.repair_h.p90).c_str());
  line(
      "arrivals   fleet-wide gaps (n %zu): mean %s h, median %s h, p90 %s h, cv %s; %zu "
      "simultaneous\n",
      s.interarrival_h.n, fmt("%.2f", s.interarrival_h.mean).c_str(),
      fmt("%.2f", s.interarrival_h.median).c_str(), fmt("%.2f", s.interarrival_h.p90).c_str(),
      fmt("%.2f", s.interarrival_h.cv()).c_str(), s.simultaneous);
  line(
      "per node   gaps between faults of one node (n %zu): mean %s d, median %s d, p90 %s d, cv "
      "%s\n",
      s.node_tbf_days.n, fmt("%.1f", s.node_tbf_days.mean).c_str(),
      fmt("%.1f", s.node_tbf_days.median).c_str(), fmt("%.1f", s.node_tbf_days.p90).c_str(),
      fmt("%.2f", s.node_tbf_days.cv()).c_str());
  auto table = [&](const char* title, const std::vector<GroupCount>& gs) {
    line("\n%-32s %7s %7s %6s %15s\n", title, "faults", "share", "nodes", "repair med h");
    for (const auto& g : gs) {
      std::string name = g.name.empty() ? "(none)" : g.name;
      if (name.size() > 32) name = name.substr(0, 29) + "...";
      line("  %-30s %7zu %6.1f%% %6zu %15s\n", name.c_str(), g.faults,
           s.faults ? 100.0 * static_cast<double>(g.faults) / static_cast<double>(s.faults) : 0.0,
           g.nodes, fmt("%.2f", g.repair_h.median).c_str());
    }
  };
  table("level", s.by_level);
  table("class", s.by_class);
  if (s.by_scope.size() > 1 || (s.by_scope.size() == 1 && s.by_scope[0].name != "node"))
    table("scope", s.by_scope);
  return o;
}

double student_t95(std::size_t dof) {
  static const double table[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                 2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                 2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                 2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof == 0) return 0;
  if (dof <= 30) return table[dof];
  return 1.959964 + 2.4 / static_cast<double>(dof);  // close to t for large dof
}

}  // namespace faultline::traces
