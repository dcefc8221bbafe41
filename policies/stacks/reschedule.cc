// The reschedule stack (Pathways-style), common practice and a baseline for byterobust:
// the machine a crash names is evicted and replaced cold by the scheduler; a crash that
// names no machine requeues the whole job; every restart is from the last periodic remote
// checkpoint. Nothing in it is ByteRobust's, so it lives apart from that stack.
#include "policies/stacks/reschedule.h"

#include "policies/api/world.h"

namespace faultline::policies {

namespace {

// Reschedule (Pathways-style): the machine named by the crash is evicted and replaced
// cold by the scheduler; a crash that names no machine requeues the whole job.
// Restart from the last periodic remote checkpoint.
class Reschedule final : public Policy {
 public:
  explicit Reschedule(const Params& p) : p_(p) {}
  const PolicyInfo& info() const override { return reschedule_info(); }
  void start(World& w) override {
    w.act(SetCheckpointPlan{Duration::seconds(p_.get("checkpoint_interval_s")),
                            Duration::seconds(p_.get("checkpoint_write_s")),
                            CheckpointTier::kRemote, "periodic blocking save to remote storage"});
    start_ = w.act(StartJob{"initial start"});
  }
  void on_event(const Event& e, World& w) override {
    if (auto* r = std::get_if<MachinesReady>(&e); r && r->action == acquire_) {
      start_ = w.act(StartJob{"machines ready"});
      return;
    }
    if (auto* s = std::get_if<JobStarted>(&e); s && s->action == start_) {
      running_ = true;
      return;
    }
    MachineId m = kNoMachine;
    std::string why;
    if (auto* x = std::get_if<ProcessExit>(&e)) {
      m = x->machine;
      why = x->signature;
    } else if (auto* s = std::get_if<StartFailed>(&e)) {
      m = s->machine;
      why = s->signature;
    } else if (auto* c = std::get_if<CodeUpdateRequested>(&e)) {
      why = "code update " + c->version;
    } else {
      return;
    }
    if (running_) w.act(StopJob{why});
    running_ = false;
    if (m != kNoMachine && m < w.cluster().machine_count() && w.cluster().slot_of(m) >= 0) {
      const SlotId s = w.cluster().slot_of(m);
      w.act(EvictMachines{{m}, "named by the crash: " + why, Mechanism::kReschedule});
      acquire_ = w.act(AcquireMachines{
          AcquireMode::kReschedule, {s}, "cold replacement", Mechanism::kReschedule});
    } else {
      acquire_ = w.act(AcquireMachines{
          AcquireMode::kRequeue, {}, "no culprit named: " + why, Mechanism::kRequeue});
    }
  }

 private:
  const Params p_;
  bool running_ = false;
  ActionId start_ = 0, acquire_ = 0;
};

}  // namespace

const PolicyInfo& reschedule_info() {
  static const PolicyInfo info{
      "reschedule",
      "1",
      "Pathways-style: evict the machine a crash names and replace it cold; otherwise requeue; "
      "restart from the "
      "last periodic remote checkpoint",
      {
          {"checkpoint_interval_s", "training time between periodic checkpoints", "s", 1800, 1e-3,
           1e7},
          {"checkpoint_write_s", "blocking time of one save to remote storage", "s", 6.77, 0, 1e5},
      },
      // Cold replacements for the machine a crash names, a requeue when it names none.
      std::vector<FacilityUse>{
          {Facility::kReschedule}, {Facility::kRequeue}, {Facility::kCrashCulprit}}};
  return info;
}

std::unique_ptr<Policy> make_reschedule(const Params& p) { return std::make_unique<Reschedule>(p); }

}  // namespace faultline::policies
