#include "kernels/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Reads whatever is available without blocking; returns false at end of file.
bool drain(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// Waits up to `limit_s` for `pid` to be reaped. Returns true and fills status when it was.
bool reap(pid_t pid, double limit_s, int& status) {
  const auto start = Clock::now();
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return false;
    if (seconds_since(start) >= limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The SIGALRM handler can only use what is reachable without locks or allocation, hence this
// process-wide state; it is written before the timer is armed and only read by the handler.
const char* g_deadline_message = nullptr;
std::size_t g_deadline_message_size = 0;
int g_deadline_exit_code = 4;
int g_deadline_fd = STDOUT_FILENO;
std::string* g_deadline_storage = nullptr;

void on_deadline_alarm(int) {
  std::size_t done = 0;
  while (done < g_deadline_message_size) {
    const ssize_t n =
        ::write(g_deadline_fd, g_deadline_message + done, g_deadline_message_size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::_exit(g_deadline_exit_code);
}

}  // namespace

bool write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string last_complete_line(std::string_view output) {
  const auto end = output.rfind('\n');
  if (end == std::string_view::npos) return "";
  const auto previous = end == 0 ? std::string_view::npos : output.rfind('\n', end - 1);
  const std::size_t from = previous == std::string_view::npos ? 0 : previous + 1;
  return std::string(output.substr(from, end - from));
}

ChildResult run_in_child(const std::function<int(int out_fd)>& body, double deadline_s) {
  ChildResult result;
  const auto start = Clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    int status = 125;
    try {
      status = body(fds[1]);
    } catch (...) {
      status = 125;
    }
    ::close(fds[1]);
    ::_exit(status);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);

  bool open = true;
  bool deadline_hit = false;
  while (open) {
    const double remaining = deadline_s - seconds_since(start);
    if (remaining <= 0) {
      deadline_hit = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int timeout_ms = static_cast<int>(std::min(std::ceil(remaining * 1000.0), 1e9));
    const int r = ::poll(&p, 1, std::max(timeout_ms, 1));
    if (r < 0 && errno != EINTR) break;
    if (r > 0) open = drain(fds[0], result.output);
  }

  int status = 0;
  if (!deadline_hit) {
    // Output is complete; the child should exit at once, but one stuck tearing down a CUDA
    // context still owes us its status only until the deadline.
    const double remaining = std::max(0.0, deadline_s - seconds_since(start));
    if (!reap(pid, remaining, status)) deadline_hit = true;
  }
  if (deadline_hit) {
    drain(fds[0], result.output);
    ::kill(pid, SIGKILL);
    reap(pid, 2.0, status);
    ::close(fds[0]);
    result.kind = ChildResult::Kind::kDeadline;
    result.elapsed_s = seconds_since(start);
    return result;
  }
  ::close(fds[0]);
  result.elapsed_s = seconds_since(start);
  if (WIFSIGNALED(status)) {
    result.kind = ChildResult::Kind::kSignaled;
    result.signal = WTERMSIG(status);
  } else {
    result.kind = ChildResult::Kind::kExited;
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return result;
}

InProcessDeadline::InProcessDeadline(double seconds, std::string message, int exit_code, int fd) {
  delete g_deadline_storage;
  g_deadline_storage = new std::string(std::move(message));
  g_deadline_message = g_deadline_storage->data();
  g_deadline_message_size = g_deadline_storage->size();
  g_deadline_exit_code = exit_code;
  g_deadline_fd = fd;
  struct sigaction action {};
  action.sa_handler = on_deadline_alarm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGALRM, &action, nullptr);
  itimerval timer{};
  const double whole = std::floor(seconds);
  timer.it_value.tv_sec = static_cast<time_t>(whole);
  timer.it_value.tv_usec = static_cast<suseconds_t>((seconds - whole) * 1e6);
  if (timer.it_value.tv_sec == 0 && timer.it_value.tv_usec == 0) timer.it_value.tv_usec = 1;
  ::setitimer(ITIMER_REAL, &timer, nullptr);
}

InProcessDeadline::~InProcessDeadline() {
  itimerval off{};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::signal(SIGALRM, SIG_DFL);
  g_deadline_message_size = 0;
}

}  // namespace faultline::kernels
