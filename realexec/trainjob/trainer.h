#pragma once

// The reference training job of live mode (faultline-trainjob): data-parallel training of the
// small MLP of model.h across processes that exchange gradients over TCP (collective.h),
// checkpointing locally with a copy on the next rank (checkpoint.h), resuming bit-exactly,
// reporting to its agent (report.h) and misbehaving on request (faults.h).
//
// Modes (options.h):
//   train            the job proper: rendezvous, restore, train, report, checkpoint.
//   --probe bitwise  one process, no network: K steps from the seed's initial state, then one
//                    JSON line with the hash of the final state. Persistent faults of the
//                    machine (sdc, slow) apply, so a machine that corrupts data fails the
//                    comparison with a healthy one.
//   --probe allgather  as a group: ring all-gathers of a known pattern, verified bit by bit,
//                    one JSON line per rank with the measured bandwidth.
//   --replay         as a group: restore the newest complete checkpoint exactly as training
//                    would (read-only), run K steps honouring persistent faults, rank 0 prints
//                    the hash. The hash does not depend on the world size.
// Probes and replays never consume one-shot fault directives: those belong to the training job.

#include <chrono>
#include <cstdint>
#include <span>
#include <utility>

#include "realexec/trainjob/options.h"

namespace faultline::live::trainjob {

// Runs the job described by `options`; returns the process exit code (0 done, 1 fatal or a
// failed probe). Fatal errors are reported (fatal report + signature line on stderr) first.
int run_job(const Options& options);

// faultline-trainjob's main: parses argv and the environment, then run_job.
int trainjob_main(int argc, char** argv);

// The contiguous block [first, last) of micro-batches that `rank` of `world_size` computes.
std::pair<int, int> microbatch_range(int rank, int world_size, int microbatches);

// The "sdc" fault: flips the top exponent bit (a value below 2 grows past 1e300) of one
// element of `gradient`, chosen from `step`; zero and subnormal elements are skipped so the change
// always matters.
void corrupt_gradient(std::span<double> gradient, std::int64_t step);

// Sleeps until `until`. Out of line and named so a rank stopped while padding its step to
// --step-ms shows it in its stack (outside any collective).
void pace_step(std::chrono::steady_clock::time_point until);

// Sleeps `seconds` inside the compute phase: the "slow" fault.
void slow_compute(double seconds);

}  // namespace faultline::live::trainjob
