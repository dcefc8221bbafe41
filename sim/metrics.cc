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

namespace {

// The result's scalar fields by name: what encode writes and decode reads. The message
// goes from a forked replica (or an MPI rank) to the parent of the same build, so it is
// not a file format; the names only keep each field's place from being a position.
template <class T>
struct Field {
  const char* name;
  T ReplicaResult::*member;
};
constexpr Field<std::int64_t> kCounts[] = {
    {"evictions_true", &ReplicaResult::evictions_true},
    {"evictions_false", &ReplicaResult::evictions_false},
    {"evictions_false_positive", &ReplicaResult::evictions_false_positive},
    {"false_failures", &ReplicaResult::false_failures},
    {"health_check_drains", &ReplicaResult::health_check_drains},
    {"repairs", &ReplicaResult::repairs},
    {"retired", &ReplicaResult::retired},
    {"runs_ended", &ReplicaResult::runs_ended},
    {"incident_count", &ReplicaResult::incident_count},
    {"faults_injected", &ReplicaResult::faults_injected},
    {"checkpoints", &ReplicaResult::checkpoints},
    {"events", &ReplicaResult::events},
    {"flow_batches_real", &ReplicaResult::flow_batches_real},
    {"flow_batches_cached", &ReplicaResult::flow_batches_cached},
    {"steps", &ReplicaResult::steps},
    {"standby_exhaustions", &ReplicaResult::standby_exhaustions},
    {"remote_fallbacks", &ReplicaResult::remote_fallbacks},
    {"warnings", &ReplicaResult::warnings},
    {"warnings_false", &ReplicaResult::warnings_false},
    {"migrations", &ReplicaResult::migrations},
    {"migrations_needless", &ReplicaResult::migrations_needless},
    {"machines_beyond_fleet", &ReplicaResult::machines_beyond_fleet},
    {"machines_used", &ReplicaResult::machines_used},
    {"preemptions", &ReplicaResult::preemptions},
};
constexpr Field<double> kReals[] = {
    {"ettr", &ReplicaResult::ettr},
    {"elapsed_s", &ReplicaResult::elapsed_s},
    {"exposure_s", &ReplicaResult::exposure_s},
    {"cpu_s", &ReplicaResult::cpu_s},
};
constexpr Field<bool> kFlags[] = {
    {"finished", &ReplicaResult::finished},
    {"depleted", &ReplicaResult::depleted},
};

}  // namespace

std::vector<std::uint8_t> encode(const ReplicaResult& r) {
  json j;
  j["replica"] = r.replica;
  for (const auto& f : kCounts) j[f.name] = r.*f.member;
  for (const auto& f : kReals) j[f.name] = r.*f.member;
  for (const auto& f : kFlags) j[f.name] = r.*f.member;
  j["max_fruitless_rounds"] = r.max_fruitless_rounds;
  json jb = json::array();
  for (const auto& k : kBuckets) jb.push_back(r.breakdown.*k.field);
  j["breakdown"] = jb;  // in kBuckets' order
  json cats = json::array();
  for (const auto& c : r.categories)
    cats.push_back({c.incidents, c.injected, c.resolution_sum_s, c.resolution_max_s,
                    c.detection_sum_s, c.detected, c.recurred,
                    json(std::vector<std::int64_t>(std::begin(c.outcomes), std::end(c.outcomes)))});
  j["categories"] = cats;  // CategoryStats' fields in declaration order
  j["dominant"] = {r.dominant.category, r.dominant.at_s, r.dominant.resolution_s};
  json tl = json::array();
  for (const auto& p : r.timeline) tl.push_back({p.t_h, p.cumulative, p.window_1h, p.waiting_h});
  j["timeline"] = tl;
  json inc = json::array();
  for (const auto& i : r.incidents)
    inc.push_back({i.at_s, i.category, i.detected_s, i.resolved_s, i.slots, i.resolution,
                   i.machines, i.evicted});
  j["incidents"] = inc;
  j["decisions"] = r.decisions;
  j["resolved_by"] = r.resolved_by;
  const Attributed& a = r.attributed;
  j["attributed"] = {
      a.init,          a.inplace_init,
      a.requeue,       a.reschedule,
      a.standby_wake,  a.on_call,
      a.replay,        json(std::vector<std::int64_t>(std::begin(a.probe), std::end(a.probe))),
      a.mfu_checkpoint};  // Attributed's fields in declaration order
  return json::to_msgpack(j);
}

ReplicaResult decode(const std::vector<std::uint8_t>& bytes) {
  const json j = json::from_msgpack(bytes);
  ReplicaResult r;
  r.replica = j.at("replica");
  for (const auto& f : kCounts) r.*f.member = j.at(f.name);
  for (const auto& f : kReals) r.*f.member = j.at(f.name);
  for (const auto& f : kFlags) r.*f.member = j.at(f.name);
  r.max_fruitless_rounds = j.at("max_fruitless_rounds");
  std::size_t i = 0;
  for (const auto& k : kBuckets) r.breakdown.*k.field = j.at("breakdown").at(i++);
  for (const auto& c : j.at("categories")) {
    CategoryStats k{c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
    for (int o = 0; o < kOutcomes; ++o) k.outcomes[o] = c[7][o];
    r.categories.push_back(k);
  }
  const auto& o = j.at("dominant");
  r.dominant = {o[0], o[1], o[2]};
  for (const auto& p : j.at("timeline")) r.timeline.push_back({p[0], p[1], p[2], p[3]});
  for (const auto& x : j.at("incidents"))
    r.incidents.push_back({x[0], x[1], x[2], x[3], x[4].get<std::vector<int>>(), x[5],
                           x[6].get<std::vector<int>>(), x[7].get<std::vector<int>>()});
  r.decisions = j.at("decisions").get<std::vector<std::string>>();
  r.resolved_by = j.at("resolved_by").get<std::vector<std::int64_t>>();
  const auto& a = j.at("attributed");
  Attributed& x = r.attributed;
  x.init = a[0];
  x.inplace_init = a[1];
  x.requeue = a[2];
  x.reschedule = a[3];
  x.standby_wake = a[4];
  x.on_call = a[5];
  x.replay = a[6];
  for (int k = 0; k < kProbeKinds; ++k) x.probe[k] = a[7][k];
  x.mfu_checkpoint = a[8];
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
