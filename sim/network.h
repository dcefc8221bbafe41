// The SimGrid platform of a cluster and the data transfers that run on it.
//
// Built once per process from the ClusterView's Boost.Graph: one SimGrid host per job
// slot (a replacement machine takes its slot's place in the topology), per standby
// machine and per storage front end, in a star zone whose routes are the graph's paths
// machine -> ToR -> leaf -> spine: the NIC, ToR-uplink and leaf-uplink links are shared
// by everything below them, so a whole-job restore from storage contends for the
// storage links and the uplinks exactly as the topology says. The star zone builds in
// linear time (25k machines in well under a second); its one simplification is that
// traffic between two machines of the same rack also crosses that rack's ToR uplink.
//
// Transfers come in batches (all machines restoring a checkpoint, all new machines
// pulling an image). A batch that starts on an idle network is timed by the closed form
// of SimGrid's fluid model (fluid_duration: the same max-min sharing, solved directly;
// SimGrid's own cost for a batch is quadratic in its transfers) and memoised by its exact
// transfer list: a requeue-heavy replica repeats the same whole-job batch hundreds of
// times. A batch that starts while another is under way runs as real SimGrid
// communications, so batches that share links slow each other down as the topology says.
// What that batch does not see: a batch under way that was timed by the closed form or
// the memo (it holds no SimGrid flows); the memo has always had this limit, and in the
// shipped scenarios no batch starts while another is under way (docs/scenarios-and-faults.md, "How
// the simulator works"). A batch its owner gives up (the start was stopped, the job requeued) is
// cancelled: its transfers leave the network at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policies/api/cluster_view.h"

namespace simgrid::s4u {
class Host;
class Engine;
}  // namespace simgrid::s4u

namespace faultline::sim {

struct Transfer {
  int src = 0;  // host index (see Platform)
  int dst = 0;
  double bytes = 0;
};

class Platform {
 public:
  // Creates the SimGrid engine and platform. One per process (SimGrid's rule).
  Platform(const ClusterView& view, int argc_extra = 0);
  ~Platform();
  simgrid::s4u::Engine& engine() { return *engine_; }
  int slot_host(SlotId s) const { return s; }
  int standby_host(int i) const { return slots_ + i; }
  int storage_host(int i) const { return slots_ + standbys_ + i; }
  int storage_hosts() const { return storages_; }
  simgrid::s4u::Host* host(int index) const { return hosts_[index]; }
  simgrid::s4u::Host* control_host() const { return control_; }
  double build_seconds() const { return build_s_; }
  // The platform as data, for the closed form: every link, and the links each host's
  // traffic crosses to the centre of the star (a transfer's route is the source's links
  // then the destination's; its way back is the same links).
  struct LinkSpec {
    double bandwidth = 0;  // bytes/s
    double latency = 0;    // s
  };
  const std::vector<LinkSpec>& links() const { return links_; }
  const std::vector<int>& route(int host) const { return routes_[host]; }

 private:
  std::unique_ptr<simgrid::s4u::Engine> engine_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<LinkSpec> links_;
  std::vector<std::vector<int>> routes_;  // per host index
  simgrid::s4u::Host* control_ = nullptr;
  int slots_ = 0, standbys_ = 0, storages_ = 0;
  double build_s_ = 0;
};

// Runs batches of transfers; completion is reported through a callback invoked from
// a SimGrid actor (or, for memoised batches, returned at once).
// Identity of a batch: its size and two 64-bit hashes of the exact transfer list.
struct BatchKey {
  std::size_t n;
  std::uint64_t h1, h2;
  auto operator<=>(const BatchKey&) const = default;
};

// Batch durations by key. Never iterated, lookups only: an open-addressing table (linear
// probing on h1, which is already a hash), so a lookup costs one cache line where a
// node-based map cost a bucket, a node and a chain (a tree walk of cache misses grew with
// the memo at 20k machines). Entries are never removed; n == 0 marks an empty cell, so a
// key of an empty batch is never kept.
class DurationMemo {
 public:
  // The duration kept for `key`, or nullptr.
  const std::int64_t* find(const BatchKey& key) const;
  // Keeps `d` for `key`; a key already there keeps its first duration.
  void insert(const BatchKey& key, std::int64_t d);
  std::size_t size() const { return size_; }

