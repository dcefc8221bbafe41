#include "traces/arrivals.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "policies/api/rng.h"
#include "traces/config.h"

namespace faultline::traces {

FleetTimelines build_timelines(const Trace& t, const CategoryMap& map, int fleet_nodes) {
  FleetTimelines tl;
  tl.trace_nodes = t.nodes.size();
  const int fleet = fleet_nodes > 0
                        ? fleet_nodes
                        : (t.fleet_nodes > 0 ? t.fleet_nodes : static_cast<int>(t.nodes.size()));
  if (fleet < static_cast<int>(t.nodes.size()))
    throw TraceError("fleet of " + std::to_string(fleet) + " nodes is smaller than the " +
                     std::to_string(t.nodes.size()) + " nodes in the trace");
  tl.nodes.resize(static_cast<std::size_t>(fleet));
  tl.category_scope = map.scopes;
  auto [w0, w1] = t.observation_window();
  tl.window_start_s = w0;
  tl.window_end_s = w1;
  const PairingResult p = pair_faults(t);
  tl.mapping = map_faults(t, p.faults, map);
  for (std::size_t i = 0; i < p.faults.size(); ++i) {
    const int c = tl.mapping.category[i];
    if (c < 0) continue;
    tl.nodes[static_cast<std::size_t>(p.faults[i].node)].push_back({p.faults[i].start_s, c});
    ++tl.faults;
  }
  return tl;
}

namespace {

std::int32_t target_slot(Scope scope, int slot, int rack_size) {
  switch (scope) {
    case Scope::kRack:
    case Scope::kSwitch:
      return slot - slot % std::max(1, rack_size);
    case Scope::kJob:
      return 0;
    case Scope::kNode:
      break;
  }
  return slot;
}

}  // namespace

std::vector<ScriptedArrival> trace_arrivals(const FleetTimelines& tl, const ArrivalOptions& opt,
                                            std::uint64_t seed, std::uint64_t replica) {
  std::vector<ScriptedArrival> out;
  if (opt.slots <= 0 || tl.nodes.empty() || !(opt.time_scale > 0) || !(opt.horizon_s > 0))
    return out;
  Rng rng({seed, replica, 0x7ACE5ull});
  const double horizon_s = std::min(opt.horizon_s, 9.0e9);  // keeps ns below INT64_MAX
  auto emit = [&](double at_s, std::int32_t cat, int slot) {
    if (!(at_s >= 0) || !(at_s < horizon_s)) return;
    const Scope sc = static_cast<std::size_t>(cat) < tl.category_scope.size()
                         ? tl.category_scope[static_cast<std::size_t>(cat)]
                         : Scope::kNode;
    out.push_back(
        {static_cast<std::int64_t>(at_s * 1e9), cat, target_slot(sc, slot, opt.rack_size)});
  };
  const auto fleet = static_cast<int>(tl.nodes.size());
  // Bootstrap of one slot: a whole fleet node's timeline from a uniform phase, circularly
  // over the observation window for the whole horizon.
  const double w = tl.window_end_s - tl.window_start_s;
  auto bootstrap = [&](int slot, Rng& draw) {
    const auto node = static_cast<std::size_t>(draw.below(static_cast<std::uint64_t>(fleet)));
    const double phase = draw.uniform() * w;
    const double period = w * opt.time_scale;
    for (const TimelineFault& f : tl.nodes[node]) {
      double tau = std::fmod(f.t_s - tl.window_start_s - phase, w);
      if (tau < 0) tau += w;
      if (!(tau < w)) tau = 0;
      for (double at = tau * opt.time_scale; at < horizon_s; at += period)
        emit(at, f.category, slot);
    }
  };
  if (opt.mode == ArrivalMode::kReplay) {
    const int n = std::max(fleet, opt.slots);
    std::vector<int> slot_of(static_cast<std::size_t>(n));
    std::iota(slot_of.begin(), slot_of.end(), 0);
    if (opt.order == NodeOrder::kRandom) {
      for (int i = n - 1; i > 0; --i)
        std::swap(slot_of[static_cast<std::size_t>(i)],
                  slot_of[rng.below(static_cast<std::uint64_t>(i) + 1)]);
    }
    std::vector<bool> driven(static_cast<std::size_t>(opt.slots), false);
    for (int node = 0; node < fleet; ++node) {
      const int slot = slot_of[static_cast<std::size_t>(node)];
      if (slot >= opt.slots) continue;
      driven[static_cast<std::size_t>(slot)] = true;
      for (const TimelineFault& f : tl.nodes[static_cast<std::size_t>(node)])
        emit((f.t_s - opt.start_s) * opt.time_scale, f.category, slot);
    }
    if (opt.extra_slots == ExtraSlots::kBootstrap && w > 0) {
      // Its own stream: the replayed slots keep exactly the draws they had without it.
      Rng extra({seed, replica, 0xE7A5ull});
      for (int slot = 0; slot < opt.slots; ++slot)
        if (!driven[static_cast<std::size_t>(slot)]) bootstrap(slot, extra);
    }
  } else {
    if (!(w > 0)) return out;
    for (int slot = 0; slot < opt.slots; ++slot) bootstrap(slot, rng);
  }
  std::sort(out.begin(), out.end(), [](const ScriptedArrival& a, const ScriptedArrival& b) {
    if (a.at_ns != b.at_ns) return a.at_ns < b.at_ns;
    if (a.category != b.category) return a.category < b.category;
    return a.slot < b.slot;
  });
  return out;
}

SimTrace load_sim_trace(const SimTraceSpec& spec) {
  SimTrace st;
  ColumnMap columns;
  const ColumnMap* cols = nullptr;
  if (spec.format == Format::kColumns) {
    if (spec.columns.empty())
      throw SimTraceError("columns", "required for format \"columns\": a column-map file");
    try {
      columns = load_column_map(spec.columns);
    } catch (const TraceError& e) {
      throw SimTraceError("columns", e.what());
    }
    cols = &columns;
  }
  ReadOptions ro;
  ro.strict = spec.strict;
  ReadResult rr = read_trace_file(spec.file, spec.format, ro, cols);
  if (!rr.error.empty()) throw SimTraceError("file", rr.error);
  if (rr.stopped)
    throw SimTraceError(
        "file", rr.first_issue + " (bad record; set \"strict\": false to skip such records)");
  if (rr.trace.events.empty()) throw SimTraceError("file", spec.file + ": no fault events read");
  st.skipped_records = rr.skipped;
  rr.trace.sort_by_time();
  if (!spec.mapping.empty()) {
    try {
      st.map = load_category_map(spec.mapping);
    } catch (const TraceError& e) {
      throw SimTraceError("mapping", e.what());
    }
  } else {
    st.map = identity_category_map(rr.trace);
  }
  try {
    st.timelines = build_timelines(rr.trace, st.map, spec.fleet_nodes);
  } catch (const TraceError& e) {
    throw SimTraceError("fleet_nodes", e.what());
  }
  const MappedFaults& m = st.timelines.mapping;
  if (spec.strict && m.unmapped > 0)
    throw SimTraceError(
        "mapping", spec.mapping + ": " + std::to_string(m.unmapped) + " faults of " + spec.file +
                       " match no rule (first at line " + std::to_string(m.unmapped_lines.front()) +
                       "); add a rule or a \"default\" category");
  if (spec.strict && m.scope_mismatch > 0)
    throw SimTraceError("mapping",
                        spec.mapping + ": " + std::to_string(m.scope_mismatch) +
                            " rack/switch/job-scope faults of " + spec.file +
                            " map to a category of narrower scope (first at line " +
                            std::to_string(m.mismatch_lines.front()) +
                            "); add a rule sending them to a rack- or job-scope category");
  return st;
}

}  // namespace faultline::traces
