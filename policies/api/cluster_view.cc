#include "policies/api/cluster_view.h"

#include <algorithm>
#include <set>

namespace faultline {

ClusterView::ClusterView(const ClusterSpec& spec) : spec_(spec) {
  machine_of_slot_.resize(spec_.machines);
  for (int s = 0; s < spec_.machines; ++s) {
    machine_of_slot_[s] = s;
    slot_of_.push_back(s);
    health_.push_back(Health::kHealthy);
  }
  for (int i = 0; i < spec_.standby_machines; ++i) standby_.push_back(add_machine());
  build_graph();
}

void ClusterView::build_graph() {
  const double lat = spec_.link_latency_us * 1e-6;
  const int n_racks = racks();
  const int n_pods = (n_racks + spec_.racks_per_pod - 1) / spec_.racks_per_pod;
  std::vector<TopoVertex> spines, leaves, tors;
  for (int i = 0; i < spec_.spines; ++i) spines.push_back(boost::add_vertex({NodeKind::kSpine, i}, graph_));
  for (int p = 0; p < n_pods; ++p) {
    leaves.push_back(boost::add_vertex({NodeKind::kLeaf, p}, graph_));
    for (auto sp : spines)
      boost::add_edge(leaves.back(), sp,
                      {spec_.leaf_uplink_gbps * 1e9 / 8 / spec_.spines, lat}, graph_);
  }
  for (int r = 0; r < n_racks; ++r) {
    tors.push_back(boost::add_vertex({NodeKind::kTor, r}, graph_));
    boost::add_edge(tors.back(), leaves[r / spec_.racks_per_pod],
                    {spec_.tor_uplink_gbps * 1e9 / 8, lat}, graph_);
  }
  for (int m = 0; m < spec_.machines; ++m) {
    machine_vertex_.push_back(boost::add_vertex({NodeKind::kMachine, m}, graph_));
    boost::add_edge(machine_vertex_.back(), tors[m / spec_.rack_size],
                    {spec_.nic_gbps * 1e9 / 8, lat}, graph_);
  }
  for (int i = 0; i < spec_.storage_hosts; ++i) {
    auto v = boost::add_vertex({NodeKind::kStorage, i}, graph_);
    boost::add_edge(v, spines[i % spines.size()], {spec_.storage_gbps * 1e9 / 8, lat}, graph_);
  }
}

TopoVertex ClusterView::machine_vertex(MachineId m) const { return machine_vertex_.at(m); }

std::vector<SlotId> ClusterView::rack_slots(int rack) const {
  std::vector<SlotId> out;
  for (int s = rack * spec_.rack_size; s < std::min(spec_.machines, (rack + 1) * spec_.rack_size); ++s)
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
}  // namespace

std::vector<SlotId> ClusterView::pp_group_slots(int g) const {
  std::set<SlotId> out;
  const std::int64_t per = static_cast<std::int64_t>(spec_.tp) * spec_.pp;
  for (std::int64_t r = g * per; r < (g + 1) * per; r += spec_.tp) out.insert(slot_of_rank(r));
  return {out.begin(), out.end()};
}

std::vector<SlotId> ClusterView::dp_group_slots(int stage) const {
  std::set<SlotId> out;
  const std::int64_t per = static_cast<std::int64_t>(spec_.tp) * spec_.pp;
  for (int d = 0; d < spec_.dp; ++d) out.insert(slot_of_rank(d * per + stage * spec_.tp));
  return {out.begin(), out.end()};
}

int ClusterView::pp_group_index(SlotId s) const {
  return static_cast<int>(coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine, spec_).d);
}

std::vector<SlotId> ClusterView::pp_group(SlotId s) const {
  std::set<SlotId> out;
  std::set<std::int64_t> seen;
  for (int g = 0; g < spec_.gpus_per_machine; g += spec_.tp) {
    auto c = coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine + g, spec_);
    if (!seen.insert(c.d).second) continue;
    for (SlotId x : pp_group_slots(static_cast<int>(c.d))) out.insert(x);
  }
  return {out.begin(), out.end()};
}

std::vector<SlotId> ClusterView::dp_group(SlotId s) const {
  std::set<SlotId> out;
  std::set<std::int64_t> seen;
  for (int g = 0; g < spec_.gpus_per_machine; g += spec_.tp) {
    auto c = coord(static_cast<std::int64_t>(s) * spec_.gpus_per_machine + g, spec_);
    if (!seen.insert(c.p).second) continue;
    for (SlotId x : dp_group_slots(static_cast<int>(c.p))) out.insert(x);
  }
  return {out.begin(), out.end()};
}

MachineId ClusterView::add_machine() {
  slot_of_.push_back(-1);
  health_.push_back(Health::kHealthy);
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

}  // namespace faultline
