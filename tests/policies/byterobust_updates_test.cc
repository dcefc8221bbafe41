// The byterobust stack's code updates against FakeWorld: urgent ones hot, non-urgent ones held
// for the next recovery or the end of their deferral window.
#include <gtest/gtest.h>

#include <string>

#include "tests/policies/byterobust_fixtures.h"

namespace faultline {
namespace {

using namespace byterobust_test;

TEST(ByteRobust, UrgentCodeUpdateIsAHotUpdate) {
  Harness h;
  h.p->on_event(CodeUpdateRequested{"v2", true}, h.w);
  auto hu = h.w.all<HotUpdate>();
  ASSERT_EQ(hu.size(), 1u);
  EXPECT_EQ(hu[0].version, "v2");
  EXPECT_TRUE(h.w.all<AcquireMachines>().empty());
}

// A non-urgent code update rides the next restart (ByteRobust §5: merged into the next
// recovery), whether it arrives while the job runs (held for the deferral window) or while
// the stack is recovering (merged into the restart under way). It used to be dropped: the
// next JobStarted forgot it, and the window's timer then found nothing to apply.
// Counted by description so that it states the outcome, not the action that carries it.
int starts_on(const FakeWorld& w, const std::string& version) {
  int n = 0;
  for (const Action& a : w.actions)
    if ((std::holds_alternative<StartJob>(a) || std::holds_alternative<HotUpdate>(a)) &&
        describe(a).find(version) != std::string::npos)
      ++n;
  return n;
}

TEST(ByteRobust, DeferredCodeUpdateIsAppliedByTheNextRecoveryNotDropped) {
  for (double defer : {1.0, 0.0}) {
    SCOPED_TRACE(defer ? "held for the window, then a failure" : "arrives during a recovery");
    Harness h({{"defer_non_urgent", defer}});
    if (defer) h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
    EXPECT_TRUE(h.w.all<StopJob>().empty()) << "a held update must not stop the job";
    h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);  // a recovery begins
    if (!defer) h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
    h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
    EXPECT_EQ(starts_on(h.w, "v2"), 1) << "the recovery's restart does not carry the update";
    h.started(0);
    h.at(25 * 3600.0);  // past the 24 h deferral window
    EXPECT_EQ(starts_on(h.w, "v2"), 1) << "the update was lost, or applied twice";
  }
}

// Two successive deferred updates each get their own window: v2 held at 0 h rides a
// recovery at 1 h, v3 held at 20 h is forced at 44 h, not at 24 h by v2's spent window.
// It used to be: every held update armed a timer with the same tag, and any of them
// forced the update held when it fired.
TEST(ByteRobust, SecondDeferredUpdateIsForcedAtTheEndOfItsOwnWindow) {
  Harness h;  // defer_non_urgent 1, deferral_window_h 24
  h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
  h.at(3600);
  h.p->on_event(InspectionAlert{5, "gpu", "Xid 79"}, h.w);  // a recovery begins
  h.p->on_event(MachinesReady{h.w.last_action_id(), {}}, h.w);
  ASSERT_EQ(starts_on(h.w, "v2"), 1) << "the recovery's restart does not carry v2";
  h.started(0);
  h.at(20 * 3600.0);
  h.p->on_event(CodeUpdateRequested{"v3", false}, h.w);
  h.at(43 * 3600.0);
  EXPECT_EQ(starts_on(h.w, "v3"), 0) << "v3 was forced before its window (v2's timer)";
  EXPECT_TRUE(h.w.all<HotUpdate>().empty());
  h.at(45 * 3600.0);
  EXPECT_EQ(starts_on(h.w, "v3"), 1) << "v3 was not forced at the end of its window";
  EXPECT_EQ(starts_on(h.w, "v2"), 1);
}

// Updates held one after the other without a restart in between: the newest carries the
// older ones and is forced when the oldest one's window ends, once.
TEST(ByteRobust, NewerHeldUpdateKeepsTheOldestWindow) {
  Harness h;
  h.p->on_event(CodeUpdateRequested{"v2", false}, h.w);
  h.at(10 * 3600.0);
  h.p->on_event(CodeUpdateRequested{"v3", false}, h.w);
  h.at(23 * 3600.0);
  EXPECT_TRUE(h.w.all<HotUpdate>().empty());
  h.at(25 * 3600.0);
  auto hu = h.w.all<HotUpdate>();
  ASSERT_EQ(hu.size(), 1u);
  EXPECT_EQ(hu[0].version, "v3");
  h.started(0);
  h.at(40 * 3600.0);
  EXPECT_EQ(h.w.all<HotUpdate>().size(), 1u) << "v3 applied twice";
  EXPECT_EQ(starts_on(h.w, "v2"), 0);
}

}  // namespace
}  // namespace faultline
