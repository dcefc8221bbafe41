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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policies/api/ids.h"
#include "traces/storage_health.h"

namespace faultline::live {

struct JournalState {
  // The run's time origin, on the wall clock (ns since the Unix epoch): run time is wall
  // time since it, measured by the monotonic clock within one controller's life, so it
  // survives a reboot or a failover to another host (a monotonic origin would not).
  std::int64_t origin_unix_ns = 0;
  std::int64_t last_t_ns = 0;        // run time at the last save: it never goes back
  std::uint64_t action_ceiling = 0;  // ids below it may be in the log: a restart starts here
  std::int64_t gen = 0;              // job generation (one per launch)
  std::string version;               // code version running or to run
  std::string good_version;          // last version that ran cleanly (RollBack target)
  bool running = false;              // every rank of `gen` had started
  std::vector<MachineId> slots;      // machine in each slot, kNoMachine when empty
  std::vector<MachineId> standby;    // parked warm standbys
  std::vector<MachineId> evicted;
  int ckpt_every = 10;              // steps between checkpoints
  std::int64_t replica_quorum = 0;  // replica groups: the latest quorum's number (never reused)
  // Replica groups: seconds of steps' time the missing replicas did not train (part of
  // lost_s's missing_replicas, and out of the productive time).
  double replica_share_s = 0;
  std::int64_t first_step = -1;  // step the run started from
  std::int64_t last_step = -1;   // newest step reported
  std::uint64_t next_action = 1;
  std::vector<double> step_times;    // healthy step times (s), for the fault-free step time
  std::map<MachineId, int> strikes;  // times each machine was taken out of the job
  std::vector<MachineId> retired;    // evicted too often: left out for good
  std::string ended_verdict;         // EndRun's verdict: the job is not started again
  // The config's machine names (job machines, then standbys) the ids above index: a config
  // whose order changed is mapped back by name when a controller resumes.
  std::vector<std::string> machine_names;
  // The account of lost time (docs/metrics.md, "Lost time"), so that a restarted
  // controller's counters continue where they were: seconds assigned so far to each lost
  // phase (traces/time_phases.h names; never productive). Absent in older journals: zeros.
  std::map<std::string, double> lost_s;
  // The period the job was stopped in at the save, in run time (ns), continued by a
  // restarted controller: the start-up (category "startup") or an open incident.
  struct Stop {
    std::string category, cause;
    std::int64_t began_ns = 0, detected_ns = 0;
    std::int64_t restart_began_ns = -1;  // -1: no restart launched yet
    std::int64_t waited_ns = 0;          // waited for machines in it
    std::int64_t waiting_since_ns = -1;  // a wait for machines under way since; -1: none
    bool operator==(const Stop&) const = default;
  };
  std::optional<Stop> stop;
  // The incident counters and latency histograms of /metrics (docs/metrics.md), so that a
  // restarted controller continues them. Absent in older journals: zeros.
  struct Latency {
    std::vector<double> bounds;          // the histogram's upper bounds (s)
    std::vector<std::uint64_t> buckets;  // observations per bucket, bounds.size() + 1
    double sum = 0;
    bool operator==(const Latency&) const = default;
  };
  struct Incidents {
    std::map<std::string, std::uint64_t> opened;                          // category -> count
    std::map<std::pair<std::string, std::string>, std::uint64_t> closed;  // (category, resolution)
    Latency detection, recovery;
    bool operator==(const Incidents&) const = default;
  };
  Incidents incidents;
  // Replica groups: the replicas out of the quorum at the save (dropped, their rejoin pending
  // or under way), each an open replica_drop incident, in run time (ns). A restarted
  // controller adopts the job without them and has the policy bring them back.
  struct ReplicaOut {
    std::int64_t replica = 0;
    std::string cause;
    std::int64_t began_ns = 0, detected_ns = 0;
    bool operator==(const ReplicaOut&) const = default;
  };
  std::vector<ReplicaOut> replicas_out;
};

// The end of an event log as a restarted controller finds it: the run time of its last
// complete record, and when the file was last written (its mtime, on the wall clock).
struct EventLogEnd {
  std::int64_t t_ns = 0;
  std::int64_t written_unix_ns = 0;
};
// nullopt when the file does not exist or holds no complete record with a time.
std::optional<EventLogEnd> event_log_end(const std::string& path);

// The journal format this release writes. 1 (no "format" key, "origin_ns"): the first
// release's, whose time origin is a CLOCK_MONOTONIC value of the boot that wrote it; it is
// migrated by resume_after() from the event log, never read as it stands. 2: "origin_unix_ns"
// (written without "format" before the key was added; either way it reads the same).
inline constexpr int kJournalFormat = 2;

class Journal {
 public:
  explicit Journal(std::string path) : path_(std::move(path)) {}
  // Loads the journal when the file exists. Returns false with *err ("FILE: FIELD: ...")
  // when it exists but cannot be used; true otherwise (resumed() says which).
  bool load(std::string* err);
  // load() of the file's text (the fuzzer's entry): resumed() when it is a journal.
  // A "format" other than 1 or kJournalFormat is refused in one line naming the file.
  bool parse(const std::string& text, std::string* err);
  // Before a resumed journal is used: the run's time continues where the event log ended
  // (`log`: event_log_end() of the run's log), so that log time never goes back, even when
  // the journal was saved before the log's last records. A format-1 journal gets its
  // origin on the wall clock from the log (the log's last run time, then the wall time
  // since the log was last written); without a log it is refused in one line ("PATH:
  // origin_ns: ..."), false with *err.
  bool resume_after(const std::optional<EventLogEnd>& log, std::string* err);
  // The format the journal on disk was read in (kJournalFormat for a new one).
  int format_read() const { return format_read_; }
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
  int format_read_ = kJournalFormat;
  traces::StorageHealth health_;
};

// What says, across a crash, that event-log records were waiting in memory for a failing
// disk when the controller died: a small file allocated when the controller starts and
// overwritten in place afterwards, so that writing it needs no new space on a full disk.
// (On a copy-on-write filesystem an overwrite may need space too; there the gap can still
// go unmarked.) A restarted controller reads it, writes the gap into the event log as a
// note, counts the records as lost, and clears it.
class OutageMarker {
 public:
  static constexpr std::size_t kBytes = 4096;
  struct Outage {
    std::uint64_t pending = 0;  // records waiting in memory
    std::uint64_t lost = 0;     // records already dropped from a full backlog
    std::int64_t since_unix_ms = 0;
    double first_t_s = 0;  // run time of the oldest waiting record
    double last_t_s = 0;   // and of the newest
    std::string error;     // the last write error ("PATH: strerror text")
    bool operator==(const Outage&) const = default;
  };
  explicit OutageMarker(std::string path) : path_(std::move(path)) {}
  ~OutageMarker();
  OutageMarker(const OutageMarker&) = delete;
  OutageMarker& operator=(const OutageMarker&) = delete;
  // Reads what a previous controller left (into previous()), then allocates the file for
  // this one. False with *err when the file cannot be made.
  bool open(std::string* err);
  const std::optional<Outage>& previous() const { return previous_; }
  // Why an open marker left by a previous controller was not believed ("" when none was):
  // its counts and times are checked before the gap is written into the log as lost.
  const std::string& ignored() const { return ignored_; }
  // Says (in place) that `o` is under way; clear() says none is. Both best effort.
  void set(const Outage& o);
  void clear();
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& text);
  std::string path_;
  int fd_ = -1;
  std::optional<Outage> previous_;
  std::string ignored_;
  std::optional<Outage> current_;
  bool clear_on_disk_ = false;
};

}  // namespace faultline::live
