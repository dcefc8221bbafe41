// The controller's journal: the little state that must survive a controller restart so
// that the new controller adopts the job instead of starting over.
//
// Saved atomically (write a temporary file, fsync, rename, fsync the directory) after
// every change of placement, generation or code version. Policy state is not
// journaled: a restarted policy starts fresh and its StartJob adopts the running job.
// A save that fails (a full disk) leaves the previous journal whole and removes its
// temporary file; health() says so until a later save (the next change, or retry())
// works.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "policies/api/ids.h"
#include "traces/storage_health.h"

namespace faultline::live {

struct JournalState {
  std::int64_t origin_ns = 0;       // monotonic clock at the start of the run
  std::int64_t gen = 0;             // job generation (one per launch)
  std::string version;              // code version running or to run
  std::string good_version;         // last version that ran cleanly (RollBack target)
  bool running = false;             // every rank of `gen` had started
  std::vector<MachineId> slots;     // machine in each slot, kNoMachine when empty
  std::vector<MachineId> standby;   // parked warm standbys
  std::vector<MachineId> evicted;
  int ckpt_every = 10;              // steps between checkpoints
  std::int64_t first_step = -1;     // step the run started from
  std::int64_t last_step = -1;      // newest step reported
  std::uint64_t next_action = 1;
  std::vector<double> step_times;   // healthy step times (s), for the fault-free step time
  std::map<MachineId, int> strikes;  // times each machine was taken out of the job
  std::vector<MachineId> retired;   // evicted too often: left out for good
  std::string ended_verdict;        // EndRun's verdict: the job is not started again
};

class Journal {
 public:
  explicit Journal(std::string path) : path_(std::move(path)) {}
  // Loads the journal when the file exists. Returns false with *err ("FILE: FIELD: ...")
  // when it exists but cannot be used; true otherwise (resumed() says which).
  bool load(std::string* err);
  // Writes atomically; false with *err ("PATH: strerror text") on an I/O error (the
  // previous journal stays, whole).
  bool save(std::string* err);
  // Saves again when the last save failed; true when the journal on disk is current.
  bool retry() {
    std::string err;
    return !health_.failing || save(&err);
  }
  // pending is 1 while the state on disk is out of date; lost is never counted.
  const traces::StorageHealth& health() const { return health_; }
  bool resumed() const { return resumed_; }
  JournalState& state() { return state_; }
  const JournalState& state() const { return state_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  JournalState state_;
  bool resumed_ = false;
  traces::StorageHealth health_;
};

}  // namespace faultline::live
