// Runs the replicas of one scenario: the platform is built once in this process,
// replica 0 runs here, then every other replica runs in a forked child (SimGrid allows
// one engine per process) that inherits the platform and the memoised transfer
// durations, at most `jobs` at a time. Each replica draws only from streams seeded by
// (scenario seed, replica index), and every child forks from the same parent state,
// so results are bit-identical whatever `jobs` is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "policies/api/registry.h"
#include "scenarios/scenario.h"
#include "sim/metrics.h"
#include "sim/sim_world.h"

namespace faultline::sim {

struct RunStats {
  double platform_build_s = 0;
  double wall_s = 0;
};

// Thrown when a replica process dies or returns garbage.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs replicas in this process, one after another, on a platform built once. For
// benchmarks and tools that need in-process results; run_replicas uses it for replica 0.
class ReplicaRunner {
 public:
  ReplicaRunner(const scenarios::Scenario& sc, const Registry& registry);
  ~ReplicaRunner();
  ReplicaResult run(std::uint64_t replica, const RunOptions& opt);
  double platform_build_s() const;
  // Whether the SimGrid side is as it was after `mark()`: no transfer ran in SimGrid since
  // (every batch was timed by the closed form or the memo), so the clock has not moved
  // and another replica run here starts exactly as in a fresh fork.
  void mark();
  bool unchanged_since_mark() const;

 private:
  const scenarios::Scenario& sc_;
  const Registry& registry_;
  std::unique_ptr<ClusterView> view_;
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<FlowNet> flows_;
  double marked_clock_ = -1;
  std::int64_t marked_real_ = -1;
};

// `on_done(done, total)` is called in the parent after each replica.
std::vector<ReplicaResult> run_replicas(const scenarios::Scenario& sc, int replicas, int jobs,
                                        const RunOptions& opt, const Registry& registry,
                                        RunStats* stats,
                                        const std::function<void(int, int)>& on_done = {},
                                        CategoryTotals* fold = nullptr);

// Runs only the replicas numbered in `which` (in that order), each exactly as it runs among
// all replicas: replica 0 first in this process (every other replica is a fork of the state
// it leaves), then the others in forks. Result i is replica which[i]. With `fold`, each
// result's categories and resolved_by are added to it in that order and dropped from the
// result (pass it to aggregate()), so a long run does not keep them for every replica.
std::vector<ReplicaResult> run_replica_list(const scenarios::Scenario& sc,
                                            const std::vector<std::uint64_t>& which, int jobs,
                                            const RunOptions& opt, const Registry& registry,
                                            RunStats* stats,
                                            const std::function<void(int, int)>& on_done = {},
                                            CategoryTotals* fold = nullptr);

// Runs run_replicas in one forked child and returns its results, so a process can
// simulate several scenarios (SimGrid allows one engine per process). Throws RunError
// when the child fails. `on_done(done)` is called in this process as replicas finish there.
std::vector<ReplicaResult> run_replicas_in_child(
    const scenarios::Scenario& sc, int jobs, const RunOptions& opt, const Registry& registry,
    const std::function<void(long long)>& on_done = {});

}  // namespace faultline::sim
