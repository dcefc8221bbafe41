#include "policies/api/cluster_view.h"

#include <algorithm>

namespace faultline {

ClusterView::ClusterView(const ClusterSpec& spec) : spec_(spec) {
  machine_of_slot_.resize(spec_.machines);
  for (int s = 0; s < spec_.machines; ++s) {
    machine_of_slot_[s] = s;
    slot_of_.push_back(s);
    health_.push_back(Health::kHealthy);
    domain_.push_back(s / spec_.nvlink_domain);
  }
  for (int i = 0; i < spec_.standby_machines; ++i) standby_.push_back(add_machine());
  topo_ = build_topology(spec_, racks());
}

std::shared_ptr<const ClusterView::Topology> ClusterView::build_topology(const ClusterSpec& spec,
                                                                         int n_racks) {
  auto topo = std::make_shared<Topology>();
  TopologyGraph& g = topo->graph;
  const double lat = spec.link_latency_us * 1e-6;
  const int n_pods = (n_racks + spec.racks_per_pod - 1) / spec.racks_per_pod;
  std::vector<TopoVertex> spines, leaves, tors;
  for (int i = 0; i < spec.spines; ++i)
    spines.push_back(boost::add_vertex({NodeKind::kSpine, i}, g));
  for (int p = 0; p < n_pods; ++p) {
    leaves.push_back(boost::add_vertex({NodeKind::kLeaf, p}, g));
    for (auto sp : spines)
      boost::add_edge(leaves.back(), sp, {spec.leaf_uplink_gbps * 1e9 / 8 / spec.spines, lat}, g);
  }
  for (int r = 0; r < n_racks; ++r) {
    tors.push_back(boost::add_vertex({NodeKind::kTor, r}, g));
    boost::add_edge(tors.back(), leaves[r / spec.racks_per_pod],
                    {spec.tor_uplink_gbps * 1e9 / 8, lat}, g);
  }
  for (int m = 0; m < spec.machines; ++m) {
    topo->machine_vertex.push_back(boost::add_vertex({NodeKind::kMachine, m}, g));
    boost::add_edge(topo->machine_vertex.back(), tors[m / spec.rack_size],
                    {spec.nic_gbps * 1e9 / 8, lat}, g);
  }
  for (int i = 0; i < spec.storage_hosts; ++i) {
    auto v = boost::add_vertex({NodeKind::kStorage, i}, g);
    boost::add_edge(v, spines[i % spines.size()], {spec.storage_gbps * 1e9 / 8, lat}, g);
  }
  if (spec.nvlink_domain > 1)  // the NVSwitch fabric of each domain, a level below the ToR
    for (int d = 0; d < spec.machines / spec.nvlink_domain; ++d) {
      auto v = boost::add_vertex({NodeKind::kNvSwitch, d}, g);
      for (int m = d * spec.nvlink_domain; m < (d + 1) * spec.nvlink_domain; ++m)
        boost::add_edge(topo->machine_vertex[m], v, {spec.nvlink_gbps * 1e9 / 8, 0.0}, g);
    }
  return topo;
}

TopoVertex ClusterView::machine_vertex(MachineId m) const { return topo_->machine_vertex.at(m); }

std::vector<SlotId> ClusterView::rack_slots(int rack) const {
  std::vector<SlotId> out;
  for (int s = rack * spec_.rack_size; s < std::min(spec_.machines, (rack + 1) * spec_.rack_size);
       ++s)
    out.push_back(s);
  return out;
}

namespace {
struct RankCoord {
  std::int64_t t, p, d;
};
RankCoord coord(std::int64_t rank, const ClusterSpec& c) {
  return {rank % c.tp, (rank / c.tp) % c.pp, rank / (static_cast<std::int64_t>(c.tp) * c.pp)};
}

// Ascending, without duplicates (what a std::set gave, without a node per slot).
std::vector<SlotId> sorted_unique(std::vector<SlotId> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
}  // namespace

std::vector<SlotId> ClusterView::tp_group(SlotId s) const {
  const int span = tp_span();
  std::vector<SlotId> out(static_cast<std::size_t>(span));
  for (int k = 0; k < span; ++k) out[k] = s / span * span + k;
  return out;
}

std::vector<SlotId> ClusterView::pp_group_slots(int g) const {
  std::vector<SlotId> out;
  out.reserve(static_cast<std::size_t>(spec_.pp) * tp_span());
  const std::int64_t per = static_cast<std::int64_t>(spec_.tp) * spec_.pp;
  for (std::int64_t r = g * per; r < (g + 1) * per; r += spec_.tp)
    for (int k = 0; k < spec_.tp; k += spec_.gpus_per_machine) out.push_back(slot_of_rank(r + k));
  return sorted_unique(std::move(out));
}

std::vector<SlotId> ClusterView::dp_group_slots(int stage) const {
  std::vector<SlotId> out;
  out.reserve(static_cast<std::size_t>(spec_.dp) * tp_span());
  const std::int64_t per = static_cast<std::int64_t>(spec_.tp) * spec_.pp;
  for (int d = 0; d < spec_.dp; ++d)
    for (int k = 0; k < spec_.tp; k += spec_.gpus_per_machine)
      out.push_back(slot_of_rank(d * per + stage * spec_.tp + k));
  return sorted_unique(std::move(out));
}

int ClusterView::pp_group_index(SlotId s) const {
  return static_cast<int>(coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine, spec_).d);
}

std::vector<SlotId> ClusterView::pp_group(SlotId s) const {
  std::vector<SlotId> out;
  if (spec_.tp == spec_.gpus_per_machine) {  // one rank per stage per machine: PP consecutive slots
    out.resize(static_cast<std::size_t>(spec_.pp));
    for (int k = 0; k < spec_.pp; ++k) out[k] = s / spec_.pp * spec_.pp + k;
    return out;
  }
  std::int64_t last = -1;  // replica index grows with the GPU index inside a machine
  for (int g = 0; g < spec_.gpus_per_machine; g += spec_.tp) {
    auto c = coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine + g, spec_);
    if (c.d == last) continue;
    last = c.d;
    for (SlotId x : pp_group_slots(static_cast<int>(c.d))) out.push_back(x);
  }
  return sorted_unique(std::move(out));
}

