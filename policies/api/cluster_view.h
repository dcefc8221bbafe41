// What a policy may know about the cluster: topology, the job's layout, the standby
// pool and the *observed* health of machines.
//
// The topology is a Boost.Graph (machines under ToR switches, leaves, spines, storage)
// that the simulator turns into its SimGrid platform and that localization policies
// walk (e.g. "which machines share this ToR"). The layout answers parallel-group
// queries: the job has TP x PP x DP ranks, `gpus_per_machine` consecutive ranks per
// machine, rank order tensor-fastest, then pipeline stage, then data-parallel replica
// (rank = t + TP * (p + PP * d)). With TP equal to the GPUs per machine, slot x holds
// stage x mod PP of replica x / PP, so a PP group is PP consecutive slots (docs/domain.md
// §4). A TP group wider than a machine spans TP / gpus_per_machine consecutive slots, which
// lie in one NVLink domain (an NVSwitch fabric, such as a GB200 NVL72 rack of 18 trays): the job's
// slots fill the domains `nvlink_domain` at a time, and every machine knows its domain.
//
// Ground truth (which machine is really broken) is never here: health is what the
// backend has observed or what a policy has decided (suspect, evicted).
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "policies/api/ids.h"

namespace faultline {

// Plain description of the cluster and the job layout, filled by scenarios/ or the
// live config.
struct ClusterSpec {
  int machines = 0;  // machines running the job (= job slots)
  int gpus_per_machine = 8;
  int rack_size = 16;      // machines under one ToR switch
  int racks_per_pod = 16;  // ToRs under one leaf switch
  int spines = 8;
  int standby_machines = 0;          // warm standbys parked outside the job
  int storage_hosts = 4;             // remote storage / image registry front ends
  double nic_gbps = 3200;            // per machine (8 x 400 Gb/s RDMA)
  double tor_uplink_gbps = 25600;    // per ToR, all uplinks together
  double leaf_uplink_gbps = 204800;  // per leaf, all uplinks together
  double storage_gbps = 400;         // per storage host
  double link_latency_us = 2;
  int tp = 8;
  int pp = 1;
  int dp = 1;
  // The work a slow machine's share can be moved in (MitigateSlowdown): micro-batches per
  // data-parallel replica per step, and transformer layers per pipeline stage.
  int micro_batches = 16;
  int layers_per_stage = 12;
  // Machines per NVLink domain that the job's slots fill (1: each machine is its own, the
  // HGX case), and each machine's NVLink bandwidth into its domain's NVSwitches.
  int nvlink_domain = 1;
  double nvlink_gbps = 0;
  // Trays of each domain the job leaves free (a GB200 NVL72 rack of 18 running 16: 2): the
  // spares in the job's own racks.
  int nvlink_spares = 0;
};

// Throughput, relative to every worker at full speed, of `parts` workers in lockstep that
// share parts*units whole units of work when one of them runs `f` times slower and the
// units are rebalanced: the slow worker keeps k units, the others share the rest as
// evenly as whole units allow, for the best k. It is 1/f with parts == 1 or units == 0
// (nothing to move), and at most 1.
double rebalanced_rate(int parts, int units, double f);
// The job's step rate (relative to healthy) with one machine `f` times slower, at a level
// of mitigation: 0 tolerated (1/f), 1 its micro-batches rebalanced over the data-parallel
// replicas, 2 its pipeline stage's layers rebalanced over its pipeline first (the pipeline
// then runs at rebalanced_rate(pp, layers_per_stage, f)) and then the micro-batches over
// the replicas, as a pipeline that much slower. The ground truth of the simulator and
// what a fail-slow module predicts from the job's shape.
double straggler_rate(const ClusterSpec& spec, double f, int level);

// kNvSwitch: one per NVLink domain (with nvlink_domain > 1), linked to its machines.
enum class NodeKind : std::uint8_t { kMachine, kTor, kLeaf, kSpine, kStorage, kNvSwitch };

struct TopoNode {
  NodeKind kind = NodeKind::kMachine;
  int index = 0;  // machine id, rack index, pod index, spine index, storage index or domain
};
struct TopoLink {
  double bandwidth_bps = 0;  // bytes per second, all parallel links together
  double latency_s = 0;
};
using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, TopoNode, TopoLink>;
using TopoVertex = TopologyGraph::vertex_descriptor;

enum class Health : std::uint8_t { kHealthy, kSuspect, kEvicted };

class ClusterView {
 public:
  // Builds topology and layout. Requires a spec that scenarios/ validated: tp*pp*dp ==
  // machines*gpus_per_machine, gpus_per_machine % tp == 0 or (tp % gpus_per_machine == 0
  // and nvlink_domain * gpus_per_machine % tp == 0), machines % nvlink_domain == 0.
  explicit ClusterView(const ClusterSpec& spec);

  const ClusterSpec& spec() const { return spec_; }
  int slots() const { return spec_.machines; }
  int gpus() const { return spec_.machines * spec_.gpus_per_machine; }
  // Machines known to the cluster (job + standby + replacements handed out so far).
  int machine_count() const { return static_cast<int>(slot_of_.size()); }

