// The virtual fleet (`faultline-fleet`): thousands of unchanged agents in one process, each
// with its own TCP connection to the real controller, its own machine name and the real
// handshake, whose ranks are fakes (FakeRanks: no process; step reports at the job's step
// time over the agent's own report socket) and into which a fault storm is injected.
// docs/running-live.md, "At the size of your cluster", says how live-scale.sh runs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "realexec/live_config.h"

namespace faultline::live {

struct FleetOptions {
  std::string config_file;
  std::string token;
  int first = 0;    // index into machines then standby
  int count = 0;    // 0: every machine from `first` on
  int threads = 1;  // reactors, each with its share of the agents
  double duration_s = 60;
  std::uint64_t storm_seed = 0;  // 0: no storm
  double storm_start_s = 20;     // first fault, after the job is up
  double storm_every_s = 6;      // one fault this often
  double quiet_at_s = -1;        // no fault within [quiet_at_s - every, quiet_at_s + quiet_for_s]
  double quiet_for_s = 20;
  double partition_s = 8;  // how long a partitioned rack cannot redial
  int rack = 8;            // agents per rack (partitions take one rack)
  double slow_s = 2;       // how long a slow host stalls its agents
  bool verbose = false;    // the agents' log lines on stderr
  std::string out_file;    // injections and decisions, one JSON line each ("" = none)
  // The paced storm (quota > 0; live-storm.sh): `quota` faults of every kind (crash, hang,
  // nan, machine_loss, partition, slow), each with an id, one every gap_min_s..gap_max_s
  // per reactor while a target exists; with probability `overlap` a second fault follows
  // within half a second, while the first is handled. A hang without one holds the
  // storm for up to hang_hold_s, so that its detection is measured; a lost machine comes
  // back (its agent restarts) after revive_s; the fleet ends settle_s after the last fault.
  int quota = 0;
  double overlap = 0.3;
  double gap_min_s = 1;
  double gap_max_s = 2.5;
  double hang_hold_s = 15;
  double revive_s = 12;
  double settle_s = 20;
};

// Runs the fleet; prints its summary as one JSON line on stdout. Returns the exit code
// (2 with a one-line error on stderr for bad options or config).
int run_fleet(const FleetOptions& options);
// `faultline-live fleet CONFIG [options]`.
int fleet_main(const std::vector<std::string>& args);

}  // namespace faultline::live
