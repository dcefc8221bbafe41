// The byterobust stack's test fixtures, shared by its test files (tests/policies/byterobust_*):
// a 16-machine FakeWorld, observations as the simulator sends them, and the stack built from
// the registry with parameters overridden by name.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "policies/stacks/byterobust/ladder.h"
#include "policies/stacks/byterobust/stop_time.h"
#include "tests/support/fake_world.h"

namespace faultline::byterobust_test {

using testing::FakeWorld;

using testing::spec16;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Observations as the simulator sends them (steady samples), so the stack's detection
// module draws the conclusions: tests say what the job did, not what was concluded.
inline void sample(FakeWorld& w, Policy& p, std::int64_t step, double step_time, bool nan = false) {
  p.on_event(StepSample{step, step_time, std::nullopt, std::nullopt, nan, true}, w);
}
// The job started from `step` and steps take 1 s (the healthy baseline).
inline void started(FakeWorld& w, Policy& p, std::int64_t step) {
  p.on_event(JobStarted{w.last_action_id(), step}, w);
  sample(w, p, step, 1.0);
}
// The step counter stops at `step` one stall window (600 s) before `t`; at `t` the
// detector reports the stall.
inline void stalled_at(FakeWorld& w, Policy& p, double t, std::int64_t step) {
  w.advance_to(Instant{Duration::seconds(t - 600).ns}, p);
  sample(w, p, step, kInf);
  w.advance_to(Instant{Duration::seconds(t).ns}, p);
}
// Steps slow down to 1.3 s; slow_for (300 s) later the detector reports it.
inline void slowed(FakeWorld& w, Policy& p) {
  sample(w, p, 0, 1.3);
  w.advance_to(w.now() + Duration::seconds(300), p);
}

struct Harness {
  FakeWorld w{spec16()};
  std::unique_ptr<Policy> p;
  explicit Harness(std::map<std::string, double> over = {}) {
    Registry r = policies::builtin_registry();
    Params params;
    EXPECT_FALSE(Params::resolve(r.find("byterobust")->params, over, &params));
    p = r.make("byterobust", params);
    p->start(w);
    byterobust_test::started(w, *p, 0);
    w.actions.clear();
  }
  void at(double s) { w.advance_to(Instant{Duration::seconds(s).ns}, *p); }
  void started(std::int64_t step) { byterobust_test::started(w, *p, step); }
  void stalled_at(double t, std::int64_t step) { byterobust_test::stalled_at(w, *p, t, step); }
  void nan() { sample(w, *p, 0, 1.0, true); }
  void nan_at(std::int64_t step) { sample(w, *p, step, 1.0, true); }
  void slowed() { byterobust_test::slowed(w, *p); }
  // The last CaptureStacks read these stacks, one a machine.
  void captured(const std::vector<std::string>& stacks) {
    p->on_event(StacksCaptured{w.last_action_id(), StackSignatures(stacks)}, w);
  }
  // Every machine waits in the same all_reduce: a hang in the job's own code, no outlier.
  void captured_alike() { captured(std::vector<std::string>(16, "all_reduce")); }
  // The machines the last action asked for are ready, none of them new.
  void ready() { p->on_event(MachinesReady{w.last_action_id(), {}}, w); }
};

// The harness for the ladder's tests: the same stack, started the same way.
struct Ladder : Harness {
  using Harness::Harness;
  using Harness::started;
  void started() {
    byterobust_test::started(w, *p, 0);
    w.actions.clear();
  }
  // Answers every stop-time test of the plan with "passed".
  void tests_pass() {
    for (int i = 0;
         i < 5 && !w.all<RunProbe>().empty() && std::holds_alternative<RunProbe>(w.actions.back());
         ++i)
      p->on_event(ProbeResult{w.last_action_id(), w.all<RunProbe>().back().test, {}, false}, w);
  }
  int max_fruitless() const {
    int m = 0;
    for (const auto& n : w.all<Note>()) m = std::max(m, n.fruitless_round);
    return m;
  }
};

inline const char* kCuda = "RuntimeError: CUDA error: an illegal memory access";

}  // namespace faultline::byterobust_test