std::vector<SlotId> ClusterView::dp_group(SlotId s) const {
  std::vector<SlotId> out;
  std::vector<std::int64_t> stages;
  for (int g = 0; g < spec_.gpus_per_machine; g += spec_.tp) {
    auto c = coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine + g, spec_);
    if (std::find(stages.begin(), stages.end(), c.p) != stages.end()) continue;
    stages.push_back(c.p);
    for (SlotId x : dp_group_slots(static_cast<int>(c.p))) out.push_back(x);
  }
  return sorted_unique(std::move(out));
}

MachineId ClusterView::add_machine() {
  slot_of_.push_back(-1);
  health_.push_back(Health::kHealthy);
  domain_.push_back(-1);
  return static_cast<MachineId>(slot_of_.size() - 1);
}

void ClusterView::place(MachineId m, SlotId s) {
  const MachineId prev = machine_of_slot_[s];
  if (prev >= 0 && prev != m) slot_of_[prev] = -1;
  if (prev == kNoMachine) --empty_slots_;
  if (slot_of_[m] >= 0 && slot_of_[m] != s) {
    machine_of_slot_[slot_of_[m]] = kNoMachine;
    ++empty_slots_;
  }
  machine_of_slot_[s] = m;
  slot_of_[m] = s;
}

void ClusterView::vacate(SlotId s) {
  const MachineId m = machine_of_slot_[s];
  if (m == kNoMachine) return;
  slot_of_[m] = -1;
  machine_of_slot_[s] = kNoMachine;
  ++empty_slots_;
}

bool ClusterView::take_standby(MachineId m) {
  auto it = std::find(standby_.begin(), standby_.end(), m);
  if (it == standby_.end()) return false;
  standby_.erase(it);
  return true;
}

double rebalanced_rate(int parts, int units, double f) {
  if (!(f > 1)) return 1;
  if (parts <= 1 || units <= 0) return 1 / f;
  // Step time in units of one healthy unit's time: the slow worker's k*f against the
  // busiest healthy worker's ceil(rest / (parts - 1)). The best k is near the continuous
  // balance; scanning every k keeps it exact and costs units + 1 steps.
  const std::int64_t total = static_cast<std::int64_t>(parts) * units;
  double best = static_cast<double>(units) * f;  // k = units: nothing moved
  for (int k = 0; k < units; ++k) {
    const std::int64_t rest = total - k;
    const double healthy = static_cast<double>((rest + parts - 2) / (parts - 1));
    best = std::min(best, std::max(static_cast<double>(k) * f, healthy));
  }
  return std::min(1.0, static_cast<double>(units) / best);
}

double straggler_rate(const ClusterSpec& spec, double f, int level) {
  if (!(f > 1) || level <= 0) return f > 1 ? 1 / f : 1;
  double slow = f;
  if (level >= 2) slow = 1 / rebalanced_rate(spec.pp, spec.layers_per_stage, f);
  return rebalanced_rate(spec.dp, spec.micro_batches, slow);
}

std::vector<SlotId> ClusterView::occupied(const std::vector<SlotId>& slots) const {
  std::vector<SlotId> out;
  for (SlotId s : slots)
    if (s >= 0 && s < this->slots() && machine_of_slot_[s] != kNoMachine) out.push_back(s);
  return out;
}

std::vector<MachineId> ClusterView::placed_machines() const {
  if (empty_slots_ == 0) return machine_of_slot_;  // one copy, no scan
  std::vector<MachineId> out;
  out.reserve(machine_of_slot_.size() - static_cast<std::size_t>(empty_slots_));
  for (MachineId m : machine_of_slot_)
    if (m != kNoMachine) out.push_back(m);
  return out;
}

std::vector<SlotId> ClusterView::slots_of(const std::vector<MachineId>& machines) const {
  std::vector<SlotId> out;
  for (MachineId m : machines)
    if (m >= 0 && m < machine_count() && slot_of_[m] >= 0) out.push_back(slot_of_[m]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace faultline
