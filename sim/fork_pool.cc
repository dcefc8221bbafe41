#include "sim/fork_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

namespace faultline::sim {

namespace {

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

std::runtime_error sys_error(const char* what) { return std::runtime_error(std::string(what) + ": " + std::strerror(errno)); }

struct Child {
  pid_t pid = -1;
  std::size_t item = 0;
  std::vector<std::uint8_t> data;
};

}  // namespace

void fork_pool(std::size_t n, const ForkPoolOptions& opt,
               const std::function<std::vector<std::uint8_t>(std::size_t, const std::function<void()>& tick)>& child,
               const std::function<void(std::size_t, std::vector<std::uint8_t>)>& on_result,
               const std::function<std::string(std::size_t)>& what) {
  if (n == 0) return;
  int ticks[2] = {-1, -1};
  if (opt.on_tick) {
    if (::pipe(ticks) != 0) throw sys_error("pipe");
    ::fcntl(ticks[0], F_SETFL, O_NONBLOCK);
    ::fcntl(ticks[0], F_SETFD, FD_CLOEXEC);
  }
  std::map<int, Child> running;  // by the read end of its result pipe
  long long ticked = 0;
  auto stop_all = [&](const std::string& msg) {
    for (auto& [fd, c] : running) ::kill(c.pid, SIGKILL);
    for (auto& [fd, c] : running) {
      ::close(fd);
      while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    running.clear();
    if (ticks[0] >= 0) ::close(ticks[0]), ::close(ticks[1]);
    throw std::runtime_error(msg);
  };
  auto drain_ticks = [&] {
    if (ticks[0] < 0) return;
    char buf[4096];
    ssize_t got = 0;
    bool any = false;
    while ((got = ::read(ticks[0], buf, sizeof buf)) > 0) ticked += got, any = true;
    if (any) opt.on_tick(ticked);
  };
  std::size_t next = 0;
  const int jobs = opt.jobs < 1 ? 1 : opt.jobs;
  while (next < n || !running.empty()) {
    while (next < n && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (::pipe(fds) != 0) stop_all(std::string("pipe: ") + std::strerror(errno));
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = ::fork();
      if (pid < 0) stop_all(std::string("fork: ") + std::strerror(errno));
      if (pid == 0) {
        ::close(fds[0]);
        for (auto& [fd, c] : running) ::close(fd);
        if (ticks[0] >= 0) ::close(ticks[0]);
        const int tick_fd = ticks[1];
        const std::function<void()> tick = [tick_fd] {
          const char t = 'x';
          if (tick_fd >= 0) (void)!::write(tick_fd, &t, 1);
        };
        int code = 0;
        try {
          const std::vector<std::uint8_t> bytes = child(next, tick);
          if (!write_all(fds[1], bytes.data(), bytes.size())) code = 3;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "faultline: %s failed: %s\n", what(next).c_str(), e.what());
          code = 4;
        }
        ::close(fds[1]);
        std::fflush(stderr);
        ::_exit(code);
      }
      ::close(fds[1]);
      running[fds[0]] = Child{pid, next, {}};
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const auto& [fd, c] : running) pfds.push_back({fd, POLLIN, 0});
    if (ticks[0] >= 0) pfds.push_back({ticks[0], POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      stop_all(std::string("poll: ") + std::strerror(errno));
    }
    drain_ticks();
    for (const auto& p : pfds) {
      if (p.fd == ticks[0] || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = running[p.fd];
      std::uint8_t buf[65536];
      const ssize_t got = ::read(p.fd, buf, sizeof buf);
      if (got > 0) {
        c.data.insert(c.data.end(), buf, buf + got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      ::close(p.fd);
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      Child done = std::move(c);
      running.erase(p.fd);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        stop_all(what(done.item) + ": process failed (status " + std::to_string(status) + ")");
      on_result(done.item, std::move(done.data));
    }
  }
  drain_ticks();
  if (ticks[0] >= 0) ::close(ticks[0]), ::close(ticks[1]);
}

}  // namespace faultline::sim
