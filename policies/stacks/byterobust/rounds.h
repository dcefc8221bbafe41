// The byterobust stack's diagnosis rounds and the restart they lead to, kept apart from
// the ladder (controller.cc) because overlap lives here (docs/policies-and-modules.md,
// "When faults overlap").
//
// A round is one conversation of tests for one failure: the stop-time tests of a crash,
// a NaN's bit-wise test, a localizer's replays or probes, a stall's stack capture. Each
// test it asks for is tagged with the round, so that an outcome is matched to the round
// that asked for it and never to another: one that arrives after its round closed is
// stale (the stack still uses a stop-time test that named a culprit, and drops the rest
// with a note). While a round is open the job stays down: a second fault joins it (an
// alert evicts and replaces its machine; the round goes on) and the restart waits for
// its conclusion. A value type: the stack tells it what it asked and what came back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"
#include "policies/api/ids.h"
#include "policies/module.h"

namespace faultline::policies {

class Rounds {
 public:
  enum class Test : std::uint8_t {
    kStopTime,   // a crash's stop-time test: its failures are culprits
    kNan,        // a NaN's bit-wise alignment test: its failures are culprits
    kLocalizer,  // a localizer's probe or replay: only the localizer reads it
    kStall,      // a stall's stack capture
    kMfu,        // an MFU decline's capture (the job trains: belongs to no round)
  };
  // What came back, against what asked for it.
  struct Outcome {
    Test test = Test::kStopTime;
    bool current = false;  // it belongs to the round under way
  };

  // A round begins; the one before, if still open, is over (its tests in flight are stale).
  void open() {
    ++round_;
    open_ = true;
  }
  // The round under way concluded (an eviction, a reattempt, a rollback, a requeue).
  void close() { open_ = false; }
  bool is_open() const { return open_; }
  // Test action `id` was asked for by the round under way (kMfu: by no round).
  void asked(ActionId id, Test t) { asked_.push_back(Asked{id, t == Test::kMfu ? -1 : round_, t}); }
  // The outcome of action `id` arrived (or its refusal). nullopt when no round asked for it.
  std::optional<Outcome> answered(ActionId id) {
    const auto it =
        std::find_if(asked_.begin(), asked_.end(), [id](const Asked& a) { return a.id == id; });
    if (it == asked_.end()) return std::nullopt;
    const Asked a = *it;
    asked_.erase(it);
    return Outcome{a.test, a.test == Test::kMfu || (open_ && a.round == round_)};
  }
  // Tests still in flight (any round).
  bool waiting() const { return !asked_.empty(); }

 private:
  struct Asked {
    ActionId id = 0;
    int round = 0;
    Test test = Test::kStopTime;
  };
  int round_ = 0;
  bool open_ = false;
  std::vector<Asked> asked_;  // a handful at a time: a vector, no node per test
};

// The restart the stack wants once nothing holds it back (a round open, machines being
// acquired, a dropped replica's slot refilling): a start, a rollback or a hot update.
struct Restart {
  enum class Kind : std::uint8_t { kStart, kRollBack, kHotUpdate } kind = Kind::kStart;
  std::string why;
  Mechanism mechanism = Mechanism::kNone;
  bool after_failure = false;  // a restart of the job that ran (StartJob::in_place may apply)
  std::string version = {};    // a hot update's
};

// The slots of `view` that have no machine, in order.
std::vector<SlotId> empty_slots(const ClusterView& view);
// The machines a localizer's test names that left the job during the search, sorted: those
// of `left` (evicted meanwhile), and with `view` every one not in its job (a requeue drained
// it: a look at each).
MachineSet departed(const LocalizationTest& test, const MachineSet& left,
                    const ClusterView* view = nullptr);
// "[3,7]", for notes.
std::string machine_list(const MachineSet& machines);

}  // namespace faultline::policies
