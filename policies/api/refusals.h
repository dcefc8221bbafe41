// When a World refuses an action whatever its backend: the ActionFailed rules of the
// contract (policies/api/action.h says, beside each action, when it is refused), written
// once, with one wording each.
//
// SimWorld and LiveWorld ask refusal() first for every action the policy takes and answer
// a refusal as ActionFailed{id, reason} (tests/conformance checks that both give the same
// reason). Only then does each apply the refusals of its own backend: the simulator's
// grouped probe times machines of the job only; live mode refuses code versions its config
// does not name, a grouped probe whose master port would pass 65535, and what it cannot do
// at all (the oracle, MitigateSlowdown).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"

namespace faultline {

// What every World knows when an action arrives.
struct RefusalContext {
  const ClusterView& cluster;     // slots, and the machines of the fleet
  bool job_running = false;       // the job trains (a start under way does not count)
  bool ended = false;             // an EndRun was taken
  std::string_view verdict = {};  // that EndRun's verdict
};

// Why `a` is refused, or nothing when the contract lets it through (a backend may still
// refuse it for a reason of its own).
std::optional<std::string> refusal(const Action& a, const RefusalContext& c);

// The empty-slot rule alone ("cannot start: slot 1 has no machine"), for a World's own
// starts: a RollBack's restart (the code is rolled back first), and live mode adopting the
// job of a restarted controller.
std::optional<std::string> empty_slot_refusal(const ClusterView& cluster);

}  // namespace faultline
