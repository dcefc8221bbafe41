#include "policies/recovery/baselines.h"

#include <algorithm>

namespace faultline::policies {

namespace {

// Shared restart cycle: stop (if running) -> acquire machines -> start. A fault that
// arrives while a cycle is under way starts a new cycle once the current step answers.
class RestartCycle {
 public:
  enum class State { kRunning, kAcquiring, kStarting };

  void begin(World& w, AcquireMode mode, std::vector<SlotId> slots, const std::string& why) {
    if (state_ == State::kRunning) w.act(StopJob{why});
    const Mechanism mech = mode == AcquireMode::kRequeue ? Mechanism::kRequeue : Mechanism::kOracle;
    if (mode == AcquireMode::kOracle && slots.empty()) {
      start(w, why, mech);
      return;
    }
    state_ = State::kAcquiring;
    acquire_ = w.act(AcquireMachines{mode, std::move(slots), why, mech});
  }
  void start(World& w, const std::string& why, Mechanism mech = Mechanism::kNone) {
    state_ = State::kStarting;
    start_ = w.act(StartJob{why, mech});
  }
  void roll_back(World& w, const std::string& why) {
    state_ = State::kStarting;
    start_ = w.act(RollBack{why});
  }
  // Returns true when the event belonged to the cycle.
  bool on_event(const Event& e, World& w) {
    if (auto* r = std::get_if<MachinesReady>(&e); r && r->action == acquire_) {
      start(w, "machines ready");
      return true;
    }
    if (auto* s = std::get_if<JobStarted>(&e); s && s->action == start_) {
      state_ = State::kRunning;
      return true;
    }
    return false;
  }
  State state() const { return state_; }

 private:
  State state_ = State::kStarting;
  ActionId acquire_ = 0;
  ActionId start_ = 0;
};

class Requeue final : public Policy {
 public:
  explicit Requeue(const Params& p)
      : interval_(Duration::seconds(p.get("checkpoint_interval_s"))),
        write_(Duration::seconds(p.get("checkpoint_write_s"))) {}
  const PolicyInfo& info() const override { return requeue_info(); }
  void start(World& w) override {
    w.act(SetCheckpointPlan{interval_, write_, CheckpointTier::kRemote,
                            "periodic blocking save to remote storage"});
    cycle_.start(w, "initial start");
  }
  void on_event(const Event& e, World& w) override {
    if (cycle_.on_event(e, w)) return;
    std::string why;
    if (auto* x = std::get_if<ProcessExit>(&e))
      why = "processes exited: " + x->signature;
    else if (auto* s = std::get_if<StartFailed>(&e))
      why = "start failed: " + s->signature;
    else if (auto* c = std::get_if<CodeUpdateRequested>(&e))
      why = "code update " + c->version;
    else
      return;  // requeue has no inspections, metrics or stack analysis
    cycle_.begin(w, AcquireMode::kRequeue, {}, "requeue whole job: " + why);
  }

 private:
  Duration interval_, write_;
  RestartCycle cycle_;
};

class Oracle final : public Policy {
 public:
  explicit Oracle(const Params& p) : restart_spares_(p.get("evict_on_transient") != 0) {}
  const PolicyInfo& info() const override { return oracle_info(); }
  void start(World& w) override {
    w.act(EnableOracle{"upper bound: perfect detection and localization"});
    w.act(SetCheckpointPlan{Duration::zero(), Duration::zero(), CheckpointTier::kMemoryWithPeer,
                            "every step in memory with a peer copy, no blocking"});
    cycle_.start(w, "initial start");
  }
  void on_event(const Event& e, World& w) override {
    if (ended_) return;  // EndRun: the on-call has it
    if (cycle_.on_event(e, w)) return;
    if (auto* f = std::get_if<OracleFault>(&e)) {
      if (f->data_bug) {
        // Nothing automatic fixes the data: page the on-call at once.
        if (cycle_.state() == RestartCycle::State::kRunning)
          w.act(StopJob{"oracle: " + f->category});
        ended_ = true;
        w.act(EndRun{"code_or_data", "oracle knows the data is at fault: " + f->category});
        return;
      }
      if (f->code_bug) {
        if (cycle_.state() == RestartCycle::State::kRunning)
          w.act(StopJob{"oracle: " + f->category});
        cycle_.roll_back(w, "oracle knows the code is at fault");
        return;
      }
      std::vector<SlotId> slots;
      if (f->persistent || restart_spares_) {
        for (MachineId m : f->machines)
          if (w.cluster().slot_of(m) >= 0) slots.push_back(w.cluster().slot_of(m));
      }
      if (!slots.empty()) {
        if (cycle_.state() == RestartCycle::State::kRunning)
          w.act(StopJob{"oracle: " + f->category});
        MachineSet bad;
        for (SlotId s : slots) bad.push_back(w.cluster().machine_in(s));
        w.act(EvictMachines{bad, "oracle knows they are broken: " + f->category});
        cycle_.begin(w, AcquireMode::kOracle, slots, "replace with ready spares");
      } else {
        cycle_.begin(w, AcquireMode::kOracle, {}, "restart in place: " + f->category);
      }
      return;
    }
    if (auto* c = std::get_if<CodeUpdateRequested>(&e)) {
      cycle_.begin(w, AcquireMode::kOracle, {}, "code update " + c->version);
      return;
    }
    if (std::holds_alternative<ProcessExit>(e) || std::holds_alternative<StartFailed>(e)) {
      // Already handled through OracleFault; a stray exit still gets a restart.
      if (cycle_.state() == RestartCycle::State::kRunning)
        cycle_.begin(w, AcquireMode::kOracle, {}, "restart after " + describe(e));
    }
  }

