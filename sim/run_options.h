// RunOptions: what a replica's run records beyond its figures (SimWorld, sim/runner.h).
#pragma once

namespace faultline::sim {

struct RunOptions {
  bool timeline = false;
  double timeline_step_s = 600;
  bool decisions = false;
  bool incidents = false;
  // Machine-readable lines in ReplicaResult::decisions for `sim replay`'s comparison with
  // the live run (sim/replay_decisions.h): "R <ns> A <action JSON>" per action and
  // "R <ns> J <machine> <slot>" per machine joining a slot. The replay takes them out
  // before anything is written; nothing else changes.
  bool action_records = false;
  // Standby machines already parked when the run begins (`sim replay`: a live run's
  // configured standbys are connected and parked before its job starts): the pool's first
  // fill, at time zero, takes up to this many at once instead of from the scheduler.
  int parked_standbys = 0;
};

}  // namespace faultline::sim
