// Ground-truth fault arrivals for one replica.
//
// Each category is an arrival process over the job's slots: Poisson categories
// (Weibull shape 1) are one superposed stream at rate N·λ with a uniformly chosen
// slot, which costs one draw per fault whatever N is; Weibull and lognormal categories
// run one renewal process per slot, mean-matched to λ and started in equilibrium. Times
// are on the scenario's fault clock (faults.clock): wall time, or the job's computing
// time, which SimWorld maps to wall instants. Arrivals are generated lazily, so
// a 200k-GPU, 90-day replica holds one pending arrival per category (plus one per slot
// for Weibull ones). A scenario's faults.trace adds arrivals fixed in advance by a real
// trace (replayed or bootstrapped, traces/arrivals.h), merged in time order. Policies
// never see these; the symptom model turns them into observations.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "policies/api/rng.h"
#include "scenarios/scenario.h"

namespace faultline::sim {

struct FaultArrival {
  std::int64_t at_ns = 0;
  int category = 0;
  int slot = 0;  // target slot (machine scope), first slot of the rack (rack scope), 0 (job)
};

// Trace-driven arrivals of the scenario's faults.trace for one replica, in time order
// (empty without a trace). Categories index the scenario's faults.
std::vector<FaultArrival> trace_arrivals(const scenarios::Scenario& sc, std::uint64_t replica);

class FaultStream {
 public:
  // `scripted`: arrivals fixed in advance (a trace's), in time order, merged with the
  // modelled ones.
  FaultStream(const std::vector<scenarios::FaultCategory>& cats, int slots, int rack_size,
              std::uint64_t seed, std::uint64_t replica, std::vector<FaultArrival> scripted = {});
  // Next arrival in time order (ties: lower category first). at_ns is INT64_MAX when none.
  FaultArrival next();
  std::int64_t peek_time() const;

 private:
  struct Pending {
    std::int64_t at;
    int category;
    int slot;
    bool operator>(const Pending& o) const {
      if (at != o.at) return at > o.at;
      if (category != o.category) return category > o.category;
      return slot > o.slot;
    }
  };
  void schedule_poisson(int c, std::int64_t from);
  void schedule_renewal(int c, int unit, std::int64_t from, bool first);
  int units_of(int c) const;

  std::vector<scenarios::FaultCategory> cats_;
  int slots_;
  int rack_size_;
  std::vector<Rng> rng_;  // one stream per category
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> heap_;
  std::vector<FaultArrival> scripted_;
  std::size_t scripted_next_ = 0;
};

}  // namespace faultline::sim
