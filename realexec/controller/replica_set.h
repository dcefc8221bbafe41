// ReplicaSet: the job's replica groups as the live controller keeps them (replica_groups.h;
// job.replica_groups, python/faultline/replicas.py): the policy's EnableReplicaGroups, the
// members of the latest quorum, the replicas rejoining (launched by a RejoinReplica or a
// migration, not started yet), the members that said a quorum failed and each member's step
// then, and the share of the steps the missing replicas did not train. LiveWorld forms the
// quorums and talks to the agents; this keeps their state. Unit-tested in
// tests/realexec/agent/replica_parts_test.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "policies/api/action.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/one_shot_timer.h"

namespace faultline::live {

class ReplicaSet {
 public:
  explicit ReplicaSet(Reactor& reactor) : failed_timer_(reactor) {}

  // The policy's EnableReplicaGroups; none: a failure stops the job.
  void enable(const EnableReplicaGroups& a) { enabled_ = a; }
  const std::optional<EnableReplicaGroups>& enabled() const { return enabled_; }

  // --- membership
  // A launch of the job: a quorum of every one of `count` replicas, none joining, no quorum
  // said to have failed (the rejoins under way end first: see joiners()).
  void launch_all(std::int64_t count);
  // Replica r is in the latest quorum (an admitted joiner too).
  const std::set<std::int64_t>& members() const { return members_; }
  bool member(std::int64_t r) const { return members_.count(r) > 0; }
  void admit(std::int64_t r) { members_.insert(r); }
  // Members that train (not joining).
  int live() const;
  // The lowest member training, whose step reports carry the job's step (0 when none).
  std::int64_t step_rank() const;
  // Replica r leaves (a drop): no longer joining; true when it was a member.
  bool drop(std::int64_t r);

  // --- joiners
  const std::map<std::int64_t, ActionId>& joiners() const { return joining_; }
  bool joining(std::int64_t r) const { return joining_.count(r) > 0; }
  // The action replica r joins by (0: none).
  ActionId joiner(std::int64_t r) const;
  // A RejoinReplica `id` at `t` launches replica r again.
  void rejoin(std::int64_t r, ActionId id, Instant t);
  // A migration `id` hands replica r to a standby whose process runs already.
  void migrate(std::int64_t r, ActionId id);
  // The agent confirmed the joiner's launch: an exit of r before that is its previous
  // process's, which the agent reaps first.
  void launched(std::int64_t r) { launched_.insert(r); }
  bool was_launched(std::int64_t r) const { return launched_.count(r) > 0; }
  // Replica r started (trains again): it joins no more; the action it joined by.
  ActionId joined(std::int64_t r);
  // The time RejoinReplica `id` began, when it has no outcome yet (taken: it has one now).
  std::optional<Instant> take_rejoin(ActionId id);

  // --- quorums said to have failed
  // Member r says quorum q failed: true when it is the first to say so (the grace starts:
  // each member's step is noted, `step_of` giving it).
  bool say_failed(std::int64_t q, std::int64_t r,
                  const std::function<std::int64_t(std::int64_t)>& step_of);
  // The members that said quorum q failed, forgotten with those of earlier quorums.
  std::set<std::int64_t> take_said(std::int64_t q);
  // Member r's step when the first member said its quorum failed (0 when not noted).
  std::int64_t step_when_failed(std::int64_t r) const;
  // The grace before the silent members are judged hung.
  OneShotTimer& failed_timer() { return failed_timer_; }
  // A report of a quorum this controller never formed: the count so far.
  std::uint64_t disbelieve() { return ++disbelieved_; }

  // --- the account
  // A quorum changed (since the last step report: its pause is missing replicas' time).
  void quorum_changed() { changed_ = true; }
  bool take_changed() { return std::exchange(changed_, false); }
  // The steps' time the missing replicas did not train, not yet in the journal.
  void add_share(double s) { share_pending_ += s; }
  double share_pending() const { return share_pending_; }
  double take_share() { return std::exchange(share_pending_, 0.0); }

 private:
  std::optional<EnableReplicaGroups> enabled_;
  std::set<std::int64_t> members_;
  std::map<std::int64_t, ActionId> joining_;
  std::set<std::int64_t> launched_;
  std::map<std::int64_t, std::set<std::int64_t>> failed_;  // quorum -> members that said it failed
  std::map<std::int64_t, std::int64_t> failed_steps_;      // member -> its step at the first saying
  OneShotTimer failed_timer_;
  bool changed_ = false;
  std::uint64_t disbelieved_ = 0;
  std::map<ActionId, Instant> rejoin_began_;  // RejoinReplica without an outcome yet
  double share_pending_ = 0;
};

}  // namespace faultline::live
