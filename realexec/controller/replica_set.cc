#include "realexec/controller/replica_set.h"

#include <algorithm>
#include <utility>

namespace faultline::live {

void ReplicaSet::launch_all(std::int64_t count) {
  members_.clear();
  for (std::int64_t r = 0; r < count; ++r) members_.insert(r);
  joining_.clear();
  launched_.clear();
  failed_.clear();
  failed_timer_.cancel();
}

int ReplicaSet::live() const {
  return static_cast<int>(members_.size()) -
         static_cast<int>(std::count_if(joining_.begin(), joining_.end(), [&](const auto& j) {
           return members_.count(j.first) > 0;
         }));
}

std::int64_t ReplicaSet::step_rank() const {
  for (std::int64_t r : members_)
    if (!joining_.count(r)) return r;
  return 0;
}

bool ReplicaSet::drop(std::int64_t r) {
  joining_.erase(r);
  launched_.erase(r);
  return members_.erase(r) > 0;
}

ActionId ReplicaSet::joiner(std::int64_t r) const {
  const auto it = joining_.find(r);
  return it == joining_.end() ? 0 : it->second;
}

void ReplicaSet::rejoin(std::int64_t r, ActionId id, Instant t) {
  joining_[r] = id;
  rejoin_began_[id] = t;
}

void ReplicaSet::migrate(std::int64_t r, ActionId id) {
  joining_[r] = id;
  launched_.insert(r);
}

ActionId ReplicaSet::joined(std::int64_t r) {
  const ActionId id = joiner(r);
  joining_.erase(r);
  launched_.erase(r);
  return id;
}

std::optional<Instant> ReplicaSet::take_rejoin(ActionId id) {
  const auto it = rejoin_began_.find(id);
  if (it == rejoin_began_.end()) return std::nullopt;
  const Instant began = it->second;
  rejoin_began_.erase(it);
  return began;
}

bool ReplicaSet::say_failed(std::int64_t q, std::int64_t r,
                            const std::function<std::int64_t(std::int64_t)>& step_of) {
  if (!failed_[q].insert(r).second || failed_[q].size() != 1) return false;
  failed_steps_.clear();
  for (std::int64_t x : members_) failed_steps_[x] = step_of(x);
  return true;
}

std::set<std::int64_t> ReplicaSet::take_said(std::int64_t q) {
  const std::set<std::int64_t> said = failed_[q];
  failed_.erase(failed_.begin(), failed_.upper_bound(q));
  return said;
}

std::int64_t ReplicaSet::step_when_failed(std::int64_t r) const {
  const auto it = failed_steps_.find(r);
  return it == failed_steps_.end() ? 0 : it->second;
}

}  // namespace faultline::live
