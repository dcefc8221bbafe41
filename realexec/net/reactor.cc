// The live reactor: one epoll set, one timerfd armed for the earliest timer, a signalfd
// created on the first on_signal() and one pidfd per watched child.
//
// Fd events carry (fd, generation) so that an event already fetched for an fd that a
// handler removed (and that may have been reopened under the same number) is dropped.
#include "realexec/net/reactor.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace faultline::live {
namespace {

// Tag of the reactor's own fds in epoll_event.data.u64 (never a valid (fd, gen) pair,
// because user generations start at 1 and fds are < 2^31).
constexpr std::uint64_t kTimerTag = ~std::uint64_t{0};
constexpr std::uint64_t kSignalTag = ~std::uint64_t{0} - 1;

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("reactor: " + what + ": " + std::strerror(errno));
}

std::uint64_t pack(int fd, std::uint32_t gen) {
  return (static_cast<std::uint64_t>(gen) << 32) | static_cast<std::uint32_t>(fd);
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

Instant monotonic_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return Instant{static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec};
}

std::int64_t wall_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Reactor::Reactor() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw sys_error("epoll_create1");
  timerfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timerfd_ < 0) {
    ::close(epfd_);
    throw sys_error("timerfd_create");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerTag;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &ev) != 0) {
    ::close(timerfd_);
    ::close(epfd_);
    throw sys_error("epoll_ctl(timerfd)");
  }
}

Reactor::Reactor(ManualClock) : Reactor() { manual_ = true; }

void Reactor::advance_to(Instant t) {
  if (!manual_) throw std::logic_error("reactor: advance_to needs a ManualClock reactor");
  while (!timers_.empty() && timers_.begin()->first.first <= t.ns) {
    auto it = timers_.begin();
    manual_ns_ = std::max(manual_ns_, it->first.first);
    Callback cb = std::move(it->second.second);
    timer_keys_.erase(it->second.first);
    timers_.erase(it);
    if (cb) cb();
  }
  manual_ns_ = std::max(manual_ns_, t.ns);
}

Reactor::~Reactor() {
  for (auto& [pid, fd] : pidfds_) ::close(fd);
  if (sigfd_ >= 0) ::close(sigfd_);
  if (timerfd_ >= 0) ::close(timerfd_);
  if (epfd_ >= 0) ::close(epfd_);
}

void Reactor::add_fd(int fd, std::uint32_t events, FdHandler h) {
  if (fd < 0) throw std::invalid_argument("reactor: add_fd: negative fd");
  if (fds_.count(fd) != 0) throw std::invalid_argument("reactor: add_fd: fd already watched");
  std::uint32_t gen = next_fd_gen_++;
  if (next_fd_gen_ == 0) next_fd_gen_ = 1;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = pack(fd, gen);
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw sys_error("epoll_ctl(ADD)");
  fds_[fd] = FdEntry{gen, std::make_shared<FdHandler>(std::move(h))};
}

void Reactor::modify_fd(int fd, std::uint32_t events) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = pack(fd, it->second.gen);
  if (::epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0) throw sys_error("epoll_ctl(MOD)");
}

void Reactor::remove_fd(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);  // fails harmlessly if fd was closed
  fds_.erase(it);
}

std::uint64_t Reactor::add_timer(Duration after, Callback cb) {
  if (after.ns < 0) after = Duration::zero();
  std::int64_t deadline = (now() + after).ns;
  std::uint64_t id = next_timer_++;
  std::pair<std::int64_t, std::uint64_t> key{deadline, id};
  timers_.emplace(key, std::make_pair(id, std::move(cb)));
  timer_keys_.emplace(id, key);
  if (deadline < armed_ns_) arm_timerfd();
  return id;
}

void Reactor::cancel_timer(std::uint64_t id) {
  auto it = timer_keys_.find(id);
  if (it == timer_keys_.end()) return;
  timers_.erase(it->second);
  timer_keys_.erase(it);
}

void Reactor::arm_timerfd() {
  if (manual_) return;  // advance_to fires them
  itimerspec spec{};
  std::int64_t want = timers_.empty() ? kDisarmed : timers_.begin()->first.first;
  if (want == armed_ns_) return;
  if (want != kDisarmed) {
    // An absolute deadline in the past fires at once; 0 would disarm, so use 1 ns.
    std::int64_t at = want <= 0 ? 1 : want;
    spec.it_value.tv_sec = at / 1000000000;
    spec.it_value.tv_nsec = at % 1000000000;
  }
  if (::timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
    throw sys_error("timerfd_settime");
  }
  armed_ns_ = want;
}

void Reactor::fire_due_timers() {
  // Only timers due now and set before this pass run in it, so a callback that defers
  // again cannot starve fd events. A timer set during the pass has a deadline >= t and
  // a sequence >= `limit`, so its key is never below the cut.
  const std::pair<std::int64_t, std::uint64_t> cut{now().ns, next_timer_};
  while (!stopped_) {
    auto it = timers_.begin();
    if (it == timers_.end() || !(it->first < cut)) break;
    Callback cb = std::move(it->second.second);
    timer_keys_.erase(it->second.first);
    timers_.erase(it);
    if (cb) cb();
  }
}

