// LiveWorld's own glue as parts (realexec/controller/): the policy's timers, the delivery of
// its events and act()'s livelock guard, each tested alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policies/api/event.h"
#include "realexec/controller/action_burst.h"
#include "realexec/controller/policy_delivery.h"
#include "realexec/controller/policy_timers.h"
#include "realexec/net/reactor.h"
#include "tests/realexec/agent/live_world_parts_fakes.h"

namespace faultline::live {
namespace {

TEST(PolicyTimers, ATimerFiresOnceUnderItsIdAndACancelledOneNever) {
  Reactor reactor{ManualClock{}};
  std::vector<TimerId> fired;
  {
    PolicyTimers timers(reactor);
    const TimerId a = timers.set(Duration::seconds(1), [&](TimerId id) { fired.push_back(id); });
    const TimerId b = timers.set(Duration::seconds(2), [&](TimerId id) { fired.push_back(id); });
    const TimerId c = timers.set(Duration::seconds(3), [&](TimerId id) { fired.push_back(id); });
    EXPECT_EQ(a, 1u);
    EXPECT_EQ(b, 2u);
    timers.cancel(b);
    reactor.advance_to(at_s(2.5));
    EXPECT_EQ(fired, (std::vector<TimerId>{a}));
    timers.cancel(a);  // fired already: nothing
    (void)c;
  }  // c is cancelled with the timers
  reactor.advance_to(at_s(10));
  EXPECT_EQ(fired.size(), 1u);
}

TEST(PolicyDelivery, EventsRaisedInAHandlerWaitForItAndOthersComeFromTheReactor) {
  Reactor reactor{ManualClock{}};
  std::vector<std::string> heard;
  PolicyDelivery* self = nullptr;
  PolicyDelivery delivery(reactor, [&](const Event& e) {
    heard.push_back(describe(e));
    if (heard.size() == 1) self->push(Event{TimerFired{2, 0}});  // waits for this handler
  });
  self = &delivery;
  delivery.run([&] {
    delivery.push(Event{TimerFired{1, 0}});
    EXPECT_TRUE(heard.empty());  // the start's handler runs: queued
  });
  EXPECT_EQ(heard.size(), 2u);  // delivered when it returned, in order
  delivery.push(Event{TimerFired{3, 0}});
  EXPECT_EQ(heard.size(), 2u);  // outside a handler: from the reactor
  reactor.advance_to(at_s(1));
  EXPECT_EQ(heard.size(), 3u);
}

TEST(ActionBurst, MoreThanTheLimitWithinASecondIsRefused) {
  ActionBurst burst;
  EXPECT_TRUE(burst.admit(at_s(10), 2));
  EXPECT_TRUE(burst.admit(at_s(10.5), 2));
  EXPECT_FALSE(burst.admit(at_s(10.9), 2));
  EXPECT_TRUE(burst.admit(at_s(11.5), 2));  // a new second began
}

}  // namespace
}  // namespace faultline::live
