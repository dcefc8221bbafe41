// Ground-truth fault arrivals for one replica.
//
// Each category is an arrival process over the job's slots: Poisson categories
// (Weibull shape 1) are one superposed stream at rate N·λ with a uniformly chosen
// slot, which costs one draw per fault whatever N is; Weibull categories run one
// renewal process per slot, started in equilibrium. Arrivals are generated lazily, so
// a 200k-GPU, 90-day replica holds one pending arrival per category (plus one per slot
// for Weibull ones). Policies never see these; the symptom model turns them into
// observations.
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

class FaultStream {
 public:
  FaultStream(const std::vector<scenarios::FaultCategory>& cats, int slots, int rack_size,
              std::uint64_t seed, std::uint64_t replica);
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
};

}  // namespace faultline::sim
