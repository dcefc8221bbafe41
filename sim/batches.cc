// Batches: memoised and real transfers of one replica, and its waits on SimGrid.
#include "sim/batches.h"

#include <algorithm>
#include <simgrid/s4u.hpp>

#include "policies/api/time.h"

namespace faultline::sim {

namespace sg4 = simgrid::s4u;

// How the replica waits on SimGrid while real batches run: an untimed wait on `cv`, woken by a
// batch's completion (`batch_done`) or by an alarm actor at the deadline. Not a timed wait:
// SimGrid 3.32 keeps a timed wait's timeout armed after a notify wakes the waiter, and the
// timeout, firing after the replica ended, reads the freed condition variable (seen as a
// crash at the end of a replica whose batches overlapped). An alarm holds the condition
// variable and the flags it needs, so it outlives the replica harmlessly.
struct Batches::SgSync {
  sg4::MutexPtr mutex = sg4::Mutex::create();
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
  bool batch_done = false;
  // The wait an alarm belongs to: a stale alarm (its wait was ended by a batch) stays quiet.
  std::shared_ptr<std::uint64_t> wait = std::make_shared<std::uint64_t>(0);
};

Batches::Batches(Platform& platform, FlowNet& flows) : platform_(platform), flows_(flows) {}

Batches::~Batches() { *alive_ = false; }

void Batches::begin() {
  sync_ = std::make_unique<SgSync>();
  sg_base_ = sg4::Engine::get_clock();
  real_at_start_ = flows_.real_batches();
  cached_at_start_ = flows_.cached_batches();
}

void Batches::end() {
  abandon();
  *alive_ = false;
}

void Batches::new_token() {
  ++token_;
  abandon();
}

void Batches::abandon() {
  for (const Underway& u : underway_) {
    if (u.real) {
      flows_.cancel(u.real);
      --real_in_flight_;
    } else {
      flows_.release();
    }
  }
  underway_.clear();
}

std::int64_t Batches::run(const std::vector<Transfer>& batch, const FlowNet::Key& key,
                          std::int64_t now_ns, std::uint64_t* hold,
                          std::function<void(std::int64_t)> done) {
  const std::int64_t d = memoised(batch, key, hold);
  if (d < 0) start(batch, key, now_ns, std::move(done));
  return d;
}

std::int64_t Batches::memoised(const std::vector<Transfer>& batch, const FlowNet::Key& key,
                               std::uint64_t* hold) {
  // On an idle network a batch's time is known in closed form (SimGrid's cost for it is
  // quadratic in its transfers); SimGrid runs the batches that share the network.
  std::int64_t d =
      flows_.cached(key);  // one lookup: -1 when unknown or while the network is shared
  if (d < 0 && flows_.in_flight() == 0) {
    d = flows_.fluid_duration(batch);
    flows_.remember(key, d);
  }
  if (d < 0) return -1;
  flows_.count_hit();
  flows_.hold();
  underway_.push_back({0, ++next_hold_});
  *hold = next_hold_;
  return d;
}

void Batches::start(const std::vector<Transfer>& batch, const FlowNet::Key& key,
                    std::int64_t now_ns, std::function<void(std::int64_t)> done) {
  // Bring SimGrid's clock to our time, then run the transfers for real.
  sg4::this_actor::sleep_until(sg_base_ + now_ns * 1e-9);
  ++real_in_flight_;
  auto id = std::make_shared<FlowNet::BatchId>(0);
  *id = flows_.start(batch, key, [this, alive = alive_, done = std::move(done), id](std::int64_t) {
    if (!*alive) return;  // the replica ended before this batch did
    --real_in_flight_;
    std::erase_if(underway_, [&](const Underway& u) { return u.real == *id; });
    done(Duration::round_ns((sg4::Engine::get_clock() - sg_base_) * 1e9));
    sync_->batch_done = true;
    sync_->cv->notify_all();
  });
  underway_.push_back({*id, 0});
}

void Batches::end_hold(std::uint64_t hold) {
  const auto n =
      std::erase_if(underway_, [&](const Underway& u) { return u.real == 0 && u.hold == hold; });
  if (n) flows_.release();
}

bool Batches::wait(std::int64_t deadline_ns) {
  std::unique_lock lock(*sync_->mutex);
  const double deadline = sg_base_ + deadline_ns * 1e-9;
  const std::uint64_t mine = ++*sync_->wait;
  sg4::Actor::create("alarm", platform_.control_host(),
                     [cv = sync_->cv, wait = sync_->wait, mine, deadline] {
                       sg4::this_actor::sleep_until(deadline);
                       if (*wait == mine) cv->notify_all();
                     });
  sync_->batch_done = false;
  sync_->cv->wait(lock);
  ++*sync_->wait;  // its alarm, if still asleep, is stale now
  return sync_->batch_done;
}

const std::pair<std::vector<Transfer>, FlowNet::Key>& Batches::whole_job(int kind, double bytes,
                                                                         int slots) {
  auto it = whole_job_.find({kind, bytes});
  if (it == whole_job_.end()) {
    std::vector<Transfer> batch;
    batch.reserve(slots);
    for (SlotId s = 0; s < slots; ++s)
      batch.push_back(
          {platform_.storage_host(s % platform_.storage_hosts()), platform_.slot_host(s), bytes});
    FlowNet::Key key = FlowNet::key_of(batch);
    it = whole_job_.emplace(std::make_pair(kind, bytes), std::make_pair(std::move(batch), key))
             .first;
  }
  return it->second;
}

}  // namespace faultline::sim
