// What SimWorld's event queue carries: an event for the policy (dropped when it was meant
// for an earlier run of the job), a policy timer, or one of the simulator's own steps
// (a machine acquired, a start's restore done, a fault's end, a repair, ...).
#pragma once

#include <cstdint>
#include <variant>

#include "policies/api/event.h"
#include "policies/api/ids.h"

namespace faultline::sim::queued {

struct Deliver {
  Event event;
  std::int64_t epoch = -1;  // dropped if the job's run epoch changed (-1 = always)
};
struct TimerItem {
  TimerId id;
  std::uint64_t tag;
};
struct Internal {
  enum Kind : std::uint8_t {
    kAcquireScheduled,
    kAcquirePulled,
    kStartInit,
    kStartRestored,
    kFaultEnd,
    kWatchdog,
    kProbeDone,
    kStacksDone,
    kReplayDone,
    kStandbyWoken,
    kPoolRefilled,
    kCodeFixed,
    kRepaired,
    kHoldEnd,
    kOnCallDone,
    kPreempted,
    kReplicaTimeout,  // a hung replica's quorum timed out (token: the fault)
    kRejoined,        // a RejoinReplica's state transfer ended (token: the action)
    kWarnedStrike,    // a warned fault strikes (token: index into the warned faults)
    kFalseWarning,    // a false warning of a category comes (token: the category)
    kMigrateStep      // a migration's standbys woke or its copy ended (token: the action)
  } kind;
  std::uint64_t token = 0;  // action id or fault id
};
using Payload = std::variant<Deliver, TimerItem, Internal>;

}  // namespace faultline::sim::queued
