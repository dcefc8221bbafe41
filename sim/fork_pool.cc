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

#include "policies/module.h"

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

std::runtime_error sys_error(const char* what) {
  return std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

constexpr std::size_t kNoItem = ~std::size_t{0};
// A result frame's length that announces a policies::ModuleError instead of a result.
constexpr std::uint64_t kModuleErrorFrame = ~std::uint64_t{0};

struct Child {
  pid_t pid = -1;
  int cmd = -1;                    // write end: item indices to run
  std::size_t item = kNoItem;      // the item it runs now
  std::vector<std::uint8_t> data;  // unparsed frames: [u64 length][bytes][u8 reusable]
};

using ChildFn =
    std::function<std::vector<std::uint8_t>(std::size_t, const std::function<void()>& tick)>;
using ResultFn = std::function<void(std::size_t, std::vector<std::uint8_t>)>;
using WhatFn = std::function<std::string(std::size_t)>;

// One fork_pool call: the children it runs, their pipes, and the items not yet given out.
class Pool {
 public:
  Pool(std::size_t n, const ForkPoolOptions& opt, const ChildFn& child, const ResultFn& on_result,
       const WhatFn& what)
      : n_(n), opt_(opt), child_(child), on_result_(on_result), what_(what) {}

  void run() {
    if (opt_.on_tick) {
      if (::pipe(ticks_) != 0) throw sys_error("pipe");
      ::fcntl(ticks_[0], F_SETFL, O_NONBLOCK);
      ::fcntl(ticks_[0], F_SETFD, FD_CLOEXEC);
    }
    const int jobs = opt_.jobs < 1 ? 1 : opt_.jobs;
    while (next_ < n_ || !running_.empty()) {
      while (next_ < n_ && static_cast<int>(running_.size()) < jobs) spawn();
      std::vector<pollfd> pfds;
      for (const auto& [fd, c] : running_) pfds.push_back({fd, POLLIN, 0});
      if (ticks_[0] >= 0) pfds.push_back({ticks_[0], POLLIN, 0});
      if (::poll(pfds.data(), pfds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        stop_all(std::string("poll: ") + std::strerror(errno));
      }
      drain_ticks();
      for (const auto& p : pfds) {
        if (p.fd == ticks_[0] || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        read_child(p.fd);
      }
    }
    drain_ticks();
    if (ticks_[0] >= 0) ::close(ticks_[0]), ::close(ticks_[1]);
  }

 private:
  [[noreturn]] void stop_all(const std::string& msg) {
    kill_all();
    throw std::runtime_error(msg);
  }
  void kill_all() {
    for (auto& [fd, c] : running_) ::kill(c.pid, SIGKILL);
    for (auto& [fd, c] : running_) {
      ::close(fd);
      if (c.cmd >= 0) ::close(c.cmd);
      while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    running_.clear();
    if (ticks_[0] >= 0) ::close(ticks_[0]), ::close(ticks_[1]);
    ticks_[0] = ticks_[1] = -1;
  }
  void drain_ticks() {
    if (ticks_[0] < 0) return;
    char buf[4096];
    ssize_t got = 0;
    bool any = false;
    while ((got = ::read(ticks_[0], buf, sizeof buf)) > 0) ticked_ += got, any = true;
    if (any) opt_.on_tick(ticked_);
  }
  // The child's side: runs the items it is sent until its command pipe closes or its
  // state is no longer fit for another. Returns its exit status.
  int serve(int cmd_fd, int out_fd, int tick_fd) {
    const std::function<void()> tick = [tick_fd] {
      const char t = 'x';
      if (tick_fd >= 0) (void)!::write(tick_fd, &t, 1);
    };
    std::uint64_t item = 0;
    while (read_all(cmd_fd, &item, sizeof item)) {
      try {
        const std::vector<std::uint8_t> bytes = child_(item, tick);
        const std::uint8_t more = opt_.child_reusable && opt_.child_reusable() ? 1 : 0;
        const std::uint64_t len = bytes.size();
        if (!write_all(out_fd, &len, sizeof len) ||
            !write_all(out_fd, bytes.data(), bytes.size()) || !write_all(out_fd, &more, 1))
          return 3;
        if (!more) return 0;
      } catch (const policies::ModuleError& e) {
        // The parent rethrows it as it is: a module's failure, the user's input (exit 2).
        const std::string msg = e.what();
        const std::uint64_t len = msg.size();
        if (!write_all(out_fd, &kModuleErrorFrame, sizeof kModuleErrorFrame) ||
            !write_all(out_fd, &len, sizeof len) || !write_all(out_fd, msg.data(), msg.size()))
          return 3;
        return 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "faultline: %s failed: %s\n", what_(item).c_str(), e.what());
        return 4;
      }
    }
    return 0;
  }
  void give(Child& c, std::size_t item) {
    const std::uint64_t i = item;
    c.item = item;
    // A child that died meanwhile must not take the parent with it (SIGPIPE): the write
    // fails instead, and its exit status is reported when its result pipe closes.
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old);
    const bool ok = write_all(c.cmd, &i, sizeof i);
    ::sigaction(SIGPIPE, &old, nullptr);
    if (!ok) ::close(c.cmd), c.cmd = -1;
  }
  // Forks a child and gives it the next item.
  void spawn() {
    int out[2], cmd[2];
    if (::pipe(out) != 0) stop_all(std::string("pipe: ") + std::strerror(errno));
    if (::pipe(cmd) != 0) {
      ::close(out[0]), ::close(out[1]);
      stop_all(std::string("pipe: ") + std::strerror(errno));
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) stop_all(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(out[0]);
      ::close(cmd[1]);
      for (auto& [fd, c] : running_) ::close(fd), ::close(c.cmd);
      if (ticks_[0] >= 0) ::close(ticks_[0]);
      const int code = serve(cmd[0], out[1], ticks_[1]);
      ::close(out[1]);
      std::fflush(stderr);
      ::_exit(code);
    }
    ::close(out[1]);
    ::close(cmd[0]);
    ::fcntl(cmd[1], F_SETFD, FD_CLOEXEC);
    Child& c = running_[out[0]] = Child{pid, cmd[1], kNoItem, {}};
    give(c, next_++);
  }
  // A child's module error frame ([kModuleErrorFrame][u64 length][message]) at the front of
  // `data`: false while incomplete; complete, it ends the pool with the child's ModuleError.
  bool module_error_frame(const std::vector<std::uint8_t>& data) {
    std::uint64_t len;
    if (data.size() < 2 * sizeof len) return false;
    std::memcpy(&len, data.data() + sizeof len, sizeof len);
    if (data.size() < 2 * sizeof len + len) return false;
    const std::string msg(data.begin() + 2 * sizeof len, data.begin() + 2 * sizeof len + len);
    kill_all();
    throw policies::ModuleError(msg);
  }
  // What a child's result pipe holds: whole frames (a result, then its next item or its
  // end), or its end (reaped; an error when it died with an item or a bad status).
  void read_child(int fd) {
    Child& c = running_[fd];
    std::uint8_t buf[65536];
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got > 0) {
      c.data.insert(c.data.end(), buf, buf + got);
      while (c.data.size() >= sizeof(std::uint64_t)) {
        std::uint64_t len;
        std::memcpy(&len, c.data.data(), sizeof len);
        if (len == kModuleErrorFrame) {
          if (!module_error_frame(c.data)) break;
          continue;
        }
        if (c.data.size() < sizeof len + len + 1) break;
        std::vector<std::uint8_t> bytes(c.data.begin() + sizeof len,
                                        c.data.begin() + sizeof len + len);
        const bool more = c.data[sizeof len + len] != 0;
        c.data.erase(c.data.begin(), c.data.begin() + sizeof len + len + 1);
        const std::size_t item = c.item;
        c.item = kNoItem;
        if (more && next_ < n_)
          give(c, next_++);
        else if (c.cmd >= 0)
          ::close(c.cmd), c.cmd = -1;  // it ends on its own
        on_result_(item, std::move(bytes));
      }
      return;
    }
    if (got < 0 && errno == EINTR) return;
    ::close(fd);
    if (c.cmd >= 0) ::close(c.cmd);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    Child done = std::move(c);
    running_.erase(fd);
    if (done.item != kNoItem || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      stop_all((done.item != kNoItem ? what_(done.item)
                                     : std::string("a worker process between items")) +
               ": process failed (status " + std::to_string(status) + ")");
  }

  const std::size_t n_;
  const ForkPoolOptions& opt_;
  const ChildFn& child_;
  const ResultFn& on_result_;
  const WhatFn& what_;
  int ticks_[2] = {-1, -1};
  std::map<int, Child> running_;  // by the read end of its result pipe
  long long ticked_ = 0;
  std::size_t next_ = 0;
};

}  // namespace

void fork_pool(std::size_t n, const ForkPoolOptions& opt, const ChildFn& child,
               const ResultFn& on_result, const WhatFn& what) {
  if (n == 0) return;
  Pool(n, opt, child, on_result, what).run();
}

}  // namespace faultline::sim