void Reactor::watch_child(pid_t pid, std::function<void(int wait_status)> h) {
  auto handler = std::make_shared<std::function<void(int)>>(std::move(h));
  int pfd = pidfd_open(pid);
  if (pfd < 0) {
    // Without pidfds (very old kernels) poll the child instead.
    auto poll = std::make_shared<std::function<void()>>();
    *poll = [this, pid, handler, weak = std::weak_ptr<std::function<void()>>(poll)]() {
      int status = 0;
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        (*handler)(r == pid ? status : 0);
        return;
      }
      if (auto self = weak.lock()) add_timer(Duration::millis(20), [self] { (*self)(); });
    };
    add_timer(Duration::zero(), [poll] { (*poll)(); });
    return;
  }
  pidfds_[pid] = pfd;
  add_fd(pfd, EPOLLIN, [this, pid, pfd, handler](std::uint32_t) {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return;  // readable before the zombie is visible: wait for the next event
    remove_fd(pfd);
    ::close(pfd);
    pidfds_.erase(pid);
    (*handler)(r == pid ? status : 0);
  });
}

void Reactor::on_signal(int signo, Callback h) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signo);
  if (::sigprocmask(SIG_BLOCK, &one, nullptr) != 0) throw sys_error("sigprocmask");
  signals_[signo] = std::move(h);
  sigset_t all;
  sigemptyset(&all);
  for (const auto& [s, cb] : signals_) sigaddset(&all, s);
  int fd = ::signalfd(sigfd_, &all, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) throw sys_error("signalfd");
  if (sigfd_ < 0) {
    sigfd_ = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kSignalTag;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, sigfd_, &ev) != 0) throw sys_error("epoll_ctl(signalfd)");
  }
}

void Reactor::on_signalfd() {
  signalfd_siginfo si{};
  while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    auto it = signals_.find(static_cast<int>(si.ssi_signo));
    if (it != signals_.end() && it->second) {
      Callback cb = it->second;  // the handler may replace itself
      cb();
    }
  }
}

void Reactor::run() {
  while (!stopped_) run_once(nullptr);
}

bool Reactor::run_until(const std::function<bool()>& done, Duration timeout) {
  stopped_ = false;
  bool expired = false;
  std::uint64_t t = add_timer(timeout, [&expired] { expired = true; });
  std::function<bool()> finished = [&] { return expired || done(); };
  while (!stopped_ && !finished()) run_once(&finished);
  cancel_timer(t);
  return done();
}

void Reactor::run_once(const std::function<bool()>* done) {
  if (stopped_ || (done && (*done)())) return;
  arm_timerfd();
  // Fds first, timers after. When the loop was held up (a stopped process, swap, a long
  // callback), the deadlines that expired meanwhile are decided only after what the peers
  // said meanwhile has been read: a heartbeat waiting in a socket is not a silent peer.
  // With timers due, the wait does not block, and is repeated while batches come back
  // full (bounded, so a flood of ready fds cannot starve the timers).
  const bool due = !timers_.empty() && timers_.begin()->first.first <= now().ns;
  constexpr int kBatch = 256;
  constexpr int kMaxRoundsWhenDue = 64;
  epoll_event events[kBatch];
  for (int round = 0; round < (due ? kMaxRoundsWhenDue : 1) && !stopped_; ++round) {
    int n = ::epoll_wait(epfd_, events, kBatch, due ? 0 : -1);
    if (n < 0) {
      // A signal, or SIGCONT after a stop: the fds are polled again at the next turn before
      // any timer fires (after a stop, every deadline may have passed meanwhile).
      if (errno == EINTR) return;
      throw sys_error("epoll_wait");
    }
    dispatch(events, n);
    if (n < kBatch) break;
  }
  fire_due_timers();
}

void Reactor::dispatch(const ::epoll_event* events, int n) {
  for (int i = 0; i < n && !stopped_; ++i) {
    std::uint64_t tag = events[i].data.u64;
    if (tag == kTimerTag) {
      std::uint64_t expirations;
      while (::read(timerfd_, &expirations, sizeof expirations) > 0) {
      }
      armed_ns_ = kDisarmed - 1;  // fired: force re-arming
      continue;
    }
    if (tag == kSignalTag) {
      on_signalfd();
      continue;
    }
    int fd = static_cast<int>(tag & 0xffffffffu);
    auto gen = static_cast<std::uint32_t>(tag >> 32);
    auto it = fds_.find(fd);
    if (it == fds_.end() || it->second.gen != gen) continue;
    std::shared_ptr<FdHandler> h = it->second.handler;  // survives its own removal
    (*h)(events[i].events);
  }
}

}  // namespace faultline::live
