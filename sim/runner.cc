#include "sim/runner.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <simgrid/s4u.hpp>

namespace faultline::sim {

namespace sg4 = simgrid::s4u;

namespace {

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}


struct Child {
  pid_t pid;
  int fd;
  int replica;
  std::vector<std::uint8_t> data;
};

}  // namespace

ReplicaRunner::ReplicaRunner(const scenarios::Scenario& sc, const Registry& registry)
    : sc_(sc),
      registry_(registry),
      view_(std::make_unique<ClusterView>(sc.cluster)),
      platform_(std::make_unique<Platform>(*view_)),
      flows_(std::make_unique<FlowNet>(*platform_)) {}

ReplicaRunner::~ReplicaRunner() = default;

double ReplicaRunner::platform_build_s() const { return platform_->build_seconds(); }

ReplicaResult ReplicaRunner::run(std::uint64_t replica, const RunOptions& opt) {
  ReplicaResult out;
  sg4::Actor::create("replica", platform_->control_host(), [&]() {
    SimWorld world(sc_, *view_, *platform_, *flows_, registry_, replica, opt);
    out = world.run();
  });
  platform_->engine().run();
  return out;
}

std::vector<ReplicaResult> run_replicas(const scenarios::Scenario& sc, int replicas, int jobs,
                                        const RunOptions& opt, const Registry& registry,
                                        RunStats* stats, const std::function<void(int, int)>& on_done) {
  const auto t0 = std::chrono::steady_clock::now();
  ReplicaRunner runner(sc, registry);
  if (stats) stats->platform_build_s = runner.platform_build_s();

  std::vector<ReplicaResult> results(replicas);
  int done = 0;
  results[0] = runner.run(0, opt);
  if (on_done) on_done(++done, replicas);

  std::map<int, Child> running;  // by fd
  int next = 1;
  jobs = std::max(1, jobs);
  auto launch = [&]() {
    int fds[2];
    if (::pipe(fds) != 0) throw RunError(std::string("pipe: ") + std::strerror(errno));
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) throw RunError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(fds[0]);
      int code = 0;
      try {
        ReplicaResult r = runner.run(next, opt);
        std::vector<std::uint8_t> bytes = encode(r);
        std::uint64_t n = bytes.size();
        if (!write_all(fds[1], &n, sizeof n) || !write_all(fds[1], bytes.data(), bytes.size())) code = 3;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "faultline: replica %d failed: %s\n", next, e.what());
        code = 4;
      }
      ::close(fds[1]);
      ::_exit(code);
    }
    ::close(fds[1]);
    running[fds[0]] = Child{pid, fds[0], next, {}};
    ++next;
  };
  while (next < replicas || !running.empty()) {
    while (next < replicas && static_cast<int>(running.size()) < jobs) launch();
    std::vector<pollfd> pfds;
    for (auto& [fd, c] : running) pfds.push_back({fd, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw RunError(std::string("poll: ") + std::strerror(errno));
    }
    for (const auto& p : pfds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = running[p.fd];
      std::uint8_t buf[65536];
      const ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n > 0) {
        c.data.insert(c.data.end(), buf, buf + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      ::close(p.fd);
      int status = 0;
      ::waitpid(c.pid, &status, 0);
      const int replica = c.replica;
      std::vector<std::uint8_t> data = std::move(c.data);
      running.erase(p.fd);
      std::uint64_t len = 0;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || data.size() < sizeof len) {
        for (auto& [fd, other] : running) ::kill(other.pid, SIGKILL);
        throw RunError("replica " + std::to_string(replica) + " process failed (status " +
                       std::to_string(status) + ")");
      }
      std::memcpy(&len, data.data(), sizeof len);
      if (len != data.size() - sizeof len) throw RunError("replica " + std::to_string(replica) + ": truncated result");
      results[replica] = decode({data.begin() + sizeof len, data.end()});
      if (on_done) on_done(++done, replicas);
    }
  }
  if (stats) stats->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return results;
}

std::vector<ReplicaResult> run_replicas_in_child(const scenarios::Scenario& sc, int jobs,
                                                 const RunOptions& opt, const Registry& registry) {
  int fds[2];
  if (::pipe(fds) != 0) throw RunError(std::string("pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw RunError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      for (const auto& r : run_replicas(sc, sc.replicas, jobs, opt, registry, nullptr)) {
        const std::vector<std::uint8_t> bytes = encode(r);
        const std::uint64_t n = bytes.size();
        if (!write_all(fds[1], &n, sizeof n) || !write_all(fds[1], bytes.data(), bytes.size())) code = 3;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "faultline: %s: %s\n", sc.policy.c_str(), e.what());
      code = 4;
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::vector<std::uint8_t> data;
  std::uint8_t buf[65536];
  while (true) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) data.insert(data.end(), buf, buf + n);
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw RunError(sc.policy + " failed (status " + std::to_string(status) + ")");
  std::vector<ReplicaResult> out;
  std::size_t off = 0;
  while (off + sizeof(std::uint64_t) <= data.size()) {
    std::uint64_t n;
    std::memcpy(&n, data.data() + off, sizeof n);
    off += sizeof n;
    if (off + n > data.size()) throw RunError(sc.policy + ": truncated result");
    out.push_back(decode({data.begin() + off, data.begin() + off + n}));
    off += n;
  }
  return out;
}

}  // namespace faultline::sim