 private:
  bool restart_spares_;
  bool ended_ = false;
  RestartCycle cycle_;
};

class FailoverBench final : public Policy {
 public:
  explicit FailoverBench(const Params& p)
      : k_(static_cast<int>(p.get("k"))),
        mode_(static_cast<int>(p.get("mode"))),
        at_(p.get("at_s")) {}
  const PolicyInfo& info() const override { return failover_bench_info(); }
  void start(World& w) override {
    w.act(SetCheckpointPlan{Duration::zero(), Duration::zero(), CheckpointTier::kMemoryWithPeer,
                            "no loss"});
    start_ = w.act(StartJob{"initial start"});
    w.set_timer(Duration::seconds(at_), 1);
  }
  void on_event(const Event& e, World& w) override {
    if (auto* t = std::get_if<TimerFired>(&e); t && t->tag == 1) {
      std::vector<SlotId> slots;
      MachineSet ms;
      for (SlotId s = 0; s < std::min(k_, w.cluster().slots()); ++s) {
        slots.push_back(s);
        ms.push_back(w.cluster().machine_in(s));
      }
      w.act(StopJob{"benchmark eviction"});
      w.act(EvictMachines{ms, "benchmark eviction"});
      const AcquireMode mode = mode_ == 0   ? AcquireMode::kStandby
                               : mode_ == 1 ? AcquireMode::kReschedule
                                            : AcquireMode::kRequeue;
      acquire_ = w.act(AcquireMachines{mode, slots, "benchmark"});
    }
    if (auto* r = std::get_if<MachinesReady>(&e); r && r->action == acquire_)
      start_ = w.act(StartJob{"ready"});
  }

 private:
  int k_, mode_;
  double at_;
  ActionId start_ = 0, acquire_ = 0;
};

}  // namespace

const PolicyInfo& failover_bench_info() {
  static const PolicyInfo info{
      "failover-bench",
      "1",
      "experiment: evict k machines once and refill them (0 warm standby, 1 reschedule, 2 requeue)",
      {
          {"k", "machines evicted", "count", 1, 1, 1e6},
          {"mode", "0 warm standby, 1 reschedule, 2 requeue", "choice", 0, 0, 2},
          {"at_s", "when the eviction happens", "s", 3600, 0, 1e9},
      }};
  return info;
}

std::unique_ptr<Policy> make_failover_bench(const Params& p) {
  return std::make_unique<FailoverBench>(p);
}

const PolicyInfo& requeue_info() {
  static const PolicyInfo info{
      "requeue",
      "1",
      "common practice: detect at exit or collective timeout, requeue the whole job, restart "
      "from the last periodic remote checkpoint",
      {
          {"checkpoint_interval_s", "training time between periodic checkpoints", "s", 1800, 1e-3,
           1e7},
          {"checkpoint_write_s", "blocking time of one save to remote storage (Megatron-style)",
           "s", 6.77, 0, 1e5},
      }};
  return info;
}

std::unique_ptr<Policy> make_requeue(const Params& p) { return std::make_unique<Requeue>(p); }

const PolicyInfo& oracle_info() {
  static const PolicyInfo info{
      "oracle",
      "2",
      "upper bound: instant detection and localization, unlimited ready spares, every-step "
      "in-memory checkpoint",
      {
          {"evict_on_transient",
           "also replace the machine for transient machine faults (1) or "
           "restart in place (0)",
           "bool", 0, 0, 1},
      }};
  return info;
}

std::unique_ptr<Policy> make_oracle(const Params& p) { return std::make_unique<Oracle>(p); }

}  // namespace faultline::policies
