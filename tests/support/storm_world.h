// StormWorld: a World that answers a policy stack's actions from a small ground truth and
// throws overlapping faults at it, for property tests (tests/policies/storm_test.cc).
//
// FakeWorld answers nothing by itself; SimWorld answers everything, but one engine per
// process and seconds per replica make it too slow for thousands of interleavings. This
// World sits between them: a handful of slots, faults that land while the last one is
// still being diagnosed, tested, replaced or restarted, and answers that follow the
// contract of policies/api/action.h (refusals from policies/api/refusals.h, the same
// events in the same order as the simulator sends them) with random delays. It is a
// model for ordering, not for durations: every delay is drawn from the case's seed.
//
// A Checker watches every action and every delivered event and records the first broken
// invariant (the overlap contract of docs/policies-and-modules.md):
// - no (re)start while a slot is empty, or on a machine with an open alert or a failed
//   stop-time test;
// - no test on a machine that has left the job, and none while a start is under way (the
//   job would start on the machines the test holds);
// - a stop-time test result or an alert that names a machine of the job evicts it in the
//   same decision;
// - no whole-job requeue as a fallback (a warm standby can always take the slot here);
// - at the end, after a quiet spell: the job trains, every fault is settled in the ledger
//   (its machine left the job, or a transient fault struck and passed).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "policies/api/policy.h"
#include "policies/api/refusals.h"

namespace faultline::testing {

enum class StormKind : std::uint8_t {
  kGpu,        // persistent, on a machine: crashes, gpu alert (sometimes), fails gpu tests
  kNic,        // persistent: crashes with a network signature, fails the all-gather
  kTransient,  // one crash on a machine, gone after it
  kSdc,        // persistent silent corruption: NaN in training, fails bit-wise and replay
  kHang,       // persistent: the job stops making progress; its stacks stand out
  kJobCrash,   // a crash that names no machine and leaves nothing behind
  kUpdate,     // a code update is requested (urgent or not)
};
const char* storm_kind_name(StormKind k);

struct StormArrival {
  double at_s = 0;
  StormKind kind = StormKind::kGpu;
  int slot = 0;                // the machine in this slot at arrival time is struck
  bool alert = false;          // its inspection sees it (gpu: one alert; nic: two, 30 s apart)
  double alert_after_s = 0;    // when after the arrival the alert comes (0: with the crash)
  bool warned = false;         // a failure predictor announces it 600 s ahead
  bool misattributed = false;  // the crash log names the pipeline neighbour
  double strike_after_s = 30;  // how long after the job runs on it the fault shows
};

struct StormOptions {
  ClusterSpec spec;
  std::vector<StormArrival> arrivals;
  std::uint64_t seed = 1;      // delays and test recall
  double recall = 1;           // each stop-time test and replay finds a machine it should
  double quiet_s = 4 * 86400;  // after the last arrival, until the end
};

// One line per action, event and note, in order, with the time.
using StormLog = std::vector<std::string>;

struct StormResult {
  std::string violation;  // the first broken invariant; empty: none
  StormLog log;           // up to the violation (the whole run when none)
  int decisions = 0;
  int faults_struck = 0;
};

class StormWorld final : public World {
 public:
  explicit StormWorld(const StormOptions& o);
  // Runs `p` (not started) through the arrivals and the quiet spell.
  StormResult run(Policy& p);

  Instant now() const override { return Instant{now_}; }
  const ClusterView& cluster() const override { return view_; }
  ActionId act(Action a) override;
  TimerId set_timer(Duration after, std::uint64_t tag) override;
  void cancel_timer(TimerId id) override { cancelled_.insert(id); }
  Rng& rng() override { return policy_rng_; }
  void note(std::string_view reason) override { log("note " + std::string(reason)); }

 private:
  enum class Job : std::uint8_t { kDown, kStarting, kRunning };
  enum class Outcome : std::uint8_t { kOpen, kEvicted, kPassed, kLeft, kAbsorbed };
  struct Fault {
    StormArrival a;
    MachineId machine = kNoMachine;
    bool active = false;  // strikes the job when it runs on its machine
    Outcome outcome = Outcome::kOpen;
  };

  void push(std::int64_t at, std::function<void()> f);
  void deliver(const Event& e);
  void log(const std::string& line);
  void fail(const std::string& why);
  double draw(double lo, double hi) { return lo + (hi - lo) * rng_.uniform(); }
  std::int64_t later(double lo_s, double hi_s);  // now + a draw in [lo_s, hi_s]

  void arrive(std::size_t f);
  void activate(std::size_t f);
  void arm(std::size_t f);  // the job runs on its machine: it strikes later in this run
  void strike(std::size_t f, std::int64_t epoch);
  void crash(std::size_t f, MachineId named, const std::string& sig, bool hang);
  void job_down();
  std::int64_t steps() const;
  void started(ActionId id, bool in_place);
  void place_new(SlotId s);
  void leave(MachineId m);  // m leaves its slot (evicted, drained, migrated away)
  // The chance test `k` fails a machine with fault `f` (before the case's recall).
  double detects(const Fault& f, ProbeKind k) const;
  int fault_on(MachineId m) const;  // active fault on m, or -1
  void drop_replica(int replica, MachineId named, const std::string& sig);
  void unstick();  // a stuck job whose hung rank left trains again

  void apply(ActionId id, const Action& a);
  void start(ActionId id, bool in_place);
  void probe(ActionId id, const RunProbe& p);
  void replay(ActionId id, const RunReplay& r);
  void capture(ActionId id);
  void acquire(ActionId id, const AcquireMachines& q);
  void evict(const EvictMachines& e);
  void rejoin(ActionId id, const RejoinReplica& r);
  void migrate(ActionId id, const MigrateMachines& m);

  // The checker (see the header comment).
  void check_action(const Action& a);
  void check_decision(const Event& e, const std::vector<MachineId>& named_before);
  void check_end();

  StormOptions o_;
  ClusterView view_;
  Rng rng_, policy_rng_;
  Policy* policy_ = nullptr;
  std::int64_t now_ = 0, end_ = 0;
  std::uint64_t seq_ = 0;
  std::map<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> queue_;
  std::set<TimerId> cancelled_;
  TimerId next_timer_ = 1;
  ActionId next_action_ = 1;

  std::vector<Fault> faults_;
  std::vector<int> fault_of_;  // by machine: the fault it carries, or -1
  Job job_ = Job::kDown;
  bool ended_ = false;
  bool stuck_ = false;
  std::int64_t epoch_ = 0;
  ActionId start_action_ = 0;
  std::int64_t steps_ = 0, run_since_ = 0;
  std::set<ActionId> acquiring_;  // acquisitions under way
  std::set<std::string> inspections_;
  bool watch_ = false;  // the stack asked for step samples (WatchSteps)
  struct {
    bool on = false;
    int min = 1;
    std::vector<std::uint8_t> out;  // by replica: 0 live, 1 out, 2 rejoining
  } groups_;
  int update_version_ = 0;

  // Checker state.
  StormResult result_;
  bool in_decision_ = false;
  std::set<MachineId> open_alert_, failed_test_;
};

}  // namespace faultline::testing
