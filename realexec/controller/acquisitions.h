// Acquisitions: AcquireMachines and AvoidMachines in live mode (acquisitions.cc). Live mode's
// scheduler is its standby list: an acquisition fills the empty slots it names with parked,
// connected standbys (those AvoidMachines named last), or waits, as a job waits in a
// scheduler's queue, until enough machines are parked (a standby connects, a repair check
// passes, an operator repairs a machine): retry() then places them.
//
// LiveWorld owns the state these read and change (handed in as Job). Unit-tested in
// tests/realexec/agent/live_world_parts_test.cc.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/event.h"
#include "policies/api/ids.h"
#include "policies/api/time.h"
#include "realexec/controller/machine_link.h"
#include "realexec/live_config.h"

namespace faultline::live {

class Acquisitions {
 public:
  // What an acquisition reads and acts on, owned by the world.
  struct Job {
    const LiveConfig& config;  // the machines' names
    ClusterView& cluster;      // the job's slots and the standby pool
    MachineLink& link;
    std::function<Instant()> now;
    std::function<void(std::string_view)> note;
    std::function<void(ActionId, bool ok, const std::string&, Instant started)> outcome;
    std::function<void(ActionId, const std::string& why, Instant t)> refuse;
    std::function<void(Event)> deliver;
    std::function<void()> save;                 // saves the journal
    std::function<void(MachineId)> taken_out;   // out of the job: to the repair pipeline
    std::function<void(Instant since)> waited;  // a wait for machines ended (the account)
  };

  explicit Acquisitions(Job job) : j_(std::move(job)) {}

  // AcquireMachines `id`, after act()'s contract refusals.
  void acquire(ActionId id, const AcquireMachines& a);
  // A machine may have been parked: the acquisition waiting for machines gets them, when
  // enough are.
  void retry();
  // Since when an acquisition waits for machines (none: it does not).
  std::optional<Instant> waiting_since() const;
  // AvoidMachines: standbys that join a slot last (host scoring).
  void avoid(MachineSet machines) { avoid_ = std::move(machines); }
  const MachineSet& avoided() const { return avoid_; }

 private:
  void place_into(ActionId id, const std::vector<SlotId>& empty, MachineSet ready, Instant t);

  struct Waiting {
    ActionId id = 0;
    std::vector<SlotId> slots;
    Instant started;
  };
  Job j_;
  std::optional<Waiting> waiting_;  // requeue/reschedule short of machines
  MachineSet avoid_;
};

}  // namespace faultline::live
