// The live backend's single-threaded reactor: epoll over sockets and pipes, one timerfd
// for all timers, signalfd for signals and pidfd for child processes.
//
// Everything in live mode (controller and agent) runs on one Reactor, so policy code
// sees events one at a time exactly as in the simulator. Callbacks run on the reactor
// thread and must not block. now() is CLOCK_MONOTONIC as an Instant (integer ns).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include "policies/api/time.h"

struct epoll_event;

namespace faultline::live {

// CLOCK_MONOTONIC in nanoseconds since an arbitrary epoch.
Instant monotonic_now();
// CLOCK_REALTIME in nanoseconds since the Unix epoch.
std::int64_t wall_now_ns();

// Tag of the test constructor: a reactor whose clock only advance_to() moves.
struct ManualClock {};

class Reactor {
 public:
  using FdHandler = std::function<void(std::uint32_t epoll_events)>;
  using Callback = std::function<void()>;

  Reactor();  // throws std::runtime_error when epoll/timerfd cannot be created
  // For tests (the World conformance suite): now() starts at zero and moves only with
  // advance_to(), which fires the timers due in (deadline, order set) order, each at its
  // own deadline. Fds and signals still work through run_until.
  explicit Reactor(ManualClock);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  Instant now() const { return manual_ ? Instant{manual_ns_} : monotonic_now(); }
  // REQUIRES: a ManualClock reactor and t >= now().
  void advance_to(Instant t);

  // Watches `fd` (not owned) for `events` (EPOLLIN, EPOLLOUT, ...). A handler may remove
  // its own or any other fd; removal takes effect at once.
  void add_fd(int fd, std::uint32_t events, FdHandler h);
  void modify_fd(int fd, std::uint32_t events);
  void remove_fd(int fd);

  // One-shot timer. Timers due at the same instant fire in the order they were set.
  std::uint64_t add_timer(Duration after, Callback cb);
  void cancel_timer(std::uint64_t id);
  // Runs `cb` on the next loop iteration (after the current callback returns).
  void defer(Callback cb) { add_timer(Duration::zero(), std::move(cb)); }

  // Calls `h(wait_status)` once when child `pid` exits (pidfd + waitpid). Requires pid
  // to be a child of this process.
  void watch_child(pid_t pid, std::function<void(int wait_status)> h);

  // Blocks `signo` for normal delivery and calls `h` from the loop when it arrives.
  void on_signal(int signo, Callback h);

  // Runs until stop(); returns at once if stop() was called before.
  void run();
  // Runs until `done()` holds (checked between callbacks), stop() is called or `timeout`
  // has passed; clears an earlier stop() first. Returns done(). For tests and for
  // bounded waits at shutdown.
  bool run_until(const std::function<bool()>& done, Duration timeout);
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  // One epoll_wait and its callbacks (several, without blocking, when timers are due),
  // then the due timers; returns early, before waiting, when `done` (may be null) holds.
  void run_once(const std::function<bool()>* done);
  void dispatch(const ::epoll_event* events, int n);
  void arm_timerfd();
  void fire_due_timers();
  void on_signalfd();

  struct FdEntry {
    std::uint32_t gen = 0;  // tells a stale epoll event from one for a reused fd number
    std::shared_ptr<FdHandler> handler;
  };
  static constexpr std::int64_t kDisarmed = std::numeric_limits<std::int64_t>::max();

  bool manual_ = false;
  std::int64_t manual_ns_ = 0;
  int epfd_ = -1;
  int timerfd_ = -1;
  int sigfd_ = -1;
  bool stopped_ = false;
  std::uint64_t next_timer_ = 1;
  // (deadline ns, sequence) -> (id, callback); id -> key for cancellation.
  std::map<std::pair<std::int64_t, std::uint64_t>, std::pair<std::uint64_t, Callback>> timers_;
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::uint64_t>> timer_keys_;
  std::unordered_map<int, FdEntry> fds_;
  std::uint32_t next_fd_gen_ = 1;
  std::unordered_map<pid_t, int> pidfds_;  // watched children's pidfds (owned)
  std::int64_t armed_ns_ = kDisarmed;      // deadline the timerfd is armed for
  std::map<int, Callback> signals_;
};

}  // namespace faultline::live
