// The byterobust stack when a second fault lands during an open incident: the three
// decision logs of issue 50, each scripted against FakeWorld at the instants the simulator
// gave them, and the overlap contract of docs/policies-and-modules.md ("When faults
// overlap") phase by phase. storm_test.cc drives thousands of random interleavings; these
// pin the ones that broke.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "policies/builtin.h"
#include "tests/support/fake_world.h"

namespace faultline {
namespace {

using testing::FakeWorld;

using testing::spec16;

constexpr const char* kCuda = "RuntimeError: CUDA error: an illegal memory access";

// The stack over FakeWorld, with the backend's part played by hand where it matters here:
// an eviction empties the machine's slot, and an acquisition fills the slots it was asked
// for with fresh machines when the test says it is ready.
struct Overlap {
  FakeWorld w{spec16()};
  std::unique_ptr<Policy> p;
  std::size_t applied = 0;  // actions whose evictions are applied to the view

  explicit Overlap(std::map<std::string, double> over = {}) {
    Registry r = policies::builtin_registry();
    Params params;
    EXPECT_FALSE(Params::resolve(r.find("byterobust")->params, over, &params));
    p = r.make("byterobust", params);
    p->start(w);
    started(0);
    w.actions.clear();
  }
  void at(double s) { w.advance_to(Instant{Duration::seconds(s).ns}, *p); }
  void on(const Event& e) {
    p->on_event(e, w);
    evictions();
  }
  // Applies the evictions taken since the last call, as a backend does at once.
  void evictions() {
    for (; applied < w.actions.size(); ++applied)
      if (auto* e = std::get_if<EvictMachines>(&w.actions[applied]))
        for (MachineId m : e->machines)
          if (w.cluster().slot_of(m) >= 0) w.mutable_cluster().vacate(w.cluster().slot_of(m));
  }
  void started(std::int64_t step) {
    p->on_event(JobStarted{w.last_action_id(), step}, w);
    p->on_event(StepSample{step, 1.0, std::nullopt, std::nullopt, false, true}, w);
  }
  void nan(std::int64_t step) { on(StepSample{step, 1.0, std::nullopt, std::nullopt, true, true}); }
  // The id of the last action of type T.
  template <class T>
  ActionId last() const {
    for (std::size_t i = w.actions.size(); i-- > 0;)
      if (std::holds_alternative<T>(w.actions[i])) return static_cast<ActionId>(i + 1) + base();
    return 0;
  }
  // FakeWorld numbers actions from 1 across the whole run; `actions` was cleared after the
  // first start, so index i is action id base() + i + 1.
  ActionId base() const { return w.last_action_id() - static_cast<ActionId>(w.actions.size()); }
  template <class T>
  const T& last_of() const {
    for (std::size_t i = w.actions.size(); i-- > 0;)
      if (auto* x = std::get_if<T>(&w.actions[i])) return *x;
    throw std::logic_error("no such action");
  }
  // The acquisition `id` is ready: fresh machines in the slots it asked for.
  void ready(ActionId id) {
    const auto& q = std::get<AcquireMachines>(w.actions[id - base() - 1]);
    MachineSet placed;
    for (SlotId s = 0; s < w.cluster().slots(); ++s) {
      const bool asked =
          q.slots.empty() ? true : std::find(q.slots.begin(), q.slots.end(), s) != q.slots.end();
      if (!asked || w.cluster().machine_in(s) != kNoMachine) continue;
      const MachineId m = w.mutable_cluster().add_machine();
      w.mutable_cluster().place(m, s);
      placed.push_back(m);
    }
    on(MachinesReady{id, placed});
  }
  bool evicted(MachineId m) const {
    for (const auto& e : w.all<EvictMachines>())
      if (std::find(e.machines.begin(), e.machines.end(), m) != e.machines.end()) return true;
    return false;
  }
  std::size_t starts() const { return w.all<StartJob>().size() + w.all<RollBack>().size(); }
  bool noted(const std::string& words) const {
    for (const std::string& n : w.notes)
      if (n.find(words) != std::string::npos) return true;
    for (const auto& n : w.all<Note>())
      if (n.text.find(words) != std::string::npos) return true;
    return false;
  }
};

// Issue 50, log 1 (16k GPUs, replica 19): a NaN's bit-wise test is under way when a GPU
// alert lands elsewhere. The stack restarted as soon as the alert's replacement was ready,
// the NaN came back, replay began, and the bit-wise result naming the culprit reached the
// localizer ("replay answered with something else"): discarded, a fruitless round, a
// reattempt, and the culprit evicted 2.1 h later. The restart now waits for the test, and
// its answer evicts the culprit.
TEST(ByteRobustOverlap, ATestThatNamedTheCulpritIsUsedWhenAnAlertLandsDuringTheNanDiagnosis) {
  Overlap h;
  h.at(153889);
  h.nan(5000);
  const ActionId bitwise = h.last<RunProbe>();
  ASSERT_NE(bitwise, 0u);
  ASSERT_EQ(h.last_of<RunProbe>().test, ProbeKind::kBitwise);
  h.at(153942);
  h.on(InspectionAlert{9, "gpu", "Xid 79"});
  EXPECT_TRUE(h.evicted(9));
  const ActionId acquire = h.last<AcquireMachines>();
  ASSERT_NE(acquire, 0u);
  h.at(153952);
  h.ready(acquire);
  EXPECT_EQ(h.starts(), 0u) << "restarted with the NaN's bit-wise test still under way";
  if (h.starts() > 0) {  // as the old stack did: the NaN is back, replay begins
    h.started(5000);
    h.at(154018);
    h.nan(5001);
  }
  h.at(154189);
  h.on(ProbeResult{bitwise, ProbeKind::kBitwise, {12}, false});
  EXPECT_TRUE(h.evicted(12)) << "the bit-wise test named machine 12";
  EXPECT_FALSE(h.noted("answered with something else"));
}

// Issue 50, log 2: an alert on another host while the stack waits for a replacement. The
// stack returned from the alert and restarted on the host it was told is broken.
TEST(ByteRobustOverlap, AnAlertWhileMachinesAreAcquiredEvictsAndTheRestartWaitsForBoth) {
  Overlap h;
  h.at(4000);
  h.on(ProcessExit{7, 1, kCuda, 4000});
  h.on(ProbeResult{h.last<RunProbe>(), ProbeKind::kGpuDiag, {7}, false});
  ASSERT_TRUE(h.evicted(7));
  const ActionId first = h.last<AcquireMachines>();
  h.at(4010);
  h.on(InspectionAlert{3, "gpu", "Xid 79"});
  EXPECT_TRUE(h.evicted(3)) << "the alert was ignored while machines were being acquired";
  const ActionId second = h.last<AcquireMachines>();
  EXPECT_NE(second, first);
  h.at(4050);
  h.ready(first);
  EXPECT_EQ(h.starts(), 0u) << "restarted with slot 3 empty (or machine 3 in it)";
  h.at(4060);
  if (second != first) h.ready(second);
  EXPECT_EQ(h.starts(), 1u);
  EXPECT_TRUE(h.w.all<AcquireMachines>().back().mode != AcquireMode::kRequeue);
}

// Issue 50, log 3 (observe_after_s 0): the crash's stop-time tests are under way when the
// alert on the machine the crash named evicts it. The first test had raced the eviction and
// passed; the tests that followed ran on the machine that had left, passed, and the stack
// reattempted on the empty slot before its replacement was ready: the start was refused and
// it fell back to requeueing the whole job. Now no test runs on a machine that left, and
// the restart waits for the replacement.
TEST(ByteRobustOverlap, NoTestRunsOnAnEvictedHostAndTheRestartWaitsForItsReplacement) {
  Overlap h;
  h.at(4000);
  h.on(ProcessExit{7, 1, kCuda, 4000});
  const ActionId diag = h.last<RunProbe>();
  h.on(InspectionAlert{7, "gpu", "Xid 79"});
  ASSERT_TRUE(h.evicted(7));
  const ActionId acquire = h.last<AcquireMachines>();
  h.at(4100);
  h.on(ProbeResult{diag, ProbeKind::kGpuDiag, {}, false});
  // Whatever tests remain pass.
  ActionId answered = diag;
  for (int i = 0; i < 3; ++i) {
    const ActionId next = h.last<RunProbe>();
    if (next == answered) break;
    answered = next;
    h.on(ProbeResult{next, h.last_of<RunProbe>().test, {}, false});
  }
  const std::vector<RunProbe> probes = h.w.all<RunProbe>();
  for (std::size_t i = 1; i < probes.size(); ++i)  // the first ran before the eviction
    EXPECT_EQ(std::count(probes[i].machines.begin(), probes[i].machines.end(), 7), 0)
        << "a test on machine 7 after it left the job";
  EXPECT_EQ(h.starts(), 0u) << "restarted with slot 7 empty";
  h.at(4200);
  h.ready(acquire);
  EXPECT_EQ(h.starts(), 1u);
  for (const auto& q : h.w.all<AcquireMachines>()) EXPECT_NE(q.mode, AcquireMode::kRequeue);
}

// The stale result itself: a test that failed the machine the alert evicted meanwhile. The
// machine has gone; the note says the result was dropped, nothing acts on it, and the
// diagnosis concludes (its culprit left) with a restart once the replacement is ready.
TEST(ByteRobustOverlap, AResultAboutAnEvictedHostIsDroppedWithANote) {
  Overlap h;
  h.at(4000);
  h.on(ProcessExit{7, 1, kCuda, 4000});
  const ActionId diag = h.last<RunProbe>();
  h.on(InspectionAlert{7, "gpu", "Xid 79"});
  const ActionId acquire = h.last<AcquireMachines>();
  const std::size_t evictions = h.w.all<EvictMachines>().size();
  h.at(4100);
  h.on(ProbeResult{diag, ProbeKind::kGpuDiag, {7}, false});
  EXPECT_TRUE(h.noted("left the job already, dropped: [7]"));
  EXPECT_EQ(h.w.all<EvictMachines>().size(), evictions);
  EXPECT_EQ(h.w.all<RunProbe>().size(), 1u) << "the failed test found the culprit";
  EXPECT_EQ(h.starts(), 0u);
  h.ready(acquire);
  EXPECT_EQ(h.starts(), 1u);
}

// Found at 16k GPUs (Llama-3-style job): a job-wide fault while machines were acquired
// failed the restart, and the simulator dropped every acquisition (StartFailed naming the
// acquisition). The stack ignored an event that named no start of its own and waited for
// machines that never came: the job stayed down for days, evictions piling up.
TEST(ByteRobustOverlap, AJobWideFaultThatDropsTheAcquisitionsRefillsTheSlotsAndRestarts) {
  Overlap h;
  h.at(4000);
  h.on(InspectionAlert{5, "gpu", "Xid 79"});
  const ActionId acquire = h.last<AcquireMachines>();
  ASSERT_NE(acquire, 0u);
  h.at(4020);
  h.on(StartFailed{acquire, kNoMachine, "OSError: [Errno 5] Input/output error", -1});
  const ActionId again = h.last<AcquireMachines>();
  ASSERT_NE(again, acquire) << "slot 5 is empty and nothing is on its way to fill it";
  EXPECT_EQ(h.last_of<AcquireMachines>().slots, std::vector<SlotId>{5});
  h.ready(again);
  EXPECT_EQ(h.starts(), 1u);
}

// Found by the storm: the exit of the run a hot update stopped came while the update's
// start was under way. The stack diagnosed it and ran a replay while the job started, so
// the job trained with a diagnosis open. A failure during a start comes as StartFailed: an
// exit then is the echo of the run before.
TEST(ByteRobustOverlap, AnExitWhileARestartIsUnderWayIsTheEchoOfTheRunBefore) {
  Overlap h;
  h.at(4000);
  h.on(CodeUpdateRequested{"v2", true});
  ASSERT_EQ(h.w.all<HotUpdate>().size(), 1u);
  const std::size_t actions = h.w.actions.size();
  h.on(ProcessExit{kNoMachine, 1, "OSError: [Errno 5] Input/output error", 10});
  EXPECT_EQ(h.w.actions.size(), actions) << describe(h.w.actions.back());
}

// With observe_after_s 0 the crash and the alert on the machine its log named come
// together: the alert is the crash's culprit, seen with high confidence. The stack waited
// for the tests under way (two minutes of GPU diagnostics per crash at 100k GPUs, 19 h of
// diagnosis per replica-month more) although their answer could no longer change anything.
// An alert on a machine the tests do not cover joins the round instead (above).
TEST(ByteRobustOverlap, AnAlertOnASuspectOfTheCrashUnderDiagnosisEndsItsTests) {
  Overlap h;
  h.at(4000);
  h.on(ProcessExit{7, 1, kCuda, 4000});
  const ActionId diag = h.last<RunProbe>();
  h.on(InspectionAlert{7, "gpu", "Xid 79"});
  h.ready(h.last<AcquireMachines>());
  EXPECT_EQ(h.starts(), 1u) << "the restart waited for tests the alert had answered";
  const std::size_t actions = h.w.actions.size();
  h.on(ProbeResult{diag, ProbeKind::kGpuDiag, {7}, false});  // stale: dropped
  EXPECT_EQ(h.w.actions.size(), actions);
}

// A second fault in each phase of an open incident, one at a time: the alert always
// evicts its machine, and the job is never restarted on it nor on an empty slot.
TEST(ByteRobustOverlap, AnAlertInEveryPhaseOfAnIncidentIsActedOnAndNeverStartedOn) {
  struct Phase {
    const char* name;
    std::function<void(Overlap&)> reach;
  };
  const std::vector<Phase> phases = {
      {"stop-time tests",
       [](Overlap& h) {
         h.on(ProcessExit{7, 1, kCuda, 10});
       }},
      {"bit-wise test", [](Overlap& h) { h.nan(10); }},
      {"replay",
       [](Overlap& h) {
         h.nan(10);
         h.on(ProbeResult{h.last<RunProbe>(), ProbeKind::kBitwise, {}, false});
       }},
      {"acquisition",
       [](Overlap& h) {
         h.on(ProcessExit{7, 1, kCuda, 10});
         h.on(ProbeResult{h.last<RunProbe>(), ProbeKind::kGpuDiag, {7}, false});
       }},
      {"restart",
       [](Overlap& h) {
         h.on(ProcessExit{7, 1, kCuda, 10});
         h.on(ProbeResult{h.last<RunProbe>(), ProbeKind::kGpuDiag, {7}, false});
         h.ready(h.last<AcquireMachines>());
       }},
      {"warm-up", [](Overlap& h) {
         h.on(ProcessExit{7, 1, kCuda, 10});
         h.on(ProbeResult{h.last<RunProbe>(), ProbeKind::kGpuDiag, {7}, false});
         h.ready(h.last<AcquireMachines>());
         h.started(10);
       }}};
  for (const Phase& phase : phases) {
    Overlap h;
    h.at(4000);
    phase.reach(h);
    h.at(4030);
    const std::size_t before = h.starts();
    h.on(InspectionAlert{2, "gpu", "Xid 79"});
    EXPECT_TRUE(h.evicted(2)) << phase.name;
    // Play the backend until the job restarts: every test passes (machines 7 and 2 have
    // left), every acquisition is ready, in the order they were asked for.
    std::set<ActionId> answered;
    for (int step = 0; step < 40 && h.starts() == before; ++step) {
      ActionId next = 0;
      for (std::size_t i = 0; i < h.w.actions.size() && next == 0; ++i) {
        const ActionId id = h.base() + static_cast<ActionId>(i) + 1;
        const Action& a = h.w.actions[i];
        const bool answerable = std::holds_alternative<RunProbe>(a) ||
                                std::holds_alternative<RunReplay>(a) ||
                                std::holds_alternative<AcquireMachines>(a);
        if (answerable && !answered.count(id)) next = id;
      }
      if (next == 0) break;
      answered.insert(next);
      const Action& a = h.w.actions[next - h.base() - 1];
      if (auto* p = std::get_if<RunProbe>(&a))
        h.on(ProbeResult{next, p->test, {}, false});
      else if (auto* r = std::get_if<RunReplay>(&a))
        h.on(ReplayResult{next, std::vector<bool>(r->groups.size(), false)});
      else
        h.ready(next);
    }
    for (SlotId s = 0; s < 16; ++s)
      EXPECT_NE(h.w.cluster().machine_in(s), kNoMachine) << phase.name << ": slot " << s;
    EXPECT_LT(h.w.cluster().slot_of(2), 0) << phase.name;
    EXPECT_GT(h.starts(), before) << phase.name << ": the job never restarted";
  }
}

}  // namespace
}  // namespace faultline
