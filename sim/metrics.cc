#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "traces/stats.h"

namespace faultline::sim {

using nlohmann::json;

void CategoryTotals::add(const ReplicaResult& r) {
  if (categories.size() < r.categories.size()) categories.resize(r.categories.size());
  for (std::size_t c = 0; c < r.categories.size(); ++c) {
    const CategoryStats& k = r.categories[c];
    Sums& s = categories[c];
    s.recurred += k.recurred;
    for (int o = 0; o < kOutcomes; ++o) s.outcomes[o] += k.outcomes[o];
    s.incidents += k.incidents;
    s.injected += k.injected;
    s.resolution_sum_s += k.resolution_sum_s;
    s.resolution_max_s = std::max(s.resolution_max_s, k.resolution_max_s);
    s.detection_sum_s += k.detection_sum_s;
    s.detected += k.detected;
  }
  if (resolved_by.size() < r.resolved_by.size()) resolved_by.resize(r.resolved_by.size());
  for (std::size_t m = 0; m < r.resolved_by.size(); ++m) resolved_by[m] += r.resolved_by[m];
}

void release_categories(ReplicaResult& r) {
  std::vector<CategoryStats>().swap(r.categories);
  std::vector<std::int64_t>().swap(r.resolved_by);
}

std::vector<std::uint8_t> encode(const ReplicaResult& r) {
  json j;
  const auto& b = r.breakdown;
  j["r"] = r.replica;
  j["e"] = r.ettr;
  json jb = json::array();
  for (const auto& k : kBuckets) jb.push_back(b.*k.field);
  j["b"] = jb;
  json cats = json::array();
  for (const auto& c : r.categories)
    cats.push_back({c.incidents, c.injected, c.resolution_sum_s, c.resolution_max_s,
                    c.detection_sum_s, c.detected, c.recurred,
                    json(std::vector<std::int64_t>(std::begin(c.outcomes), std::end(c.outcomes)))});
  j["c"] = cats;
  j["v"] = {r.evictions_true,
            r.evictions_false,
            r.faults_injected,
            r.checkpoints,
            r.events,
            r.flow_batches_real,
            r.flow_batches_cached,
            r.steps,
            r.evictions_false_positive,
            r.false_failures,
            r.max_fruitless_rounds,
            r.health_check_drains,
            r.repairs,
            r.retired,
            r.runs_ended,
            r.incident_count};
  j["o"] = {r.dominant.category, r.dominant.at_s, r.dominant.resolution_s};
  json tl = json::array();
  for (const auto& p : r.timeline) tl.push_back({p.t_h, p.cumulative, p.window_1h, p.waiting_h});
  j["t"] = tl;
  json inc = json::array();
  for (const auto& i : r.incidents)
    inc.push_back({i.at_s, i.category, i.detected_s, i.resolved_s, i.slots, i.resolution,
                   i.machines, i.evicted});
  j["i"] = inc;
  j["d"] = r.decisions;
  j["m"] = r.resolved_by;
  j["x"] = r.standby_exhaustions;
  j["f"] = r.remote_fallbacks;
  j["u"] = r.cpu_s;
  j["w"] = {r.elapsed_s,     r.finished,    r.exposure_s, r.machines_beyond_fleet,
            r.machines_used, r.preemptions, r.depleted};
  return json::to_msgpack(j);
}

ReplicaResult decode(const std::vector<std::uint8_t>& bytes) {
  json j = json::from_msgpack(bytes);
  ReplicaResult r;
  r.replica = j["r"];
  r.ettr = j["e"];
  auto& b = r.breakdown;
  const auto& jb = j["b"];
  std::size_t i = 0;
  for (const auto& k : kBuckets) b.*k.field = jb.at(i++);
  for (const auto& c : j["c"]) {
    CategoryStats k{c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
    for (int o = 0; o < kOutcomes; ++o) k.outcomes[o] = c[7][o];
    r.categories.push_back(k);
  }
  const auto& v = j["v"];
  r.evictions_true = v[0];
  r.evictions_false = v[1];
  r.faults_injected = v[2];
  r.checkpoints = v[3];
  r.events = v[4];
  r.flow_batches_real = v[5];
  r.flow_batches_cached = v[6];
  r.steps = v[7];
  r.evictions_false_positive = v[8];
  r.false_failures = v[9];
  r.max_fruitless_rounds = v[10];
  r.health_check_drains = v[11];
  r.repairs = v[12];
  r.retired = v[13];
  r.runs_ended = v[14];
  r.incident_count = v[15];
  r.dominant = {j["o"][0], j["o"][1], j["o"][2]};
  for (const auto& p : j["t"]) r.timeline.push_back({p[0], p[1], p[2], p[3]});
  for (const auto& i : j["i"])
    r.incidents.push_back({i[0], i[1], i[2], i[3], i[4].get<std::vector<int>>(), i[5],
                           i[6].get<std::vector<int>>(), i[7].get<std::vector<int>>()});
  r.decisions = j["d"].get<std::vector<std::string>>();
  r.resolved_by = j["m"].get<std::vector<std::int64_t>>();
  r.standby_exhaustions = j["x"];
  r.remote_fallbacks = j["f"];
  r.cpu_s = j["u"];
  const auto& w = j["w"];
  r.elapsed_s = w[0];
  r.finished = w[1];
  r.exposure_s = w[2];
  r.machines_beyond_fleet = w[3];
  r.machines_used = w[4];
  r.preemptions = w[5];
  r.depleted = w[6];
  return r;
}

Summary summarize(const std::vector<double>& xs) {
  Summary s;
  if (xs.empty()) return s;
  double sum = 0;
  for (double x : xs) sum += x;
  s.mean = sum / xs.size();
  double ss = 0;
  for (double x : xs) ss += (x - s.mean) * (x - s.mean);
  s.stddev = xs.size() > 1 ? std::sqrt(ss / (xs.size() - 1)) : 0;
  const double half =
      xs.size() > 1 ? traces::student_t95(xs.size() - 1) * s.stddev / std::sqrt(xs.size()) : 0;
  s.lo = s.mean - half;
  s.hi = s.mean + half;
  s.min = *std::min_element(xs.begin(), xs.end());
  s.max = *std::max_element(xs.begin(), xs.end());
  return s;
}

}  // namespace faultline::sim
