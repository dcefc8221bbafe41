// Faults from a trace, for the simulator: exact replay and bootstrap.
//
// A trace becomes per-node fault timelines (each fault mapped to a category of a
// mapping table), one per fleet node, fault-free nodes included: a 400-server trace
// with 231 failing servers gives 400 timelines, 169 of them empty, because the fleet
// size is what sets the rate. Then, for one replica:
//
// - replay: trace node i drives job slot i (in order of first appearance in the
//   trace) or a random injective assignment; simulated time = (trace time -
//   start_day) x time_scale; faults outside [0, horizon) are dropped. With more slots
//   than fleet nodes, the slots no node drives are bootstrapped (below) or left
//   fault-free, as ArrivalOptions::extra_slots says; with fewer, the nodes beyond the
//   slots (the last in order, or a random subset) are not used.
// - bootstrap: every job slot draws a whole timeline from the fleet (with
//   replacement) and a uniform phase, and replays it circularly over the trace's
//   observation window, so a 400-node trace drives 12,500 machines with the trace's
//   per-node rate, burstiness and class mix. Independent phases keep the copies of one
//   trace node from failing in lockstep.
//
// Rack- and switch-scope faults hit the first slot of the slot's rack (the simulator
// then takes every machine under that ToR), job-scope faults slot 0. Draws come from
// an Rng seeded by (seed, replica), so replicas are independent and reproducible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/category_map.h"
#include "traces/config.h"
#include "traces/readers.h"
#include "traces/trace.h"

namespace faultline::traces {

struct TimelineFault {
  double t_s = 0;             // trace time
  std::int32_t category = 0;  // index into the mapping's categories
};

struct FleetTimelines {
  std::vector<std::vector<TimelineFault>> nodes;  // fleet entries; trace nodes first
  std::vector<Scope> category_scope;              // per mapping category: kNode, kRack or kJob
  double window_start_s = 0, window_end_s = 0;
  std::size_t trace_nodes = 0;
  std::size_t faults = 0;  // faults on the timelines
  MappedFaults mapping;    // how the trace's faults mapped
};

// Throws TraceError when the fleet is smaller than the trace's node count.
FleetTimelines build_timelines(const Trace& t, const CategoryMap& map, int fleet_nodes);

enum class ArrivalMode : std::uint8_t { kReplay, kBootstrap };
enum class NodeOrder : std::uint8_t { kInOrder, kRandom };
// Replay onto more slots than fleet nodes: what the slots no node drives get.
enum class ExtraSlots : std::uint8_t {
  kFaultFree,  // nothing (a scenario must choose this explicitly: faults.trace.extra_slots)
  kBootstrap,  // each draws a fleet node (with replacement) and a uniform phase, as in bootstrap
};

struct ArrivalOptions {
  ArrivalMode mode = ArrivalMode::kBootstrap;
  NodeOrder order = NodeOrder::kInOrder;            // replay only
  ExtraSlots extra_slots = ExtraSlots::kFaultFree;  // replay only
  double time_scale = 1;                            // simulated seconds per trace second
  double start_s = 0;                               // replay: trace time that becomes time zero
  int slots = 0;
  int rack_size = 1;
  double horizon_s = 0;
};

struct ScriptedArrival {
  std::int64_t at_ns = 0;
  std::int32_t category = 0;  // mapping category
  std::int32_t slot = 0;      // machine slot; first slot of the rack (rack); 0 (job)
};

// The replica's arrivals in (time, category, slot) order.
std::vector<ScriptedArrival> trace_arrivals(const FleetTimelines& tl, const ArrivalOptions& opt,
                                            std::uint64_t seed, std::uint64_t replica);

// What a scenario's faults.trace names, resolved to paths.
struct SimTraceSpec {
  std::string file;
  Format format = Format::kAuto;
  std::string columns;  // column-map file (format columns)
  std::string mapping;  // category mapping file; empty = one category per trace class
  int fleet_nodes = 0;  // 0 = the trace's declared fleet, else its distinct nodes
  bool strict = true;
};

// Raised by load_sim_trace; `field` is the faults.trace key at fault.
class SimTraceError : public std::runtime_error {
 public:
  SimTraceError(std::string field, const std::string& what)
      : std::runtime_error(what), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

struct SimTrace {
  CategoryMap map;
  FleetTimelines timelines;
  std::size_t skipped_records = 0;  // bad records skipped (strict false)
};

// Reads the trace, the column map and the mapping table, and builds the timelines.
// Throws SimTraceError. In strict mode a bad record, an unmapped fault or a scope
// mismatch is an error; otherwise they are counted and left out.
SimTrace load_sim_trace(const SimTraceSpec& spec);

}  // namespace faultline::traces
