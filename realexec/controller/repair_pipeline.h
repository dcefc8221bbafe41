// RepairPipeline: the repair pipeline (LiveRepair): machines out of the job come back to the
// standby pool. A machine taken out of the job gets a strike, then is retired or queued for a
// repair check (RepairQueue): its old ranks killed, gpu_diag, then the bit-wise test; one that
// passes both (and raised no inspection alert since it was taken out) is back in the pool, one
// that fails is checked again after repair.retry_after_s, up to repair.max_checks, then left
// to an operator. It also says where every machine is (the job, the pool, retired, under
// repair), for the status and the metrics.
//
// LiveWorld owns the state these read and change (handed in as Job) and runs the tests for it
// (the probe hook). Unit-tested in tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/agent_requests.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/machine_link.h"
#include "realexec/controller/repair_queue.h"
#include "realexec/live_config.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

class RepairPipeline {
 public:
  // The machines that failed a test, whether one timed out, and details.
  using ProbeDone =
      std::function<void(const MachineSet& failed, bool timed_out, const std::string& details)>;
  // What the pipeline reads and acts on, owned by the world.
  struct Job {
    const LiveConfig& config;  // repair.*, the machines' names
    ClusterView& cluster;      // the job's slots and the standby pool
    Reactor& reactor;
    Journal& journal;  // the strikes and the machines retired
    AgentRequests& requests;
    MachineLink& link;
    std::function<Instant()> now;
    std::function<void(std::string_view)> note;
    std::function<void()> save;  // saves the journal
    // Runs `test` on `machines` within `deadline` (the world's probe_machines).
    std::function<void(ProbeKind test, const MachineSet& machines, Duration deadline,
                       ProbeDone done)>
        probe;
    std::function<void()> back_in_pool;  // a machine returned to the pool (a waiting acquire)
  };

  explicit RepairPipeline(Job job) : j_(std::move(job)), queue_(j_.reactor) {}

  // Where a machine is, for status and metrics.
  enum class MachineState {
    kJob,
    kStandby,
    kRetired,
    kRepairCheck,
    kAwaitingRepair,
    kLeftToOperator,
    kOut
  };
  MachineState state(MachineId m) const;
  const RepairQueue& queue() const { return queue_; }

  // A machine taken out of the job: a strike, then retirement or a repair check.
  void take_out(MachineId m);
  // Out of the fleet for good (repair.retire_after strikes, or the policy said so): no
  // repair check; only an operator's repair returns it.
  void retire(MachineId m, const std::string& why);
  // m's agent connected: a machine outside the job and the pool is checked, unless retired or
  // given up on.
  void agent_back(MachineId m);
  // An inspection alert from m's agent at `t` (a machine under repair fails its check on it).
  void alert(MachineId m, Instant t) { queue_.alert(m, t); }
  // An operator repaired m: it leaves the queue.
  void forget(MachineId m) { queue_.forget(m); }
  bool is_retired(MachineId m) const;
  bool in_pool(MachineId m) const;

 private:
  void schedule(MachineId m, Duration after);
  void run_check(MachineId m);
  void probe_repaired(MachineId m, Duration deadline);
  void repair_failed(MachineId m, const std::string& why);

  Job j_;
  RepairQueue queue_;
};

}  // namespace faultline::live
