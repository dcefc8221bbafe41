// RepairQueue: the machines taken out of the job on their way back to the standby pool
// (LiveRepair, repair_pipeline.h): each one's next check (a reactor timer), the checks run,
// whether one runs now or the machine is left to an operator, and since when an inspection
// alert fails its check; with the latest inspection alert of every machine. RepairPipeline
// runs the checks (kill, gpu_diag, the bit-wise test); this keeps their state and timers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class RepairQueue {
 public:
  struct Repair {
    std::uint64_t timer = 0;  // reactor timer of the next check; 0: none
    int checks = 0;           // checks run since it was taken out
    bool running = false;
    bool given_up = false;  // max_checks failed: left to a human
    Instant since{};        // an inspection alert after this fails the check
  };

  explicit RepairQueue(Reactor& reactor) : reactor_(reactor) {}
  RepairQueue(const RepairQueue&) = delete;
  RepairQueue& operator=(const RepairQueue&) = delete;
  // Cancels every check still scheduled.
  ~RepairQueue();

  // Machine m's repair (none when it is not in the queue).
  const Repair* find(MachineId m) const;
  const std::map<MachineId, Repair>& repairs() const { return repairs_; }

  // m was taken out of the job at `t`: its repair starts over (checks 0), nothing scheduled.
  void take_out(MachineId m, Instant t);
  // m's agent is back at `t` and m is out of the job and the pool: a repair that waits for
  // nothing (none running, none scheduled, not given up) is started. True when the caller
  // should schedule its check.
  bool agent_back(MachineId m, Instant t);
  // Schedules m's next check `after` from now (replacing one scheduled); `check` runs then.
  void schedule(MachineId m, Duration after, std::function<void()> check);
  // m leaves the queue (repaired by an operator, retired, back in the job or the pool): its
  // scheduled check is cancelled.
  void forget(MachineId m);
  // A check of m begins: false (nothing changed) when m is not in the queue or one runs.
  bool begin_check(MachineId m);
  // m's check failed at `t`: true when another is due (the caller schedules it), false when
  // `max_checks` have failed and m is left to an operator (or m is not in the queue).
  bool check_failed(MachineId m, int max_checks, Instant t);

  // An inspection alert from m's agent at `t`.
  void alert(MachineId m, Instant t) { last_alert_[m] = t; }
  // Whether m raised an inspection alert since its repair began (false when not in the queue).
  bool alerted_since_taken_out(MachineId m) const;

 private:
  Reactor& reactor_;
  std::map<MachineId, Repair> repairs_;
  std::map<MachineId, Instant> last_alert_;
};

}  // namespace faultline::live
