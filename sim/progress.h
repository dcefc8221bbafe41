// Training progress of one job between events, in closed form, and the wall-clock
// accounting of where every nanosecond went.
//
// A running job alternates `interval` of training with a blocking checkpoint of
// `blocking`; progress counts training time at full speed. Between two events the job
// may cross thousands of checkpoints; advance() handles them with arithmetic, never a
// loop per step. Losing the job (crash, stop) moves the progress made since the last
// complete checkpoint to `recompute`. After a (re)start the job may first run a
// warm-up that makes no progress (communicators built on first use, data loaders
// refilled, caches warmed). The buckets always add up to the wall time seen.
#pragma once

#include <cstdint>
#include <iterator>
#include <vector>

#include "policies/api/time.h"
#include "traces/time_phases.h"

namespace faultline::sim {

// Where wall time went; all buckets in nanoseconds and summing to the elapsed time.
struct Breakdown {
  std::int64_t productive = 0;  // training that was kept
  std::int64_t detection = 0;   // job broken but not yet acted on
  std::int64_t diagnosis = 0;   // stopped, policy diagnosing or deciding
  std::int64_t failover = 0;    // waiting for machines, pulling images, process init
  std::int64_t restore = 0;     // loading the checkpoint
  std::int64_t recompute = 0;   // training lost since the last complete checkpoint
  std::int64_t checkpoint = 0;  // blocking checkpoint time
  std::int64_t degraded =
      0;  // running slower than full speed, or paused to work around a slow machine
  std::int64_t warmup = 0;  // running after a (re)start before full speed (job.restart_warmup_s)
  std::int64_t waiting_for_machines = 0;  // stopped, no healthy machine free in a finite fleet
  // Replica groups: the share of training that the missing data-parallel replicas did not
  // do (1 - partial_replica_rate x live / dp of the running time), and quorum changes.
  std::int64_t missing_replicas = 0;
  std::int64_t total() const;
};

// The buckets in report order, with their names in results, tables and CSV columns: the
// shared phase names (traces/time_phases.h), which live mode reports too.
struct BucketInfo {
  const char* name;
  std::int64_t Breakdown::*field;
};
inline constexpr BucketInfo kBuckets[] = {
    {time_phase_name(TimePhase::kProductive), &Breakdown::productive},
    {time_phase_name(TimePhase::kDetection), &Breakdown::detection},
    {time_phase_name(TimePhase::kDiagnosis), &Breakdown::diagnosis},
    {time_phase_name(TimePhase::kFailover), &Breakdown::failover},
    {time_phase_name(TimePhase::kRestore), &Breakdown::restore},
    {time_phase_name(TimePhase::kRecompute), &Breakdown::recompute},
    {time_phase_name(TimePhase::kCheckpoint), &Breakdown::checkpoint},
    {time_phase_name(TimePhase::kDegraded), &Breakdown::degraded},
    {time_phase_name(TimePhase::kWarmup), &Breakdown::warmup},
    {time_phase_name(TimePhase::kWaitingForMachines), &Breakdown::waiting_for_machines},
    {time_phase_name(TimePhase::kMissingReplicas), &Breakdown::missing_replicas},
};

static_assert(std::size(kBuckets) == kTimePhaseCount, "one bucket per shared phase");

inline std::int64_t Breakdown::total() const {
  std::int64_t t = 0;
  for (const auto& k : kBuckets) t += this->*k.field;
  return t;
}

// A period of kept progress, for timelines: progress accrues from `start` at `rate`
// (training seconds per wall second, averaged over checkpoint cycles).
struct ProgressSegment {
  std::int64_t start = 0, end = 0;
  double rate = 1;
};

class ProgressModel {
 public:
  // interval <= 0 means no checkpoints at all.
  void set_plan(std::int64_t interval_ns, std::int64_t blocking_ns);
  // rate in (0, 1]: 1 / slowdown factor.
  void set_rate(double rate) { rate_ = rate; }
  double rate() const { return rate_; }
  // The job's progress runs at rate() x this (in [0, 1]) while data-parallel replicas are
  // missing; what the factor takes goes to missing_replicas, what the rate takes to degraded.
  void set_replica_factor(double f) { replica_ = f; }
  double replica_factor() const { return replica_; }
  // The wall-clock rate of progress: rate() x replica_factor().
  double speed() const { return rate_ * replica_; }
  void set_record_segments(bool on) { record_ = on; }
  // The job has just (re)started: its first `ns` of running make no progress and go
  // to the warm-up bucket. A stop (lose) ends the warm-up.
  void start_warmup(std::int64_t ns) { warmup_left_ = ns > 0 ? ns : 0; }
  // The running job pauses for `ns` (its layout changes around a slow machine): no
  // progress, accounted as degraded. After a warm-up still under way; a stop ends it.
  void pause(std::int64_t ns) { pause_left_ += ns > 0 ? ns : 0; }
  // The running job pauses for `ns` while its quorum changes (replica groups): no progress,
  // accounted as missing_replicas. After any pause already under way.
  void pause_quorum(std::int64_t ns) { quorum_left_ += ns > 0 ? ns : 0; }

  // Runs the job for `dt` from wall instant `at`, accruing progress and checkpoints.
  void run(std::int64_t at, std::int64_t dt, Breakdown& b);
  // Drops everything since the last complete checkpoint (crash or stop at `at`).
  void lose(Breakdown& b);
  // Drops committed progress back to `to` (a restore from an older checkpoint).
  void roll_back_committed(std::int64_t to, Breakdown& b);
  // Gives back `ns` of the progress lose() dropped, as training since the last checkpoint
  // (recompute to productive), at wall instant `at`: an in-place restart whose survivors
  // kept their state (FlashRecovery). A later lose() drops it again. REQUIRES ns at most
  // what lose() dropped since the job last ran.
  void restore_pending(std::int64_t ns, std::int64_t at, Breakdown& b);
  // Treats the progress since the last checkpoint as kept (end of horizon).
  void keep(Breakdown& b);

  // Wall time the running job needs from now to gain `progress_ns` more progress at the
  // current rate and plan (warm-up, pause and checkpoint blocks included), the inverse of
  // run(). Rounded up, so run() over it gains at least that much (within a few ns for
  // progress beyond 2^53 ns); 0 when progress_ns <= 0.
  std::int64_t wall_to_gain(std::int64_t progress_ns) const;

  std::int64_t committed_ns() const { return committed_; }   // training at the newest checkpoint
  std::int64_t pending_ns() const { return seg_progress_; }  // training since then
  std::int64_t checkpoints() const { return checkpoints_; }
  const std::vector<ProgressSegment>& segments() const { return segments_; }

 private:
  void record(std::int64_t start, std::int64_t end, double rate);
  void split_slow(std::int64_t slow, Breakdown& b) const;
  bool run_stops(std::int64_t& at, std::int64_t& dt, Breakdown& b);
  void trim_segments(std::int64_t progress_ns);
  std::int64_t interval_ = 0, blocking_ = 0;
  double rate_ = 1;
  std::int64_t committed_ = 0;
  std::int64_t seg_progress_ = 0;  // training since the last complete checkpoint
  std::int64_t in_ckpt_ = 0;       // time spent in the current checkpoint block
  std::int64_t checkpoints_ = 0;
  std::int64_t warmup_left_ = 0;
  std::int64_t pause_left_ = 0;
  std::int64_t quorum_left_ = 0;
  double replica_ = 1;
  bool record_ = false;
  std::vector<ProgressSegment> segments_;
};

}  // namespace faultline::sim
