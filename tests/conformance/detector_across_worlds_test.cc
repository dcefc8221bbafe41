// One detector across both Worlds: fed the sample stream of a simulated run and the one live
// mode delivers for the same step timeline, it reaches the same conclusions.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policies/detection/detectors.h"
#include "tests/conformance/conformance_support.h"

namespace faultline {
namespace {

using namespace conformance;

// ---------------------------------------------------------------- one detector, two Worlds

// The samples a World delivered, and the findings a fresh realtime detector draws from
// them, with its checks run when it asks (as the stack's timer does).
struct Finding {
  double at_s;
  std::string what;
  std::int64_t step = -1;
};
std::vector<Finding> findings_of(const std::vector<std::pair<Instant, StepSample>>& stream,
                                 Instant end) {
  const Registry reg = registry();
  Params p;
  Params::resolve(reg.find("byterobust")->params, {{"stall_window_s", 120}, {"slow_for_s", 60}},
                  &p);
  auto d = policies::modules().make_detector("realtime", p);
  std::vector<Finding> out;
  auto note = [&](const std::optional<policies::Finding>& f, Instant t) {
    if (!f) return;
    Finding x{t.to_seconds(), policies::describe(*f)};
    if (auto* st = std::get_if<policies::ProgressStalled>(&*f)) x.step = st->last_step;
    x.what = x.what.substr(
        0, x.what.find(' ', x.what.find(' ') + 1));  // "progress stalled", "step time", ...
    out.push_back(x);
  };
  d->restart(Instant{}, 0);
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    const Instant next = i < stream.size() ? stream[i].first : end;
    while (d->next_check() <= next) {
      const Instant t = d->next_check();
      note(d->check(t), t);
    }
    if (i < stream.size()) note(d->observe(stream[i].second, stream[i].first), stream[i].first);
  }
  return out;
}

TEST(DetectorAcrossWorlds, TheSameSampleTimelineGivesTheSameFindingsInSimulationAndLive) {
  // The simulated run (the scenario's trace: slower steps at 600 s, a hang at 890 s):
  // the samples SimWorld delivers to a policy that only watches.
  const double slow_at = kSlowAt, hang_at = kHangAt, end_s = 1500;
  auto at = [](double s) { return Instant{Duration::seconds(s).ns}; };
  Script watcher;
  watcher.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  Sim::get().run(watcher);
  std::vector<std::pair<Instant, StepSample>> sim;
  Instant sim_t0 = Instant::max();
  for (const auto& x : g_seen) {
    if (std::holds_alternative<JobStarted>(x.event) && sim_t0 == Instant::max()) sim_t0 = x.at;
    if (auto* smp = std::get_if<StepSample>(&x.event))
      sim.push_back({Instant{(x.at - sim_t0).ns}, *smp});
  }
  ASSERT_EQ(sim.size(), 3u) << "a sample at the start, at the slowdown and at the hang";
  EXPECT_EQ(sim[1].second.step_time_s, 3.0);
  EXPECT_TRUE(std::isinf(sim[2].second.step_time_s));
  const auto from_sim = findings_of(sim, at(end_s));

  // The live run of the same timeline: rank 0 reports every step, LiveWorld samples them
  // (WatchSteps every step) for the policy. The script records what it is given.
  const Registry reg = registry();
  Live live(reg);
  Script s;
  s.start = [](World& w) {
    w.act(WatchSteps{Duration::zero(), "samples"});
    w.act(StartJob{"start"});
  };
  live.run(s, 0.5);
  ASSERT_EQ(seen<JobStarted>().size(), 1u);
  const Instant t0 = live.reactor.now();
  const std::int64_t gen = live.journal.state().gen;
  double t = 0;
  for (std::int64_t step = 1;; ++step) {
    const double dt = t < slow_at ? 2.0 : 3.0;
    if (t + dt > hang_at) break;  // the step under way when the counter stops never ends
    t += dt;
    live.reactor.advance_to(t0 + Duration::seconds(t));
    live.world->on_agent_message(0, {{"type", "report"},
                                     {"gen", gen},
                                     {"report",
                                      {{"type", "step"},
                                       {"rank", 0},
                                       {"step", step},
                                       {"step_time_s", dt},
                                       {"loss", 1.0},
                                       {"grad_norm", 1.0}}}});
  }
  live.reactor.advance_to(t0 + Duration::seconds(end_s));
  std::vector<std::pair<Instant, StepSample>> from_live_stream;
  for (const auto& x : g_seen)
    if (auto* smp = std::get_if<StepSample>(&x.event))
      from_live_stream.push_back({Instant{(x.at - t0).ns}, *smp});
  ASSERT_EQ(from_live_stream.size(), 396u) << "one sample per step report";
  const auto from_live = findings_of(from_live_stream, at(end_s));

  // Slow steps reported slow_for after they began, again every slow_for until the hang;
  // then the stall, one window after the last step.
  ASSERT_FALSE(from_sim.empty());
  ASSERT_EQ(from_sim.size(), from_live.size())
      << "sim " << from_sim.size() << ", live " << from_live.size();
  for (std::size_t i = 0; i < from_sim.size(); ++i) {
    SCOPED_TRACE("finding " + std::to_string(i) + ": " + from_sim[i].what);
    EXPECT_EQ(from_sim[i].what, from_live[i].what);
    EXPECT_NEAR(from_sim[i].at_s, from_live[i].at_s, 3.0) << "within one step";
    if (from_sim[i].step >= 0) {
      EXPECT_NEAR(from_sim[i].step, from_live[i].step, 1);
    }
  }
  EXPECT_EQ(from_sim.back().what, "progress stalled");
}

}  // namespace
}  // namespace faultline
