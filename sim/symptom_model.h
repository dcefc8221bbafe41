// SymptomModel: the simulator's fault ledger and the random streams behind every symptom
// (ns-3's error model as an object). SimWorld decides what a fault does to the job; this
// object remembers each fault, what became of it, which incidents are open, which faults
// wait for the job, and hands out the draws.
//
// Common random numbers: each fault's draws come from streams keyed by its arrival index,
// its purpose and the use (the n-th gpu_diag of this fault), never from a shared stream,
// so two stacks that test differently still see the same draws for the same fault. The
// keys are (seed, replica, tag, ...) as before this object existed: its draws are
// byte-identical to the ones SimWorld made itself.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/rng.h"
#include "scenarios/scenario.h"
#include "sim/metrics.h"

namespace faultline::sim {

// What became of a fault (the ledger): exactly one outcome each, fixed the first time one
// applies; kPending until then (kPending at the horizon = "horizon").
enum class Outcome : std::uint8_t { kPending, kInterrupted, kCaught, kLeft, kAbsorbed };

class SymptomModel {
 public:
  // A fault's streams, one per purpose (kProbe0 + k: the k-th test kind).
  enum Purpose : std::uint8_t {
    kCoverage,
    kInspectionPhase,
    kAttribution,
    kProbe0,
    kReplayDraw = kProbe0 + kProbeKinds,
    kUrgency,  // a code update: urgent or not (non_urgent)
    kPurposes
  };
  struct Fault {
    FaultId id = 0;
    std::uint64_t key = 0;  // arrival index (same in every stack); recurrences get their own
    int category = 0;
    Outcome outcome = Outcome::kPending;
    std::array<std::uint16_t, kPurposes> uses{};
    std::int64_t at = 0;
    std::vector<SlotId> slots;
    MachineSet machines;
    bool incident = false;  // affected the job
    bool active = true;     // still affects a machine in the job (persistent / slowdown)
    std::int64_t detected = -1;
    std::int64_t resolved = -1;
    Mechanism resolution = kResolutionOpen;  // how it was resolved (IncidentRecord::resolution)
    std::vector<MachineId> evicted;  // machines evicted while it was open (with --incidents)
    bool rearmed = false;
    bool alert_seen = true;  // the category's inspection can see this fault (alert_coverage)
  };

  // `sc` outlives the model.
  SymptomModel(const scenarios::Scenario& sc, std::uint64_t replica);

  // The categories as the fault stream draws them: a machine-scope hardware category's
  // rate raised to the bad machines' rate, which arrivals on good machines thin back down
  // (cluster.repair's bad_rate_factor).
  static std::vector<scenarios::FaultCategory> arrival_categories(const scenarios::Scenario& sc);
  // Per category: the arrival-rate multiplier for bad machines (1: no thinning).
  double thin(int category) const { return thin_[static_cast<std::size_t>(category)]; }
  // The next arrival index (the key of the arrival's streams).
  std::uint64_t next_key() { return arrivals_++; }

  // The ledger: every fault by FaultId (recurrences included), the incidents not yet
  // resolved, and the active faults that have not struck the job yet.
  std::vector<Fault>& faults() { return faults_; }
  const std::vector<Fault>& faults() const { return faults_; }
  std::vector<FaultId>& open() { return open_; }
  const std::vector<FaultId>& open() const { return open_; }
  std::vector<FaultId>& pending() { return pending_; }
  const std::vector<FaultId>& pending() const { return pending_; }
  // Scratch for the incidents a start or a drop resolves (its capacity kept).
  std::vector<FaultId>& resolved_now() { return resolved_now_; }
  // Fixes a pending fault's outcome (it struck, its machines left, or it ended); the first
  // outcome stays.
  void settle(Fault& f, Outcome o);

  // The next draw of fault f's stream for `purpose`.
  Rng rng(Fault& f, int purpose) const {
    return Rng({seed_, replica_, 0xFA17ull, f.key, static_cast<std::uint64_t>(purpose),
                f.uses[purpose]++});
  }
  // The stream of the next test of `kind` for a false failure on a healthy machine.
  Rng false_failure_rng(int kind) {
    return Rng({seed_, replica_, 0xF9ull, static_cast<std::uint64_t>(kind), probes_of_[kind]++});
  }

 private:
  std::uint64_t seed_;
  std::uint64_t replica_;
  std::vector<double> thin_;
  std::uint64_t arrivals_ = 0;
  std::vector<Fault> faults_;
  std::vector<FaultId> open_;
  std::vector<FaultId> pending_;
  std::vector<FaultId> resolved_now_;
  std::array<std::uint64_t, kProbeKinds> probes_of_{};  // tests run, by kind
};

using Fault = SymptomModel::Fault;

}  // namespace faultline::sim
