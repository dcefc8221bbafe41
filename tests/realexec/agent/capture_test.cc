// A real stack capture with gdb of a helper process sleeping in a named function,
// running and SIGSTOPped (label e2e: it starts processes).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "realexec/proc.h"
#include "realexec/stacks.h"

namespace faultline::live {
namespace {

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (find_program("gdb").empty() && find_program("eu-stack").empty()) {
      GTEST_SKIP() << "neither gdb nor eu-stack is installed";
    }
    SpawnSpec spec;
    spec.argv = {FAULTLINE_AGENT_TEST_RANK, "sleep"};
    spec.env = make_env({});
    spec.stdout_to = Redirect::pipe();
    std::string err;
    ASSERT_TRUE(spawn(spec, &child_, &err)) << err;
    // Wait for "ready": by then main() has called helper_sleep_forever().
    std::string out;
    r_.add_fd(child_.stdout_fd, EPOLLIN, [&](std::uint32_t) {
      char buf[64];
      ssize_t n = ::read(child_.stdout_fd, buf, sizeof buf);
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    });
    ASSERT_TRUE(r_.run_until([&] { return out.find("ready") != std::string::npos; },
                             Duration::seconds(10)));
    r_.remove_fd(child_.stdout_fd);
    ::usleep(50 * 1000);
  }
  void TearDown() override {
    if (child_.pid > 0) {
      signal_group(child_.pid, SIGKILL);
      int st = -1;
      r_.watch_child(child_.pid, [&](int s) { st = s; });
      r_.run_until([&] { return st != -1; }, Duration::seconds(5));
    }
    if (child_.stdout_fd >= 0) ::close(child_.stdout_fd);
  }
  std::string capture() {
    std::string sig;
    bool done = false;
    capture_stack(r_, child_.pid, {}, [&](const std::string& s) {
      sig = s;
      done = true;
    });
    EXPECT_TRUE(r_.run_until([&] { return done; }, Duration::seconds(30)));
    return sig;
  }
  Reactor r_;
  Spawned child_;
};

TEST_F(Capture, RunningProcess) {
  std::string sig = capture();
  EXPECT_NE(sig.find("helper_sleep_forever < main"), std::string::npos) << sig;
  EXPECT_EQ(sig.find("[stopped]"), std::string::npos) << sig;
  EXPECT_EQ(sig.find("0x"), std::string::npos) << sig;
  // Still alive and not left stopped by the debugger.
  EXPECT_EQ(::kill(child_.pid, 0), 0);
  auto st = process_state(child_.pid);
  ASSERT_TRUE(st);
  EXPECT_NE(*st, 'T');
}

TEST_F(Capture, StoppedProcessIsMarked) {
  ASSERT_EQ(::kill(child_.pid, SIGSTOP), 0);
  for (int i = 0; i < 100 && process_state(child_.pid) != 'T'; ++i) ::usleep(10 * 1000);
  std::string sig = capture();
  EXPECT_EQ(sig.rfind("[stopped] ", 0), 0u) << sig;
  EXPECT_NE(sig.find("helper_sleep_forever < main"), std::string::npos) << sig;
}

TEST_F(Capture, MissingDebuggerIsSaid) {
  std::string sig;
  bool done = false;
  StackCaptureOptions o;
  o.gdb = "/nonexistent/gdb";
  o.eu_stack = "";
  capture_stack(r_, child_.pid, o, [&](const std::string& s) {
    sig = s;
    done = true;
  });
  ASSERT_TRUE(r_.run_until([&] { return done; }, Duration::seconds(5)));
  EXPECT_EQ(sig, "capture failed: neither gdb nor eu-stack found");
}

TEST(ChildRunDeadline, KillsTheGroupAtTheDeadline) {
  Reactor r;
  SpawnSpec spec;
  spec.argv = {FAULTLINE_AGENT_TEST_RANK, "sleep"};
  spec.env = make_env({});
  ChildResult got;
  bool done = false;
  run_child(r, spec, Duration::millis(300), [&](const ChildResult& res) {
    got = res;
    done = true;
  });
  ASSERT_TRUE(r.run_until([&] { return done; }, Duration::seconds(10)));
  EXPECT_TRUE(got.started);
  EXPECT_TRUE(got.timed_out);
  EXPECT_EQ(describe_wait_status(got.wait_status), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(got.out, "ready\n");
}

TEST(ChildRunDeadline, ExecFailureIsReportedNotRun) {
  Reactor r;
  SpawnSpec spec;
  spec.argv = {"/nonexistent/program"};
  ChildResult got;
  bool done = false;
  run_child(r, spec, Duration::seconds(1), [&](const ChildResult& res) {
    got = res;
    done = true;
  });
  ASSERT_TRUE(r.run_until([&] { return done; }, Duration::seconds(5)));
  EXPECT_FALSE(got.started);
  EXPECT_EQ(got.spawn_error, "cannot execute /nonexistent/program: not found or not executable");
}

}  // namespace
}  // namespace faultline::live
