// Batches: one replica's network transfers, memoised or run in SimGrid, and the way the
// replica waits on SimGrid while real ones run.
//
// A batch's duration on an idle network is known in closed form (FlowNet::fluid_duration,
// memoised by the batch's key): such a batch holds the network until its end without
// entering SimGrid. A batch that shares the network runs for real: SimGrid's clock is first
// brought to the replica's time, and the replica then waits on SimGrid for whichever comes
// first, its next event or a batch completion. Every batch belongs to the current token: a
// new token gives up the ones under way (their transfers leave the network, their
// completions never come).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sim/network.h"

namespace faultline::sim {

class Batches {
 public:
  // `platform` and `flows` are shared by the replicas of this process and outlive this.
  Batches(Platform& platform, FlowNet& flows);
  ~Batches();
  Batches(const Batches&) = delete;
  Batches& operator=(const Batches&) = delete;

  // At the replica's start, inside its SimGrid actor: replica time zero is SimGrid's now.
  void begin();
  // At the replica's end: batches still under way leave the network (the replicas forked
  // from this one start on an idle network) and no completion comes any more.
  void end();

  // The current token (a start's or an acquisition's batches), to ignore stale completions.
  std::uint64_t token() const { return token_; }
  // A new token: every batch under way is given up, so its transfers leave the network now.
  void new_token();
  // Gives up every batch under way (the token stays).
  void abandon();

  // Runs `batch` (key `key`) from replica time `now_ns`: memoised() if it can, else start().
  std::int64_t run(const std::vector<Transfer>& batch, const FlowNet::Key& key, std::int64_t now_ns,
                   std::uint64_t* hold, std::function<void(std::int64_t)> done);
  // Memoised or on an idle network: returns the batch's duration and sets *hold to the hold
  // the caller ends at now + duration (end_hold). Else -1, and nothing runs.
  std::int64_t memoised(const std::vector<Transfer>& batch, const FlowNet::Key& key,
                        std::uint64_t* hold);
  // Starts `batch` in SimGrid: `done(sg_ns)` runs at its end with the replica time SimGrid
  // reached, unless it was given up or the replica ended first.
  void start(const std::vector<Transfer>& batch, const FlowNet::Key& key, std::int64_t now_ns,
             std::function<void(std::int64_t)> done);
  // A memoised batch's end: its hold on the network is released (unless it was given up).
  void end_hold(std::uint64_t hold);
  // Real batches are under way: the replica must wait on SimGrid to move on.
  bool real_under_way() const { return real_in_flight_ > 0; }
  // Lets SimGrid run until replica time `deadline_ns` or a batch completion, whichever
  // comes first; true when a batch completed (and queued its completion).
  bool wait(std::int64_t deadline_ns);

  // The whole-job batch of `kind` (every one of `slots` slots loading `bytes` from
  // storage), built and hashed once per replica.
  const std::pair<std::vector<Transfer>, FlowNet::Key>& whole_job(int kind, double bytes,
                                                                  int slots);

  // Batches since begin(): run in SimGrid, answered from the memo.
  std::int64_t real_batches() const { return flows_.real_batches() - real_at_start_; }
  std::int64_t cached_batches() const { return flows_.cached_batches() - cached_at_start_; }

 private:
  struct SgSync;
  struct Underway {
    FlowNet::BatchId real = 0;  // 0: a memoised batch
    std::uint64_t hold = 0;
  };
  Platform& platform_;
  FlowNet& flows_;
  double sg_base_ = 0;  // SimGrid clock at replica time zero
  std::int64_t real_at_start_ = 0, cached_at_start_ = 0;
  std::uint64_t token_ = 0;
  int real_in_flight_ = 0;
  std::vector<Underway> underway_;  // all of the current token
  std::uint64_t next_hold_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::map<std::pair<int, double>, std::pair<std::vector<Transfer>, FlowNet::Key>> whole_job_;
  std::unique_ptr<SgSync> sync_;
};

}  // namespace faultline::sim