  // --- topology -----------------------------------------------------------------
  const TopologyGraph& graph() const { return topo_->graph; }
  TopoVertex machine_vertex(MachineId m) const;  // requires m < initial machines
  int rack_of_slot(SlotId s) const { return s / spec_.rack_size; }
  int racks() const { return (spec_.machines + spec_.rack_size - 1) / spec_.rack_size; }
  // Slots under the same ToR as s, in increasing order.
  std::vector<SlotId> rack_slots(int rack) const;
  // NVLink domains: the job's slots fill them nvlink_domain at a time.
  int nvlink_domains() const { return spec_.machines / spec_.nvlink_domain; }
  int domain_of_slot(SlotId s) const { return s / spec_.nvlink_domain; }
  // The NVLink domain machine m sits in: the job's machines and spares in the job's racks
  // have one; -1 for a machine outside them (the wider cluster). Set by the backend.
  int domain_of(MachineId m) const { return domain_[m]; }
  // Whether the machine in slot s sits in the slot's own domain (an empty slot does not).
  bool in_own_domain(SlotId s) const {
    const MachineId m = machine_of_slot_[s];
    return m != kNoMachine && domain_[m] == domain_of_slot(s);
  }

  // --- layout ---------------------------------------------------------------------
  // Machines one TP group spans (1 when TP fits in a machine).
  int tp_span() const {
    return spec_.tp > spec_.gpus_per_machine ? spec_.tp / spec_.gpus_per_machine : 1;
  }
  // Slots holding slot s's tensor-parallel group(s): s alone when TP fits in a machine.
  std::vector<SlotId> tp_group(SlotId s) const;
  // Slots holding ranks of the same pipeline(s) (same DP index) as slot s.
  std::vector<SlotId> pp_group(SlotId s) const;
  // Slots holding the same pipeline stage(s) as slot s in every replica.
  std::vector<SlotId> dp_group(SlotId s) const;
  // Index of the PP group of slot s (the replica of its first rank).
  int pp_group_index(SlotId s) const;
  int pp_groups() const { return spec_.dp; }
  // Slots of PP group g (ranks with DP index g).
  std::vector<SlotId> pp_group_slots(int g) const;
  // Slots of DP group for stage p.
  std::vector<SlotId> dp_group_slots(int stage) const;
  SlotId slot_of_rank(std::int64_t rank) const {
    return static_cast<SlotId>(rank / spec_.gpus_per_machine);
  }

  // --- who is where -----------------------------------------------------------------
  MachineId machine_in(SlotId s) const { return machine_of_slot_[s]; }
  // Every slot's machine in slot order (kNoMachine where a slot is empty).
  const std::vector<MachineId>& machines_by_slot() const { return machine_of_slot_; }
  int empty_slot_count() const {
    return empty_slots_;
  }  // slots with no machine, kept as they change
  // Those of `slots` that exist and hold a machine, in their order.
  std::vector<SlotId> occupied(const std::vector<SlotId>& slots) const;
  // The machines the job runs on, in slot order (empty slots skipped).
  std::vector<MachineId> placed_machines() const;
  // Slot that machine m serves, or -1 when m is standby, evicted or idle.
  SlotId slot_of(MachineId m) const { return slot_of_[m]; }
  // The slots these machines serve, in increasing order; a machine the view does not know
  // (a report naming a machine id that is out of range) or that serves no slot is skipped.
  std::vector<SlotId> slots_of(const std::vector<MachineId>& machines) const;
  const std::vector<MachineId>& standby() const { return standby_; }
  Health health(MachineId m) const { return health_[m]; }

  // --- mutation: backends only ---------------------------------------------------
  // Registers a new machine (replacement from the scheduler or a refilled standby).
  MachineId add_machine();
  void place(MachineId m, SlotId s);  // m now serves s; the previous occupant is unplaced
  void vacate(SlotId s);              // s has no machine until the next place()
  void set_health(MachineId m, Health h) { health_[m] = h; }
  void set_domain(MachineId m, int d) { domain_[m] = d; }
  void add_standby(MachineId m) { standby_.push_back(m); }
  // Removes m from the standby list; returns false when it was not there.
  bool take_standby(MachineId m);

 private:
  // The topology never changes after construction: copies of a view (one per
  // simulated replica) share it.
  struct Topology {
    TopologyGraph graph;
    std::vector<TopoVertex> machine_vertex;
  };
  static std::shared_ptr<const Topology> build_topology(const ClusterSpec& spec, int racks);
  ClusterSpec spec_;
  std::shared_ptr<const Topology> topo_;
  std::vector<MachineId> machine_of_slot_;
  int empty_slots_ = 0;
  std::vector<SlotId> slot_of_;
  std::vector<Health> health_;
  std::vector<int> domain_;  // by machine: its NVLink domain, -1 outside the job's
  std::vector<MachineId> standby_;
};

}  // namespace faultline
