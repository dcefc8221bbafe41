// Stop-time diagnosis (ByteRobust §4.2): which tests a crash's log signature and exit
// code call for, and whether it points at the job's own code.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policies/api/action.h"
#include "policies/api/cluster_view.h"

namespace faultline::policies {

enum class CrashKind { kMachine, kNetwork, kNumeric, kUserCode, kEnvironment, kUnknown };

CrashKind classify_crash(const std::string& signature, int exit_code);
// Tests in the order the hierarchy runs them; empty when no machine test applies.
std::vector<ProbeKind> test_plan(CrashKind kind);

// classify_crash's answers by signature (its exit code matters only as zero or not), for
// a stack that meets a handful of signatures thousands of times in a run.
class CrashClassifier {
 public:
  CrashKind operator()(const std::string& signature, int exit_code);

 private:
  std::array<std::unordered_map<std::string, CrashKind>, 2> memo_;
};

// The stop-time tests of one failure (ByteRobust §4.2), as a conversation: the tests a
// crash calls for (test_plan), one after another on the same suspects until one fails
// machines or all have passed; or, after a NaN, the bit-wise alignment test on every
// machine, which hands over to replay when it passes. The stack runs each test and acts
// on its result (a failed test evicts the machines it failed).
class StopTimeTests {
 public:
  explicit StopTimeTests(Duration deadline) : deadline_(deadline) {}
  // The tests for a crash of `kind`, on `suspects`.
  void begin(CrashKind kind, MachineSet suspects);
  // The bit-wise alignment test on every machine, after a NaN.
  RunProbe begin_nan(MachineSet everyone);
  // The next test, for `why`; nullopt when none is left (every test passed) or no suspect
  // is.
  std::optional<RunProbe> next(const std::string& why);
  // `left` have left the job (a second fault evicted them): no test runs on them again.
  void forget(const MachineSet& left);
  // The same for every suspect that is not in the job of `view` any more (a requeue
  // drained it), at the cost of a look at each.
  void forget_gone(const ClusterView& view);
  // Ends a NaN's alignment test, if one was under way: true when it was (when it passed,
  // replay comes next).
  bool end_nan() { return std::exchange(nan_, false); }
  // Whatever was under way is over (a test failed machines, or the stack moved on).
  void clear() {
    plan_.clear();
    nan_ = false;
  }

 private:
  Duration deadline_;
  std::vector<ProbeKind> plan_;  // the tests left, in order
  MachineSet suspects_;
  bool nan_ = false;  // the test under way is a NaN's alignment test
};

// Whom the stop-time tests of a crash that named the machine in `slot` cover: that machine
// and its pipeline neighbours (a log may name the rank that saw its broken peer fail
// first), or the machine in the next slot when it has no pipeline group.
MachineSet named_and_neighbours(const ClusterView& view, SlotId slot);

}  // namespace faultline::policies
