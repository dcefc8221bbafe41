// The reactor's ordering guarantees: timers by (deadline, set order), cancellation,
// defer, fd removal from inside a handler, child exit status through pidfd, signals.
#include "realexec/net/reactor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace faultline::live {
namespace {

TEST(Reactor, TimersFireByDeadlineThenSetOrder) {
  Reactor r;
  std::vector<std::string> order;
  r.add_timer(Duration::millis(20), [&] { order.push_back("a20"); });
  r.add_timer(Duration::millis(5), [&] { order.push_back("b5"); });
  r.add_timer(Duration::millis(20), [&] { order.push_back("c20"); });
  for (int i = 0; i < 5; ++i) {
    r.add_timer(Duration::millis(30), [&, i] { order.push_back("d" + std::to_string(i)); });
  }
  EXPECT_TRUE(r.run_until([&] { return order.size() == 8; }, Duration::seconds(2)));
  EXPECT_EQ(order, (std::vector<std::string>{"b5", "a20", "c20", "d0", "d1", "d2", "d3", "d4"}));
}

TEST(Reactor, TimersDueAtTheSameInstantFireInSetOrder) {
  // Timers whose deadlines have all passed when the loop looks are due at once; they
  // must still come out in the order they were set.
  Reactor r;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) r.add_timer(Duration::zero(), [&, i] { order.push_back(i); });
  ::usleep(2000);
  EXPECT_TRUE(r.run_until([&] { return order.size() == 100; }, Duration::seconds(2)));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(Reactor, CancelledTimersDoNotFire) {
  Reactor r;
  bool fired = false;
  bool later = false;
  auto id = r.add_timer(Duration::millis(5), [&] { fired = true; });
  auto id2 = r.add_timer(Duration::millis(10), [&] { fired = true; });
  r.add_timer(Duration::millis(1), [&] { r.cancel_timer(id2); });  // from inside a callback
  r.cancel_timer(id);
  r.cancel_timer(12345);  // unknown ids are ignored
  r.add_timer(Duration::millis(30), [&] { later = true; });
  EXPECT_TRUE(r.run_until([&] { return later; }, Duration::seconds(2)));
  EXPECT_FALSE(fired);
}

TEST(Reactor, DeferRunsAfterTheCurrentCallbackInOrder) {
  Reactor r;
  std::vector<std::string> order;
  r.defer([&] {
    order.push_back("first");
    r.defer([&] { order.push_back("nested"); });
    order.push_back("first-end");
  });
  r.defer([&] { order.push_back("second"); });
  EXPECT_TRUE(r.run_until([&] { return order.size() == 4; }, Duration::seconds(2)));
  EXPECT_EQ(order, (std::vector<std::string>{"first", "first-end", "second", "nested"}));
}

TEST(Reactor, ChildWatchReportsTheExitStatus) {
  Reactor r;
  pid_t a = ::fork();
  if (a == 0) ::_exit(5);
  pid_t b = ::fork();
  if (b == 0) {
    ::pause();
    ::_exit(0);
  }
  int sa = -1;
  int sb = -1;
  r.watch_child(a, [&](int st) { sa = st; });
  r.watch_child(b, [&](int st) { sb = st; });
  ::kill(b, SIGKILL);
  EXPECT_TRUE(r.run_until([&] { return sa != -1 && sb != -1; }, Duration::seconds(5)));
  ASSERT_TRUE(WIFEXITED(sa));
  EXPECT_EQ(WEXITSTATUS(sa), 5);
  ASSERT_TRUE(WIFSIGNALED(sb));
  EXPECT_EQ(WTERMSIG(sb), SIGKILL);
}

TEST(Reactor, FdHandlerMayRemoveItself) {
  Reactor r;
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  int calls = 0;
  r.add_fd(p[0], EPOLLIN, [&](std::uint32_t ev) {
    ++calls;
    EXPECT_TRUE(ev & EPOLLIN);
    r.remove_fd(p[0]);
  });
  ASSERT_EQ(::write(p[1], "xy", 2), 2);
  r.run_until([&] { return false; }, Duration::millis(50));
  EXPECT_EQ(calls, 1);  // level-triggered, but removed after the first event
  ::close(p[0]);
  ::close(p[1]);
}

TEST(Reactor, SignalsArriveThroughTheLoop) {
  Reactor r;
  int got = 0;
  r.on_signal(SIGUSR1, [&] { ++got; });
  ::kill(::getpid(), SIGUSR1);
  EXPECT_TRUE(r.run_until([&] { return got == 1; }, Duration::seconds(2)));
}

TEST(Reactor, RunReturnsAfterStop) {
  Reactor r;
  r.add_timer(Duration::millis(5), [&] { r.stop(); });
  r.run();
  EXPECT_TRUE(r.stopped());
  EXPECT_GE(monotonic_now().ns, 0);
}

// Issue 37, item 5: a controller paused for longer than the heartbeat timeout (SIGSTOP, a VM
// hiccup, swap) declared every agent lost on resume although their heartbeats sat unread in
// the sockets: the loop fired the expired deadlines before it read the fds. What peers said
// during the pause is read first, for more peers than one epoll batch holds.
TEST(Reactor, AfterAPauseWhatPeersSaidIsReadBeforeTheirDeadlinesFire) {
  Reactor r;
  constexpr int kPeers = 300;
  std::vector<int> ends(2 * kPeers);
  std::vector<std::uint64_t> deadline(kPeers);
  int heard = 0;
  int lost = 0;
  for (int i = 0; i < kPeers; ++i) {
    ASSERT_EQ(::pipe2(&ends[2 * i], O_NONBLOCK), 0);
    deadline[i] = r.add_timer(Duration::millis(20), [&lost] { ++lost; });
    r.add_fd(ends[2 * i], EPOLLIN, [&, i](std::uint32_t) {
      char c;
      while (::read(ends[2 * i], &c, 1) == 1) {
      }
      r.remove_fd(ends[2 * i]);
      r.cancel_timer(deadline[i]);  // heard from: this deadline is moot
      ++heard;
    });
    ASSERT_EQ(::write(ends[2 * i + 1], "h", 1), 1);  // the heartbeat, sent during the pause
  }
  ::usleep(60 * 1000);  // the pause: every deadline expires while nothing runs
  EXPECT_TRUE(r.run_until([&] { return heard + lost >= kPeers; }, Duration::seconds(5)));
  EXPECT_EQ(heard, kPeers);
  EXPECT_EQ(lost, 0);
  for (int fd : ends) ::close(fd);
}

}  // namespace
}  // namespace faultline::live
