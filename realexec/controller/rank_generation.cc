#include "realexec/controller/rank_generation.h"

#include <algorithm>
#include <vector>

namespace faultline::live {

void RankGeneration::launch(Instant t) {
  started_.clear();
  start_step_ = 0;
  steps_.clear();
  reported_at_.clear();
  clean_exits_.clear();
  exit_reported_ = false;
  victim_.reset();
  budget_ = kDroppedExitBurst;
  budget_at_ = t;
  holding_notes_ = 0;
}

void RankGeneration::record_step(std::int64_t rank, std::int64_t step, Instant t) {
  steps_[rank] = step;
  reported_at_[rank] = t;
}

std::int64_t RankGeneration::rank_step(std::int64_t rank) const {
  const auto it = steps_.find(rank);
  return it != steps_.end() ? it->second : start_step_;
}

std::optional<Instant> RankGeneration::reported_at(std::int64_t rank) const {
  const auto it = reported_at_.find(rank);
  if (it == reported_at_.end()) return std::nullopt;
  return it->second;
}

RankGeneration::Laggard RankGeneration::laggard(SlotId slots, int g) const {
  std::vector<std::int64_t> lo(static_cast<std::size_t>(slots)),
      hi(static_cast<std::size_t>(slots));
  SlotId laggard = 0;
  for (SlotId s = 0; s < slots; ++s) {
    const auto i = static_cast<std::size_t>(s);
    lo[i] = std::numeric_limits<std::int64_t>::max();
    hi[i] = -1;
    for (int k = 0; k < g; ++k) {
      const std::int64_t st = rank_step(static_cast<std::int64_t>(s) * g + k);
      lo[i] = std::min(lo[i], st);
      hi[i] = std::max(hi[i], st);
    }
    if (hi[i] < hi[static_cast<std::size_t>(laggard)]) laggard = s;
  }
  Laggard out;
  if (slots <= 0) return out;
  out.behind = hi[static_cast<std::size_t>(laggard)];
  for (SlotId s = 0; s < slots; ++s)
    if (s != laggard) out.others = std::min(out.others, lo[static_cast<std::size_t>(s)]);
  if (slots > 1 && out.behind < out.others) out.slot = laggard;
  return out;
}

bool RankGeneration::hold_victim(Victim v) {
  if (victim_) return false;
  victim_ = std::move(v);
  return true;
}

std::optional<RankGeneration::Victim> RankGeneration::take_victim() {
  return std::exchange(victim_, std::nullopt);
}

bool RankGeneration::admit_dropped_note(Instant t) {
  budget_ = std::min<double>(kDroppedExitBurst, budget_ + (t - budget_at_).to_seconds());
  budget_at_ = t;
  if (budget_ < 1) {
    ++unnoted_;
    return false;
  }
  budget_ -= 1;
  return true;
}

}  // namespace faultline::live
