// The decisions half of `faultline sim replay` (sim/replay.h): the live run's actions set
// beside the actions the simulator took replaying its faults, one by one. A decision is an
// action reduced to what a policy decided: its kind, what it names (machines, as the live
// run names them; slots, mode, test, mechanism) and the kind of its reason (the reason's
// words up to its first ": ", numbers and asides left out), not its timing or free text.
// Notes are the policy's commentary, not decisions, and are left out.
//
// The simulated side is replica 0 of the replay, under the recorded seed (or --seed): its
// actions and the machines that joined each slot, recorded by SimWorld when
// RunOptions::action_records is on. A simulated machine is named as the live run named the
// machine that joined the same slot the same time: the k-th machine into slot s in the
// simulator is the live run's k-th machine into slot s (the job's first machines are the
// first); a simulated machine with no live counterpart is "sim:ID".
//
// The two sequences are aligned as a diff aligns lines (a longest common subsequence of
// equal decisions). K of N: the live decisions the alignment matched. Each decision left
// unmatched, on either side, is a mismatch, explained when one of the listed unmodelled
// differences (unmodelled_differences()) accounts for it, else unexplained: a bug in one
// of the two Worlds or a modelling gap not yet written down.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eventlog/event_log.h"
#include "policies/api/action.h"
#include "sim/metrics.h"

namespace faultline::sim {

struct Decision {
  std::size_t index = 0;  // in its side's sequence of decisions
  double t_s = 0;         // on the live clock (the simulated time plus the start offset)
  std::string kind;       // the action's type: "StopJob", "EvictMachines", ...
  std::string what;       // what it names, machines by their live names: "[m1] standby ..."
  std::string reason;     // as the policy wrote it
  std::string reason_kind;
  // Live: from the first failed start attempt to the first successful start (set-up).
  bool setup = false;
  // A set-up attempt is never matched: the simulator has none (it is explained instead).
  bool same_as(const Decision& o) const {
    return !setup && !o.setup && kind == o.kind && what == o.what && reason_kind == o.reason_kind;
  }
  std::string text() const;  // "EvictMachines [m3] realtime_eviction (real-time host alert)"
};

// The kind of a reason: its words up to the first ": ", without parenthesised asides, with
// every run of digits written "#", and trimmed ("crash: killed by signal 9" -> "crash").
std::string reason_kind(const std::string& reason);

// A difference between the live run and the simulator that the simulator does not model:
// a decision it accounts for is an explained mismatch.
struct UnmodelledDifference {
  const char* name;
  const char* why;
};
const std::vector<UnmodelledDifference>& unmodelled_differences();

// The live run's machine names by live machine id: the header's "machine_names" when it
// has them, else the journal beside the log (journal.json, "machine_names"), else the
// config file the header names (its machines, then its standbys), else "machine ID".
std::vector<std::string> live_machine_names(const traces::EventLog& log, const std::string& path);

// The live run's machines into each slot, in order (the job's first machines first):
// from each MachinesReady and the AcquireMachines it answers (slots filled in the order the
// live backend fills them).
std::vector<std::vector<MachineId>> live_slot_entries(const traces::EventLog& log);

// The live run's decisions (its actions but notes).
std::vector<Decision> live_decisions(const traces::EventLog& log,
                                     const std::vector<std::string>& names);

// The simulated decisions from replica 0's records (RunOptions::action_records), times
// moved by `offset_s` onto the live clock. Throws std::runtime_error on a malformed record.
std::vector<Decision> sim_decisions(const std::vector<std::string>& records, double offset_s,
                                    int job_machines,
                                    const std::vector<std::vector<MachineId>>& live_entries,
                                    const std::vector<std::string>& names);

struct DecisionMismatch {
  std::optional<Decision> live, sim;  // one of the two (the other side has nothing there)
  std::string explained_by;           // an unmodelled difference's name, or empty
  std::size_t stretch = 0;            // mismatches of one stretch lie between the same matches
};

// What the comparison needs to know of the run beside the two sequences.
struct DecisionContext {
  double horizon_s = 0;             // the live clock's end
  double end_window_s = 30;         // "end of the run": this close to the end (at most horizon/10)
  std::vector<double> fault_times;  // the live run's fault records
  std::vector<double> live_starts;  // its StartJob actions
  std::vector<double> restarts;     // its controller restarts (restart records)
  double restart_window_s = 5;      // "controller restart": this long after one
  bool live_started = true;         // a live start succeeded
};

struct DecisionComparison {
  std::size_t live = 0, sim = 0, matched = 0, explained = 0, unexplained = 0;
  std::vector<DecisionMismatch> mismatches;      // in live-clock order of the alignment
  std::optional<std::size_t> first_unexplained;  // index into mismatches
  bool ok() const { return unexplained == 0; }
};

DecisionComparison compare_decisions(const std::vector<Decision>& live,
                                     const std::vector<Decision>& sim, const DecisionContext& ctx);

// Takes the action records (RunOptions::action_records) out of every replica's decisions:
// they are for this comparison, never written. Returns replica 0's.
std::vector<std::string> take_action_records(std::vector<ReplicaResult>& results);

// All of the above for replica 0's `records` of a replay of `log` (read from `path`): the
// result document's "decisions". Throws std::runtime_error on a malformed record.
nlohmann::json compare_with_live(const traces::EventLog& log, const std::string& path,
                                 const std::vector<std::string>& records, double start_offset_s,
                                 double horizon_s, std::uint64_t seed);

// The result document's "decisions" and the text report's lines.
nlohmann::json decisions_json(const DecisionComparison& c, std::uint64_t seed);
std::string format_decisions_text(const nlohmann::json& decisions);

}  // namespace faultline::sim
