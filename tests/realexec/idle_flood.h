// A stranger's flood of idle connections, shared by the /metrics unit tests
// (tests/realexec/agent/metrics_http_test.cc) and the live end-to-end tests: `n` connections
// held open without a word, each one dialled again as soon as the server closes it (or
// refuses it while nothing listens). And raise_nofile(), which lifts the soft fd limit to the
// hard one as realexec/scripts/live-scale.sh does, for tests that hold thousands of them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace faultline::live_test {

// Raises this process's soft RLIMIT_NOFILE to its hard limit; false when even the hard limit
// is below `need` (the caller skips, saying so).
inline bool raise_nofile(rlim_t need) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= need;
}

// Holds `n` idle connections to host:port from a thread of its own, each one dialled again as
// soon as it is closed (or refused while nothing listens).
class IdleFlood {
 public:
  IdleFlood(std::string host, int port, int n)
      : host_(std::move(host)), port_(port), fds_(static_cast<std::size_t>(n), -1) {
    thread_ = std::thread([this] { run(); });
  }
  ~IdleFlood() { stop(); }
  IdleFlood(const IdleFlood&) = delete;
  IdleFlood& operator=(const IdleFlood&) = delete;
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    for (int& fd : fds_)
      if (fd >= 0) close(fd);
  }
  long dials() const { return dials_; }
  // Connections whose dial went out and that the server has not closed (yet).
  int open() const { return open_; }

 private:
  int dial() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port_));
    inet_pton(AF_INET, host_.c_str(), &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
      close(fd);
      return -1;
    }
    ++dials_;
    return fd;
  }
  void run() {
    std::vector<pollfd> p(fds_.size());
    auto last_dial = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    while (!stop_) {
      // Redial at most 200 every 20 ms (while nothing listens, every dial fails at once).
      if (std::chrono::steady_clock::now() - last_dial >= std::chrono::milliseconds(20)) {
        last_dial = std::chrono::steady_clock::now();
        int budget = 200;
        for (int& fd : fds_)
          if (fd < 0 && budget-- > 0) fd = dial();
      }
      int open = 0;
      for (std::size_t i = 0; i < fds_.size(); ++i) {
        p[i] = pollfd{fds_[i], static_cast<short>(POLLIN | POLLRDHUP), 0};
        open += fds_[i] >= 0;
      }
      open_ = open;
      poll(p.data(), p.size(), 10);
      for (std::size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP))) continue;
        char buf[512];
        const ssize_t k = recv(fds_[i], buf, sizeof buf, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          close(fds_[i]);
          fds_[i] = -1;
        }
      }
    }
  }
  std::string host_;
  int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<long> dials_{0};
  std::atomic<int> open_{0};
  std::thread thread_;
};

}  // namespace faultline::live_test
