// The live-mode protocol fuzzer's shared parts (tests/realexec/live/live_fuzz*.cc): the processes
// it starts, the mutator of frame bodies, a non-blocking framed connection, its options, and
// its targets (live_fuzz_controller.cc, live_fuzz_agent.cc, live_fuzz_inputs.cc; the program
// and its options: live_fuzz.cc).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "policies/builtin.h"
#include "realexec/controller/journal.h"
#include "realexec/live_config.h"
#include "realexec/net/auth.h"
#include "realexec/net/messages.h"
#include "realexec/net/wire.h"
#include "tests/realexec/live/live_support.h"
#include "tests/support/free_port.h"

namespace faultline::live_fuzz {

using nlohmann::json;
using namespace faultline::live_test;
namespace live = faultline::live;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Every process this program started (each the leader of its process group): a failure
// takes them all down with it, so nothing is left running for the next test.
inline std::vector<pid_t> g_started;

inline pid_t start(const std::vector<std::string>& argv, const std::string& out) {
  const pid_t p = spawn(argv, out);
  if (p > 0) g_started.push_back(p);
  return p;
}

// Kills every process whose command line mentions `dir`: ranks outlive their agent by
// design (an agent restart must not stop training), so killing the agents is not enough.
inline void kill_mentioning(const std::string& dir) {
  for (int round = 0; round < 3; ++round) {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = std::atoi(name.c_str());
      if (pid == ::getpid()) continue;
      std::string cmd = slurp(e.path().string() + "/cmdline");
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      if (cmd.find(dir) != std::string::npos) ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

inline std::string g_dir;  // the run's directory

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "faultline_live_fuzz: FAILED: %s (kept %s)\n", why.c_str(), g_dir.c_str());
  for (pid_t p : g_started) ::kill(-p, SIGKILL);
  kill_mentioning(g_dir);
  std::exit(1);
}

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// --- hostile bodies ------------------------------------------------------------------------

// A frame body: most are JSON-level mutations of a seed; some are broken at the byte level
// (cut short, bytes flipped, invalid UTF-8, not an object, deeply nested, huge).
class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}
  std::mt19937_64& rng() { return rng_; }
  // `raw_share`: one in raw_share bodies is broken at the byte level (0: never).
  std::string body(const json& seed, int raw_share) {
    if (raw_share > 0 && rng_() % raw_share == 0) return raw(dump(seed));
    return dump(mutated(seed, rng_));
  }
  std::string raw(std::string s) {
    switch (rng_() % 9) {
      case 0:
        return s.substr(0, rng_() % (s.size() + 1));  // cut short
      case 1:
        for (int i = 0; i < 3 && !s.empty(); ++i)
          s[rng_() % s.size()] ^= static_cast<char>(1 + rng_() % 255);
        return s;  // bytes flipped
      case 2:
        return s.insert(s.size() / 2, "\xff\xfe\xc3");  // invalid UTF-8
      case 3:
        return "[1,2,3]";
      case 4:
        return std::string(1 + rng_() % 5000, '[');  // deeply nested
      case 5:
        return "{\"type\":\"" + std::string(200000, 'z') + "\"}";  // large
      case 6:
        return "null";
      case 7:
        return std::string("{\"type\":\"hello\",\"type\":5}");  // duplicate key
      default: {
        std::string r(1 + rng_() % 64, '\0');
        for (auto& c : r) c = static_cast<char>(rng_());
        return r;
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

// --- a non-blocking framed connection --------------------------------------------------------

class Peer {
 public:
  Peer() = default;
  explicit Peer(int fd) : fd_(fd) { setup(); }
  ~Peer() { reset(); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  static std::unique_ptr<Peer> dial(const std::string& host, int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return nullptr;
    }
    return std::make_unique<Peer>(fd);
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool open() const { return fd_ >= 0; }
  void queue(const std::string& framed) { out_ += framed; }
  void send(const json& m) { queue(frame(dump(m))); }
  std::size_t queued() const { return out_.size() - sent_; }
  // Writes what it can and reads what arrived, waiting up to `wait_ms` for either.
  // False once the connection is closed (by the peer, or for an error).
  bool pump(int wait_ms) {
    if (fd_ < 0) return false;
    pollfd p{fd_, static_cast<short>(POLLIN | (queued() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, wait_ms) < 0) return true;
    if (p.revents & (POLLOUT | POLLERR | POLLHUP)) {
      while (queued()) {
        const ssize_t n = ::send(fd_, out_.data() + sent_, queued(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          sent_ += static_cast<std::size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        reset();
        return false;
      }
      if (sent_ > (1u << 20)) {
        out_.erase(0, sent_);
        sent_ = 0;
      }
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      char buf[65536];
      for (;;) {
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          in_.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        reset();  // closed
        parse();
        return false;
      }
      parse();
    }
    return true;
  }
  // Sends everything queued; false when the connection closed first or `timeout_s` passed.
  bool flush(double timeout_s) {
    const auto t0 = Clock::now();
    while (queued()) {
      if (!pump(50) || seconds_since(t0) > timeout_s) return false;
    }
    return true;
  }
  // The next message whose type is `type` (others stay queued in messages()), or null.
  json await(const std::function<bool(const json&)>& pred, double timeout_s) {
    const auto t0 = Clock::now();
    for (;;) {
      for (auto it = msgs_.begin(); it != msgs_.end(); ++it)
        if (pred(*it)) {
          json m = std::move(*it);
          msgs_.erase(it);
          return m;
        }
      if (seconds_since(t0) > timeout_s) return json();
      if (!pump(50) && msgs_.empty()) return json();
    }
  }
  json await_type(const std::string& type, double timeout_s) {
    return await([&](const json& m) { return m.is_object() && m.value("type", "") == type; },
                 timeout_s);
  }
  std::deque<json>& messages() { return msgs_; }

 private:
  void setup() {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  void parse() {
    for (;;) {
      if (in_.size() < 4) return;
      const std::uint32_t n = (std::uint32_t(std::uint8_t(in_[0])) << 24) |
                              (std::uint32_t(std::uint8_t(in_[1])) << 16) |
                              (std::uint32_t(std::uint8_t(in_[2])) << 8) |
                              std::uint32_t(std::uint8_t(in_[3]));
      if (in_.size() < 4 + n) return;
      json m = json::parse(in_.begin() + 4, in_.begin() + 4 + n, nullptr, false);
      in_.erase(0, 4 + n);
      if (!m.is_discarded()) msgs_.push_back(std::move(m));
    }
  }
  int fd_ = -1;
  std::string out_;
  std::size_t sent_ = 0;
  std::string in_;
  std::deque<json> msgs_;
};

// The peer's side of the handshake; returns the welcome, or null when refused.
inline json authenticate(Peer& p, const std::string& token, const std::string& role,
                         const std::string& name) {
  live::PeerHandshake h(role, name);
  p.send(h.hello(live::kProtocolVersion));
  const json ch = p.await_type("challenge", 10);
  if (ch.is_null()) return json();
  auto answer = h.answer(token, live::decode_challenge(ch));
  if (!answer) return json();
  p.send(*answer);
  return p.await_type("welcome", 10);
}

inline std::string random_token() { return live::random_nonce(); }

inline void write_private(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
}

inline bool alive(pid_t p) { return p > 0 && ::waitpid(p, nullptr, WNOHANG) == 0; }

inline void kill_group(pid_t p) {
  if (p <= 0) return;
  ::kill(-p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

using faultline::testing::free_port;

struct Options {
  std::string target = "all";
  long frames = 1000000;
  std::uint64_t seed = 1;
  std::string dir;
  std::string faultline = FAULTLINE_BIN;
  std::string trainjob = TRAINJOB_BIN;
  std::string self;
};

// Steps in the job's loss log ("STEP LOSS" lines), the ground truth of what it trained.
inline long last_logged_step(const std::string& path) {
  std::ifstream in(path);
  long step = -1, s;
  std::string loss;
  while (in >> s >> loss) step = std::max(step, s);
  return step;
}

// The targets, each in its own file; 0 when every check held (a failure exits).
int fuzz_controller(const Options& o);
int fuzz_agent(const Options& o);
int rank_wrap(int argc, char** argv);
int fuzz_config(const Options& o);
int fuzz_journal(const Options& o);
int fuzz_rank_lines(const Options& o);

}  // namespace faultline::live_fuzz
