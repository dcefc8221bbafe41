// Job: the simulated job's state machine as SimWorld drives it. Whether it is idle,
// running (or stuck in a hang), down or starting (initialising, then restoring); its run
// epoch, which drops events meant for an earlier run; what a start must restore (the slots
// that got a new machine since it last ran) and what an in-place restart keeps; an EndRun's
// verdict; the slowdowns the running job works around; and how many actions of each kind a
// replay has timed so far.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "policies/api/ids.h"

namespace faultline::sim {

enum class JobState : std::uint8_t { kIdle, kRunning, kDown, kStarting };
enum class StartStage : std::uint8_t { kInit, kRestore };

class Job {
 public:
  // A job of `slots` slots; the first start loads initial weights, not a checkpoint.
  explicit Job(int slots) : fresh(static_cast<std::size_t>(slots), false) {}

  // The job computes (it runs and no hang holds it).
  bool computing() const { return state == JobState::kRunning && !stuck; }
  // Slot s got a new machine since the job last ran (counted once).
  void mark_fresh(SlotId s) {
    if (fresh[s]) return;
    fresh[s] = true;
    fresh_slots.push_back(s);
  }
  // The slots whose ranks an in-place restart restarts, in slot order: the fresh ones, else
  // slot 0 standing for the failed rank's machine, which the model does not track.
  std::vector<SlotId> restarted_slots() const;
  // The index of the next action of replay_durations key `key` (counts it).
  std::size_t next_timed(const std::string& key) { return timed[key]++; }

  JobState state = JobState::kIdle;
  StartStage stage = StartStage::kInit;
  // In-place restarts (StartJob::in_place): the start under way is one; the job's processes
  // hold its state (it ran since the last requeue); the progress lose() dropped since then,
  // which the survivors still hold in memory.
  bool in_place = false;
  bool processes_kept = false;
  std::int64_t lost_in_memory = 0;
  bool trained = false;  // a start has finished: the next ones are restarts (job.init_s)
  ActionId start_action = 0;
  std::int64_t epoch = 0;  // bumps whenever the job starts or stops
  bool stuck = false;
  bool ended = false;  // EndRun: nothing starts the job again (until the on-call requeues it)
  std::string ended_verdict;
  bool broken_unacted = false;
  std::vector<bool> fresh;          // slot got a new machine since the job last ran
  std::vector<SlotId> fresh_slots;  // those slots: work per restart in changed slots, not N
  // Slots whose slowness the running job works around (MitigateSlowdown): the level,
  // 1 rebalanced, 2 reconfigured. Undone when the job stops.
  std::vector<std::pair<SlotId, int>> mitigated;
  std::map<std::string, std::size_t> timed;  // actions of each replay_durations key so far
};

}  // namespace faultline::sim