 private:
  struct Cell {
    BatchKey key{0, 0, 0};
    std::int64_t duration = 0;
  };
  std::vector<Cell> cells_;  // a power of two, at most half full
  std::size_t size_ = 0;
};

class FlowNet {
 public:
  explicit FlowNet(Platform& p) : platform_(p) {}
  using Key = BatchKey;
  static Key key_of(const std::vector<Transfer>& batch);
  // Memoised duration if this batch may use the cache now, else -1.
  std::int64_t cached(const Key& key) const;
  // The batch's duration on an otherwise idle network, by the closed form of the fluid
  // model SimGrid runs (CM02: max-min sharing weighted by route latency, 5% cross-traffic
  // on the way back, rates bounded by the slowest link and the TCP window), solved by
  // progressive filling from one completion to the next. Costs O(the batch's links x
  // distinct completion times) where SimGrid's is quadratic in the transfers; agrees with SimGrid
  // to the nanosecond on the batches the tests run through both.
  // Options for a batch timed apart from the job's (the grouped probe's pairs).
  struct Fluid {
    // Links running below their rate (a degraded NIC): link index -> share of its bandwidth.
    const std::map<int, double>* degraded = nullptr;
    std::vector<std::int64_t>* finish = nullptr;  // receives each transfer's completion time
    // Routes turn at the lowest switch both ends share, as in the fabric: two machines of
    // one rack use their NICs only. (Without it, the star zone's simplification: a shared
    // uplink is crossed once, so 8 pairs of a rack would share its uplink.)
    bool turn_at_common_switch = false;
  };
  std::int64_t fluid_duration(const std::vector<Transfer>& batch) const {
    return fluid_duration(batch, Fluid{});
  }
  // The index (in Platform::links) of a host's own link, its NIC.
  int nic_link(int host) const { return platform_.route(host).front(); }
  std::int64_t fluid_duration(const std::vector<Transfer>& batch, const Fluid& opt) const;
  // Memoises a batch's idle-network duration found without SimGrid.
  void remember(const Key& key, std::int64_t d) { memo_.insert(key, d); }
  using BatchId = std::uint64_t;
  // Starts a real batch; `done(duration_ns)` runs in simulation context when all
  // transfers finished. Requires a running SimGrid simulation (called from an actor).
  BatchId start(std::vector<Transfer> batch, const Key& key,
                std::function<void(std::int64_t)> done);
  // Stops a real batch now (its owner gave up on it): its transfers leave the network at
  // once, `done` is never called, and it is not memoised. A finished batch: nothing.
  void cancel(BatchId id);
  int in_flight() const { return in_flight_; }
  // A memoised batch "runs" without SimGrid; hold it so nothing else is memoised or
  // served from the cache while it is under way.
  void hold() {
    ++in_flight_;
    ++epoch_;
  }
  void release() { --in_flight_; }
  // Counts for reports and benchmarks.
  std::int64_t real_batches() const { return real_; }
  std::int64_t cached_batches() const { return hits_; }
  void count_hit() { ++hits_; }

 private:
  Platform& platform_;
  DurationMemo memo_;
  struct Running;
  std::map<BatchId, std::shared_ptr<Running>> running_;
  BatchId next_id_ = 0;
  int in_flight_ = 0;
  std::uint64_t epoch_ = 0;  // bumps when a batch starts, to detect overlap
  std::int64_t real_ = 0, hits_ = 0;
  // fluid_duration's per-link state, sized once and left all zero between calls: a call
  // touches only its batch's links, never O(links).
  mutable std::vector<double> fill_remaining_, fill_usage_;
  mutable std::vector<char> fill_saturated_;
};

}  // namespace faultline::sim
