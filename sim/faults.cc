#include "sim/faults.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace faultline::sim {

namespace {
constexpr double kNsPerDay = 86400e9;
bool poisson(const scenarios::FaultCategory& c) {
  return c.weibull_shape == 1.0 && c.lognormal_sigma <= 0;
}
}  // namespace

std::vector<FaultArrival> trace_arrivals(const scenarios::Scenario& sc, std::uint64_t replica) {
  std::vector<FaultArrival> out;
  if (!sc.trace || !sc.trace->timelines) return out;
  const scenarios::TraceSource& ts = *sc.trace;
  traces::ArrivalOptions opt;
  opt.mode = ts.mode == "replay" ? traces::ArrivalMode::kReplay : traces::ArrivalMode::kBootstrap;
  opt.order = ts.node_order == "random" ? traces::NodeOrder::kRandom : traces::NodeOrder::kInOrder;
  opt.extra_slots = ts.extra_slots == "bootstrap" ? traces::ExtraSlots::kBootstrap
                                                  : traces::ExtraSlots::kFaultFree;
  opt.time_scale = ts.time_scale;
  opt.start_s = ts.start_day * 86400.0;
  opt.slots = sc.cluster.machines;
  opt.rack_size = sc.cluster.rack_size;
  opt.horizon_s = sc.job.horizon_days * 86400.0;
  for (const auto& a : traces::trace_arrivals(*ts.timelines, opt, sc.seed, replica))
    out.push_back({a.at_ns, ts.first_category + a.category, a.slot});
  return out;
}

FaultStream::FaultStream(const std::vector<scenarios::FaultCategory>& cats, int slots,
                         int rack_size, std::uint64_t seed, std::uint64_t replica,
                         std::vector<FaultArrival> scripted)
    : cats_(cats), slots_(slots), rack_size_(rack_size), scripted_(std::move(scripted)) {
  for (size_t c = 0; c < cats_.size(); ++c) rng_.emplace_back(Rng({seed, replica, 0xFA17ull, c}));
  for (size_t c = 0; c < cats_.size(); ++c) {
    const auto& cat = cats_[c];
    if (cat.rate_per_machine_day <= 0) continue;
    if (poisson(cat)) {
      schedule_poisson(static_cast<int>(c), 0);
    } else {
      for (int u = 0; u < units_of(static_cast<int>(c)); ++u)
        schedule_renewal(static_cast<int>(c), u, 0, true);
    }
  }
}

void FaultStream::schedule_poisson(int c, std::int64_t from) {
  const double rate_per_ns = cats_[c].rate_per_machine_day * slots_ / kNsPerDay;
  const double gap = rng_[c].exponential(1.0 / rate_per_ns);
  if (from + gap >= 9.2e18) return;
  int slot = 0;
  if (cats_[c].scope != scenarios::FaultScope::kJob) slot = static_cast<int>(rng_[c].below(slots_));
  if (cats_[c].scope == scenarios::FaultScope::kRack) slot -= slot % rack_size_;
  heap_.push({from + static_cast<std::int64_t>(gap), c, slot});
}

void FaultStream::schedule_renewal(int c, int unit, std::int64_t from, bool first) {
  // One renewal process per unit (slot, rack or the job); the units share the
  // category's rate N·λ. The Weibull scale, or the lognormal's mu, follows from the mean gap.
  const auto& cat = cats_[c];
  const int units = units_of(c);
  const double mean_ns = kNsPerDay * units / (cat.rate_per_machine_day * slots_);
  const double k = cat.weibull_shape, sigma = cat.lognormal_sigma;
  const double scale = mean_ns / std::tgamma(1.0 + 1.0 / k);
  const double mu = std::log(mean_ns) - sigma * sigma / 2;  // E = exp(mu + sigma^2 / 2)
  auto draw = [&] { return sigma > 0 ? rng_[c].lognormal(mu, sigma) : rng_[c].weibull(k, scale); };
  double gap = draw();
  if (first) {
    // Start in equilibrium: run the process through a warm-up of a few mean gaps and
    // keep the first arrival after it, so the rate is N·λ from time zero. A lognormal's
    // long tail needs a longer warm-up for the same bias.
    double t = -(sigma > 0 ? 16 : 4) * mean_ns + gap;
    while (t < 0) t += draw();
    gap = t;
  }
  if (from + gap >= 9.2e18) return;
  heap_.push({from + static_cast<std::int64_t>(gap), c, unit});
}

int FaultStream::units_of(int c) const {
  switch (cats_[c].scope) {
    case scenarios::FaultScope::kMachine:
      return slots_;
    case scenarios::FaultScope::kRack:
      return (slots_ + rack_size_ - 1) / rack_size_;
    case scenarios::FaultScope::kJob:
      return 1;
  }
  return 1;
}

std::int64_t FaultStream::peek_time() const {
  const std::int64_t modelled =
      heap_.empty() ? std::numeric_limits<std::int64_t>::max() : heap_.top().at;
  if (scripted_next_ < scripted_.size()) return std::min(modelled, scripted_[scripted_next_].at_ns);
  return modelled;
}

FaultArrival FaultStream::next() {
  if (scripted_next_ < scripted_.size()) {
    const FaultArrival& s = scripted_[scripted_next_];
    if (heap_.empty() || s.at_ns < heap_.top().at ||
        (s.at_ns == heap_.top().at && s.category < heap_.top().category)) {
      ++scripted_next_;
      return s;
    }
  }
  if (heap_.empty()) return {std::numeric_limits<std::int64_t>::max(), 0, 0};
  Pending p = heap_.top();
  heap_.pop();
  if (poisson(cats_[p.category])) {
    schedule_poisson(p.category, p.at);
    return {p.at, p.category, p.slot};
  }
  schedule_renewal(p.category, p.slot, p.at, false);
  int slot = p.slot;  // the unit index
  if (cats_[p.category].scope == scenarios::FaultScope::kRack) slot *= rack_size_;
  if (cats_[p.category].scope == scenarios::FaultScope::kJob) slot = 0;
  return {p.at, p.category, slot};
}

}  // namespace faultline::sim
