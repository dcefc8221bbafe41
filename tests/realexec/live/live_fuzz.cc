// The live-mode protocol fuzzer: generated and mutated frames, authenticated and not, sent
// to a real controller, to a real agent, and down a real agent's rank pipe, while the
// reference training job they manage keeps training. Run by ctest (label e2e) with the
// issue's million frames per target, and by hand for longer runs:
//
//   faultline_live_fuzz [--target controller|agent|config|journal|rank-pipe|all] [--frames N]
//   [--seed S]
//                       [--dir DIR]
//
// Each target is a deployment of its own, on loopback:
//   controller  `faultline live run` with two job machines and a standby (real agents, the
//               training job) and a second standby slot the fuzzer holds as an agent. It
//               sends: mutated hellos, handshakes and raw bytes on fresh connections; mutated
//               requests on an operator session and on a read-only session; mutated agent
//               messages (reports and exits of the running generation included) on its
//               authenticated agent session.
//   agent       `faultline agent` of one machine whose controller is the fuzzer: first a
//               rogue controller (challenges with wrong proofs, requests before any proof),
//               then the real handshake, a launch of the training job, and mutated requests.
//               The job's rank is this program in `rank-wrap` mode: it runs the training job
//               and passes its report lines on, interleaved with mutated and broken ones.
//   rank pipe   the lines `rank-wrap` writes (the agent target's deployment).
//   config, journal, rank-pipe (in process, first): mutated live configs to the config
//               loader, mutated journals to the journal reader, mutated report lines to the
//               rank-report parser; each must take the input or refuse it in one line naming
//               the file, never throw anything else or crash.
// After every batch a valid request must be answered (status by the controller, an inspect
// by the agent); at the end the process must be alive, the job must have trained through the
// fuzzing, the controller's progress must never run ahead of what the job logged, and the
// refusals must be noted without flooding the event log. One summary line per target; exit
// status 0 when every check held, 1 (with the reason) otherwise.
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
#include <climits>
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

#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "realexec/controller/journal.h"
#include "realexec/live_config.h"
#include "realexec/net/auth.h"
#include "realexec/net/messages.h"
#include "realexec/net/wire.h"
#include "tests/realexec/live/live_support.h"

namespace {

using nlohmann::json;
using namespace faultline::live_test;
namespace live = faultline::live;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Every process this program started (each the leader of its process group): a failure
// takes them all down with it, so nothing is left running for the next test.
std::vector<pid_t> g_started;

pid_t start(const std::vector<std::string>& argv, const std::string& out) {
  const pid_t p = spawn(argv, out);
  if (p > 0) g_started.push_back(p);
  return p;
}

// Kills every process whose command line mentions `dir`: ranks outlive their agent by
// design (an agent restart must not stop training), so killing the agents is not enough.
void kill_mentioning(const std::string& dir) {
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

std::string g_dir;  // the run's directory

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "faultline_live_fuzz: FAILED: %s (kept %s)\n", why.c_str(), g_dir.c_str());
  for (pid_t p : g_started) ::kill(-p, SIGKILL);
  kill_mentioning(g_dir);
  std::exit(1);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

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
json authenticate(Peer& p, const std::string& token, const std::string& role,
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

std::string random_token() { return live::random_nonce(); }

void write_private(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
}

bool alive(pid_t p) { return p > 0 && ::waitpid(p, nullptr, WNOHANG) == 0; }

void kill_group(pid_t p) {
  if (p <= 0) return;
  ::kill(-p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

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
long last_logged_step(const std::string& path) {
  std::ifstream in(path);
  long step = -1, s;
  std::string loss;
  while (in >> s >> loss) step = std::max(step, s);
  return step;
}

// --- target: controller ------------------------------------------------------------------------

struct EventLogView {
  long last_step = -1;
  long notes = 0;
  long refusal_notes = 0;
  bool parsed = true;
};

EventLogView read_events(const std::string& path) {
  EventLogView v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line, nullptr, false);
    if (!r.is_object()) {
      v.parsed = false;
      continue;
    }
    const std::string kind = r.value("kind", "");
    if (kind == "progress") v.last_step = std::max(v.last_step, r.value("step", -1L));
    if (kind == "note") {
      ++v.notes;
      const std::string t = r.value("text", "");
      if (t.find("refused") != std::string::npos) ++v.refusal_notes;
    }
  }
  return v;
}

int fuzz_controller(const Options& o) {
  const std::string dir = o.dir + "/controller";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string token = random_token(), status_token = random_token();
  write_private(dir + "/token", token);
  write_private(dir + "/status-token", status_token);
  const int port = free_port();
  auto machine = [&](const std::string& n) {
    return json{{"name", n}, {"addr", "127.0.0.1"}, {"workdir", dir + "/" + n}};
  };
  const json config{{"description", "faultline_live_fuzz: controller target"},
                    {"controller", "127.0.0.1:" + std::to_string(port)},
                    {"token_file", dir + "/token"},
                    {"status_token_file", dir + "/status-token"},
                    {"machines", {machine("m0"), machine("m1")}},
                    {"standby", {machine("s0"), machine("s1")}},
                    {"job",
                     {{"versions",
                       {{"v1",
                         {o.trainjob, "--seed", "7", "--hidden", "32", "--step-ms", "100",
                          "--loss-log", dir + "/loss.log"}}}},
                      {"master_port", free_port()},
                      {"nominal_step_time_s", 0.1},
                      {"replay_steps", 12}}},
                    {"policy",
                     {{"stack", "byterobust"},
                      {"params",
                       {{"stall_window_s", 30},
                        {"recrash_window_s", 5},
                        {"probe_deadline_s", 60},
                        {"standby_pool", 1}}}}},
                    {"seed", 7},
                    {"state_dir", dir + "/state"},
                    {"trainjob_bin", o.trainjob},
                    {"heartbeat_s", 0.5},
                    {"heartbeat_timeout_s", 10}};
  const std::string cfg = dir + "/live.json";
  std::ofstream(cfg) << config.dump(2);
  const pid_t ctl = start({o.faultline, "live", "run", cfg, "--fresh"}, dir + "/controller.log");
  std::vector<pid_t> agents;
  for (const char* n : {"m0", "m1", "s0"})
    agents.push_back(
        start({o.faultline, "agent", cfg, "--name", n}, dir + "/agent-" + std::string(n) + ".log"));
  struct Cleanup {
    std::vector<pid_t> pids;
    ~Cleanup() {
      for (pid_t p : pids) kill_group(p);
    }
  } cleanup{agents};
  cleanup.pids.push_back(ctl);
  const std::string events = dir + "/state/events.jsonl";
  const auto t_up = Clock::now();
  while (read_events(events).last_step < 5) {
    if (!alive(ctl))
      fail("controller target: the controller exited before the job trained (" + dir +
           "/controller.log)");
    if (seconds_since(t_up) > 90) fail("controller target: the job did not reach step 5 in 90 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const long step_before = read_events(events).last_step;
  const std::string host = "127.0.0.1";

  // Sessions: an operator, a read-only reader, and the standby slot s1 as an agent.
  auto admin = Peer::dial(host, port), reader = Peer::dial(host, port),
       agent = Peer::dial(host, port);
  if (!admin || authenticate(*admin, token, "client", "").is_null())
    fail("controller target: operator handshake");
  if (!reader || authenticate(*reader, status_token, "client-read", "").is_null())
    fail("controller target: read-only handshake");
  if (!agent || authenticate(*agent, token, "agent", "s1").is_null())
    fail("controller target: agent handshake as s1");

  Mutator mu(o.seed);
  auto& rng = mu.rng();
  const std::vector<json> client_seeds = {
      json{{"type", "status"}, {"req", 1}}, json{{"type", "stop"}, {"req", 2}},
      json{{"type", "inject"}, {"req", 3}, {"machine", "m1"}, {"fault", "kill"}, {"detail", "d"}},
      json{{"type", "update"}, {"req", 4}, {"version", "v1"}, {"urgent", true}}};
  const json hello = live::PeerHandshake("agent", "m0").hello(live::kProtocolVersion);
  const std::vector<json> pre_auth_seeds = {
      hello, live::PeerHandshake("client", "").hello(live::kProtocolVersion),
      json{{"type", "auth"},
           {"proof", std::string(64, 'a')},
           {"gen", 1},
           {"ranks", json::array({0})}},
      json{{"type", "status"}, {"req", 1}}};
  std::map<std::string, long> sent;  // frames by channel
  long total = 0, status_checks = 0, agent_reconnects = 0;
  std::int64_t next_req = 1000000;
  // Is the running generation's number known? Reports and exits of it are sent too: they
  // must not move the job (s1 runs none of its ranks).
  auto gen_now = [&]() -> std::int64_t {
    const json j = json::parse(slurp(dir + "/state/journal.json"), nullptr, false);
    return j.is_object() ? j.value("gen", 1L) : 1;
  };
  std::int64_t gen = gen_now();
  const auto t0 = Clock::now();
  auto check_status = [&](Peer& p, const char* who) {
    const std::int64_t req = next_req++;
    p.send(json{{"type", "status"}, {"req", req}});
    const json r = p.await(
        [&](const json& m) {
          return m.value("type", "") == "done" && m.value("req", json()) == req;
        },
        20);
    if (r.is_null())
      fail(std::string("controller target: the ") + who +
           " session got no answer to status after " + std::to_string(total) + " frames");
    if (!r.value("ok", false))
      fail(std::string("controller target: status refused on the ") + who +
           " session: " + r.dump());
    p.messages().clear();  // the refusals of the batch
    ++status_checks;
  };
  while (total < o.frames) {
    const int batch = 2000;
    // The operator session: mutated requests; one that would be obeyed (a valid stop,
    // inject or update) is not sent.
    for (int i = 0; i < batch; ++i) {
      const json m = mutated(client_seeds[rng() % client_seeds.size()], rng);
      try {
        const auto req = live::decode_client_request(m);
        if (!std::holds_alternative<live::StatusRequest>(req.body)) continue;
      } catch (const live::BadMessage&) {
      }
      admin->queue(frame(dump(m)));
      ++sent["operator"];
      ++total;
      if (admin->queued() > (256u << 10)) admin->pump(0);
    }
    if (!admin->flush(20))
      fail("controller target: the operator session was closed after " + std::to_string(total) +
           " frames");
    check_status(*admin, "operator");
    // The read-only session: anything, valid stops and injects included; none may act.
    for (int i = 0; i < batch / 4; ++i) {
      reader->queue(frame(mu.body(client_seeds[rng() % client_seeds.size()], 0)));
      ++sent["read-only"];
      ++total;
    }
    if (!reader->flush(20)) fail("controller target: the read-only session was closed");
    check_status(*reader, "read-only");
    // The agent session of s1: mutated agent messages, the running generation's included.
    if (total % 40000 < batch * 2) gen = gen_now();
    const std::vector<json> agent_seeds = {
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report",
              {{"type", "step"},
               {"rank", 0},
               {"step", 1000000},
               {"loss", 1.0},
               {"step_time_s", 0.1}}}},
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report", {{"type", "started"}, {"rank", 0}, {"step", 0}}}},
        json{{"type", "exit"},
             {"gen", gen},
             {"rank", 1},
             {"code", 1},
             {"signal", 0},
             {"signature", "x"}},
        json{{"type", "alert"}, {"kind", "nic"}, {"detail", "d"}},
        json{{"type", "done"}, {"req", 123456789}, {"ok", true}, {"rendezvous", "ok"}},
        json{{"type", "rendezvous"}, {"probe_req", 123456789}, {"blob", "464c525630303031"}},
        json{{"type", "heartbeat"}}};
    for (int i = 0; i < batch; ++i) {
      agent->queue(frame(mu.body(agent_seeds[rng() % agent_seeds.size()], 0)));
      ++sent["agent s1"];
      ++total;
      if (agent->queued() > (256u << 10)) agent->pump(0);
    }
    if (!agent->flush(20)) {
      // A controller may close a session that never answers its requests; an agent
      // reconnects, and so does this one.
      ++agent_reconnects;
      agent = Peer::dial(host, port);
      if (!agent || authenticate(*agent, token, "agent", "s1").is_null())
        fail("controller target: s1 could not reconnect after " + std::to_string(total) +
             " frames");
    }
    agent->messages().clear();  // the controller's requests to s1, unanswered
    // Unauthenticated: fresh connections, each with a few mutated first messages, broken
    // bytes or an impossible length.
    for (int c = 0; c < 10; ++c) {
      auto p = Peer::dial(host, port);
      if (!p)
        fail("controller target: a connection was not accepted after " + std::to_string(total) +
             " frames");
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < k; ++i) {
        const int pick = static_cast<int>(rng() % 20);
        if (pick == 0)
          p->queue(frame("{}", static_cast<std::uint32_t>(rng())));  // length beyond the limit
        else
          p->queue(frame(mu.body(pre_auth_seeds[rng() % pre_auth_seeds.size()], 4)));
        ++sent["unauthenticated"];
        ++total;
      }
      p->pump(0);
    }
    check_status(*admin, "operator");
    if (!alive(ctl))
      fail("controller target: the controller died after " + std::to_string(total) + " frames");
  }
  const double fuzz_s = seconds_since(t0);
  // Still in charge: it answers, the job trains on, progress never ran ahead of the job.
  const long step_after_fuzz = read_events(events).last_step;
  const auto t_train = Clock::now();
  while (read_events(events).last_step < step_after_fuzz + 20) {
    if (seconds_since(t_train) > 60)
      fail("controller target: the job did not train 20 more steps after the fuzzing");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  check_status(*admin, "operator");
  const EventLogView v = read_events(events);
  const long logged = last_logged_step(dir + "/loss.log");
  if (!v.parsed) fail("controller target: the event log has a line that is not a JSON object");
  if (v.last_step > logged + 1)
    fail("controller target: the controller's progress (step " + std::to_string(v.last_step) +
         ") ran ahead of the job's own log (step " + std::to_string(logged) +
         "): a forged report was believed");
  if (v.refusal_notes > 2000)
    fail("controller target: " + std::to_string(v.refusal_notes) +
         " refusal notes flood the event log");
  if (run_wait({o.faultline, "live", "stop", cfg}, dir + "/client.log") != 0)
    fail("controller target: live stop failed");
  kill_mentioning(dir);
  std::printf("controller: %ld frames in %.1f s (%.0f/s):", total, fuzz_s, total / fuzz_s);
  for (const auto& [k, n] : sent) std::printf(" %s %ld,", k.c_str(), n);
  std::printf(
      " %ld status checks answered, s1 reconnected %ld times; trained steps %ld -> %ld during the "
      "fuzzing,"
      " %ld after; %ld refusal notes\n",
      status_checks, agent_reconnects, step_before, step_after_fuzz, v.last_step, v.refusal_notes);
  return 0;
}

// --- target: agent (and its rank pipe) ---------------------------------------------------------

int accept_one(int listen_fd, double timeout_s) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
}

int fuzz_agent(const Options& o) {
  const std::string dir = o.dir + "/agent";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string token = random_token();
  write_private(dir + "/token", token);
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 16) != 0)
    fail("agent target: listen");
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  const long pipe_lines = o.frames;
  const std::string count_file = dir + "/rank-pipe-lines";
  const json config{
      {"description", "faultline_live_fuzz: agent target"},
      {"controller", "127.0.0.1:" + std::to_string(port)},
      {"token_file", dir + "/token"},
      {"machines", {{{"name", "a0"}, {"addr", "127.0.0.1"}, {"workdir", dir + "/a0"}}}},
      {"job",
       {{"versions",
         {{"v1",
           {o.self, "rank-wrap", std::to_string(pipe_lines), std::to_string(o.seed + 1), count_file,
            "--", o.trainjob, "--seed", "7", "--hidden", "32", "--step-ms", "50", "--loss-log",
            dir + "/loss.log"}}}},
        {"master_port", free_port()},
        {"nominal_step_time_s", 0.05}}},
      {"policy", {{"stack", "byterobust"}}},
      {"seed", 7},
      {"state_dir", dir + "/state"},
      {"trainjob_bin", o.trainjob},
      {"heartbeat_s", 0.5},
      {"heartbeat_timeout_s", 10}};
  const std::string cfg = dir + "/live.json";
  std::ofstream(cfg) << config.dump(2);
  const pid_t agent_pid = start({o.faultline, "agent", cfg, "--name", "a0"}, dir + "/agent.log");
  struct Cleanup {
    pid_t p;
    int fd;
    ~Cleanup() {
      kill_group(p);
      ::close(fd);
    }
  } cleanup{agent_pid, lfd};
  Mutator mu(o.seed);
  auto& rng = mu.rng();
  std::map<std::string, long> sent;
  long total = 0;

  // A rogue controller first: it cannot prove the token, so whatever it sends is refused
  // and the agent hangs up and redials.
  const std::vector<json> rogue_seeds = {
      json{{"type", "challenge"}, {"nonce", std::string(64, 'b')}, {"proof", std::string(64, 'c')}},
      json{{"type", "welcome"}, {"machine", "a0"}, {"role", "job"}},
      json{{"type", "launch"},
           {"req", 1},
           {"gen", 1},
           {"version", "v1"},
           {"world_size", 1},
           {"master_addr", "127.0.0.1"},
           {"master_port", 1234},
           {"ranks", {{{"rank", 0}, {"local_rank", 0}}}}},
      json{{"type", "shutdown"}, {"req", 2}}};
  for (int round = 0; round < 4; ++round) {
    const int fd = accept_one(lfd, 15);
    if (fd < 0)
      fail("agent target: the agent did not dial the rogue controller (round " +
           std::to_string(round) + ")");
    Peer p(fd);
    const json h = p.await_type("hello", 10);
    if (h.is_null()) fail("agent target: no hello from the agent");
    if (h.dump().find(token) != std::string::npos)
      fail("agent target: the hello carries the token");
    for (int i = 0; i < 50; ++i) {
      p.queue(frame(mu.body(rogue_seeds[rng() % rogue_seeds.size()], 5)));
      ++sent["rogue controller"];
      ++total;
    }
    p.flush(5);
    // Whatever the agent says back must not be a proof for this rogue's challenge.
    p.pump(200);
    for (const auto& m : p.messages())
      if (m.value("type", "") == "auth")
        fail("agent target: the agent answered a rogue controller's challenge");
  }
  if (!alive(agent_pid)) fail("agent target: the agent died under the rogue controller");

  // The real controller: handshake, welcome, the job launched.
  std::unique_ptr<Peer> conn;
  int reconnects = -1;
  std::int64_t next_req = std::int64_t{1} << 40;  // above every req the mutations write
  auto connect_agent = [&]() {
    const int fd = accept_one(lfd, 20);
    if (fd < 0)
      fail("agent target: the agent did not dial back after " + std::to_string(total) + " frames");
    conn = std::make_unique<Peer>(fd);
    const json h = conn->await_type("hello", 10);
    if (h.is_null()) fail("agent target: no hello");
    live::ControllerHandshake hs;
    conn->send(hs.challenge(token, live::decode_hello(h, live::kProtocolVersion)));
    const json au = conn->await_type("auth", 10);
    if (au.is_null() || !hs.verify(token, live::decode_auth(au)))
      fail("agent target: the agent's proof did not verify");
    conn->send(json{{"type", "welcome"}, {"machine", "a0"}, {"role", "job"}});
    ++reconnects;
    return au;
  };
  connect_agent();
  auto request = [&](json m, double timeout_s) {
    const std::int64_t req = next_req++;
    m["req"] = req;
    conn->send(m);
    return conn->await([&](const json& r) { return r.value("req", json()) == req; }, timeout_s);
  };
  const json launched = request(json{{"type", "launch"},
                                     {"gen", 1},
                                     {"version", "v1"},
                                     {"world_size", 1},
                                     {"master_addr", "127.0.0.1"},
                                     {"master_port", free_port()},
                                     {"ckpt_every", 10},
                                     {"ranks", {{{"rank", 0}, {"local_rank", 0}}}}},
                                30);
  if (!launched.value("ok", false)) fail("agent target: launch failed: " + launched.dump());
  long last_step = -1, reports = 0;
  auto take_reports = [&]() {
    for (const auto& m : conn->messages()) {
      if (m.value("type", "") == "exit") fail("agent target: the rank exited: " + m.dump());
      if (m.value("type", "") != "report" || m.value("gen", 0) != 1) continue;
      ++reports;
      // Every forwarded report must decode: junk from the pipe is never passed on.
      try {
        live::decode_agent_message(m);
      } catch (const live::BadMessage& e) {
        fail("agent target: the agent forwarded a report that does not decode (" + e.reason +
             "): " + m.dump());
      }
      const json& r = m["report"];
      if (r.value("type", "") == "step") last_step = std::max(last_step, r.value("step", -1L));
    }
    conn->messages().clear();
  };
  const auto t_start = Clock::now();
  while (last_step < 5) {
    conn->pump(100);
    take_reports();
    if (seconds_since(t_start) > 60) fail("agent target: the job did not reach step 5 in 60 s");
  }
  const long step_before = last_step;

  // Mutated requests of every type. One that would be obeyed and stop the job (a kill of the
  // running generation, a shutdown, an inject, a probe, capture or replay, a refusal) has one
  // of its required fields broken; so has a launch (one that decodes replaces the running
  // ranks: old ranks are killed before a launch).
  const std::vector<json> seeds = {
      json{{"type", "launch"},
           {"req", 1},
           {"gen", 2},
           {"version", "v1"},
           {"world_size", 1},
           {"master_addr", "127.0.0.1"},
           {"master_port", 1234},
           {"ranks", {{{"rank", 0}, {"local_rank", 0}}}}},
      json{{"type", "kill"}, {"req", 1}, {"gen", 7}},
      json{{"type", "inspect"}, {"req", 1}, {"kinds", {{"host", 30}}}},
      json{{"type", "probe"}, {"req", 1}, {"test", "bitwise"}, {"deadline_ms", 1000}},
      json{{"type", "capture"}, {"req", 1}, {"deadline_ms", 1000}},
      json{{"type", "replay"},
           {"req", 1},
           {"steps", 3},
           {"world_size", 1},
           {"rank", 0},
           {"master_addr", "127.0.0.1"},
           {"master_port", 1234},
           {"deadline_ms", 1000}},
      json{{"type", "inject"}, {"req", 1}, {"fault", "kill"}},
      json{{"type", "rendezvous"}, {"req", 1}, {"probe_req", 1}, {"blob", "464c525630303031"}},
      json{{"type", "probe"},
           {"req", 1},
           {"test", "inter_all_gather"},
           {"deadline_ms", 1000},
           {"rank", 1},
           {"world_size", 2},
           {"master_addr", "127.0.0.1"},
           {"master_port", 1234},
           {"rendezvous", true}},
      json{{"type", "shutdown"}, {"req", 1}},
      json{{"type", "welcome"}, {"machine", "a0"}, {"role", "job"}},
      json{{"type", "bogus"}, {"req", 1}}};
  auto defuse = [&](json& m) {
    if (!m.is_object()) return;
    const auto t = m.find("type");
    if (t == m.end() || !t->is_string()) return;
    const std::string type = *t;
    static const json bad_req[] = {-1, "1", 1.5, nullptr, json::array()};
    if (type == "kill") {
      auto g = m.find("gen");
      if (g == m.end() || (g->is_number_integer() && *g == 1)) m["gen"] = 7;
    } else if (type == "launch") {
      m["version"] = rng() & 1 ? json(5) : json("no-such-version");
    } else if (type == "shutdown" || type == "capture" || type == "refused") {
      m["req"] = bad_req[rng() % 5];
    } else if (type == "probe") {
      m["test"] = rng() & 1 ? json(5) : json("no-such-test");
    } else if (type == "replay") {
      m["steps"] = rng() & 1 ? json(0) : json("3");
    } else if (type == "inject") {
      m["fault"] = rng() & 1 ? json(nullptr) : json(std::string(40, 'f'));
    }
  };
  const auto t0 = Clock::now();
  long answered = 0;
  const long agent_frames = o.frames;
  long sent_to_agent = 0;
  while (sent_to_agent < agent_frames) {
    bool broke = false;
    for (int i = 0; i < 2000; ++i) {
      if (rng() % 20000 == 0) {
        // Broken bytes (a frame whose length or body lies): the stream cannot be trusted
        // after them, so this controller hangs up as a real one would after its request
        // timed out, and the agent must redial with its job intact (exercised rarely: a
        // redial waits out the agent's backoff).
        conn->queue(frame(mu.raw("{\"type\":\"inspect\"}")));
        broke = true;
      } else {
        json m = mutated(seeds[rng() % seeds.size()], rng);
        defuse(m);
        conn->queue(frame(dump(m)));
      }
      ++sent_to_agent;
      ++total;
      if (conn->queued() > (256u << 10)) {
        conn->pump(0);
        take_reports();
      }
    }
    sent["requests to the agent"] = sent_to_agent;
    bool ok = conn->flush(30);
    if (ok && broke) {
      conn->pump(200);
      take_reports();
      conn->reset();
      ok = false;
    }
    json r;
    if (ok) r = request(json{{"type", "inspect"}, {"kinds", json::object()}}, 30);
    take_reports();
    if (!ok || r.is_null()) {
      if (!alive(agent_pid))
        fail("agent target: the agent died after " + std::to_string(total) + " frames");
      const json au = connect_agent();  // it hung up (broken bytes): it redials
      const auto ranks = au.value("ranks", json::array());
      if (au.value("gen", 0) != 1 || ranks.size() != 1 || !ranks[0].is_object() ||
          ranks[0].value("rank", -1) != 0)
        fail("agent target: after redialling the agent no longer runs the job: " + au.dump());
      continue;
    }
    if (!r.value("ok", false)) fail("agent target: a valid inspect was refused: " + r.dump());
    ++answered;
  }
  const double fuzz_s = seconds_since(t0);
  // The rank pipe's own count, and the job still training.
  const auto t_wait = Clock::now();
  long pipe_written = 0;
  while (pipe_written < pipe_lines) {
    pipe_written = std::atol(slurp(count_file).c_str());
    conn->pump(100);
    take_reports();
    if (seconds_since(t_wait) > 120)
      fail("agent target: the rank wrote only " + std::to_string(pipe_written) + " hostile lines");
  }
  const long step_after_fuzz = last_step;
  const auto t_train = Clock::now();
  while (last_step < step_after_fuzz + 20) {
    conn->pump(100);
    take_reports();
    if (seconds_since(t_train) > 60) fail("agent target: the job did not train 20 more steps");
  }
  const long logged = last_logged_step(dir + "/loss.log");
  if (last_step > logged + 1) fail("agent target: a forwarded step ran ahead of the job's own log");
  if (!alive(agent_pid)) fail("agent target: the agent died");
  const json bye = request(json{{"type", "shutdown"}}, 30);
  if (!bye.value("ok", false)) fail("agent target: shutdown not acknowledged: " + bye.dump());
  int st = 0;
  for (int i = 0; i < 100 && ::waitpid(agent_pid, &st, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cleanup.p = -1;
  kill_mentioning(dir);
  std::printf(
      "agent: %ld frames in %.1f s (%.0f/s): rogue controller %ld, requests %ld (%ld inspects "
      "answered,"
      " %d redials); rank pipe: %ld hostile lines among %ld forwarded reports; trained steps %ld "
      "-> %ld"
      " during the fuzzing, %ld after\n",
      total, fuzz_s, total / std::max(fuzz_s, 1e-9), sent["rogue controller"], sent_to_agent,
      answered, reconnects, pipe_written, reports, step_before, step_after_fuzz, last_step);
  return 0;
}

// --- rank-wrap: the training job's rank behind a hostile pipe -----------------------------------

// rank-wrap LINES SEED COUNT_FILE -- JOB ARGS...: runs JOB with its own report pipe, passes each
// of its lines on to $FAULTLINE_REPORT_FD whole, and between them writes LINES hostile lines;
// writes the count so far to COUNT_FILE. Exits with the job's status.
int rank_wrap(int argc, char** argv) {
  if (argc < 7 || std::string(argv[5]) != "--") {
    std::fprintf(stderr,
                 "usage: faultline_live_fuzz rank-wrap LINES SEED COUNT_FILE -- JOB ARGS...\n");
    return 2;
  }
  const long lines = std::atol(argv[2]);
  Mutator mu(std::strtoull(argv[3], nullptr, 10));
  auto& rng = mu.rng();
  const std::string count_file = argv[4];
  const char* fd_env = std::getenv("FAULTLINE_REPORT_FD");
  if (!fd_env) return 2;
  const int out = std::atoi(fd_env);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return 1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(p[1], out);  // the job writes to the same descriptor number, now our pipe
    ::execv(argv[6], argv + 6);
    _exit(127);
  }
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  auto write_all = [&](const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::write(out, s.data() + off, s.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  };
  const std::vector<json> seeds = {
      json{{"type", "step"},
           {"rank", 0},
           {"step", 3},
           {"loss", 1.0},
           {"step_time_s", 0.1},
           {"grad_norm", 0.5}},
      json{{"type", "started"},
           {"rank", 0},
           {"step", 0},
           {"restored_from", "none"},
           {"version", "v1"},
           {"pid", 1}},
      json{{"type", "checkpoint"}, {"rank", 0}, {"checkpoint_step", 3}},
      json{{"type", "fatal"}, {"signature", "x"}}};
  std::string pending;  // the job's bytes not yet ending a line
  long written = 0;
  bool job_open = true;
  auto pass_on = [&]() {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(p[0], buf, sizeof buf);
      if (n > 0) {
        pending.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) job_open = false;
      break;
    }
    const auto nl = pending.rfind('\n');
    if (nl == std::string::npos) return;
    write_all(pending.substr(0, nl + 1));
    pending.erase(0, nl + 1);
  };
  while (job_open) {
    pass_on();
    if (written < lines) {
      std::string batch;
      for (int i = 0; i < 500 && written < lines; ++i, ++written) {
        std::string l;
        // A line that would be a valid report of the job's own (a step, a fatal) is not
        // junk: it is not sent.
        for (;;) {
          l = rng() % 10 == 0 ? mu.raw(dump(seeds[rng() % seeds.size()]))
                              : dump(mutated(seeds[rng() % seeds.size()], rng));
          l.erase(std::remove(l.begin(), l.end(), '\n'), l.end());
          try {
            live::parse_rank_report_line(l);
          } catch (const live::BadMessage&) {
            break;
          }
          if (rng() % 3 == 0) {
            l = "{\"type\":\"step\",\"step\":\"" + l.substr(0, 20) +
                "\"}";  // an unparseable neighbour instead
            break;
          }
        }
        if (rng() % 50 == 0) l = std::string(8000, 'x');  // over the line limit
        batch += l + "\n";
      }
      if (!write_all(batch)) break;
      if (written % 10000 < 500 || written >= lines) std::ofstream(count_file) << written << "\n";
    } else {
      pollfd pf{p[0], POLLIN, 0};
      ::poll(&pf, 1, 1000);
    }
  }
  int st = 0;
  ::waitpid(child, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// --- targets in process: the config loader, the journal reader, the rank-report parser ----

// One input derived from `seed`: byte-level damage (flips, cuts, repeats, inserts of the
// tokens that broke readers before: 1e999, repeated keys, deep nesting, bad UTF-8), or the
// JSON value retyped field by field (live_support.h's mutated()).
std::string mutate_text(const std::string& seed, std::mt19937_64& rng) {
  static const char* tokens[] = {"1e999",
                                 "-1e999",
                                 "1e-400",
                                 "-0",
                                 "NaN",
                                 "Infinity",
                                 "null",
                                 "true",
                                 "\"\"",
                                 "18446744073709551616",
                                 "-9223372036854775809",
                                 "[[[[[[[[[[[[[[[[",
                                 "}}}}",
                                 "\"heartbeat_s\": 1, \"heartbeat_s\": 2, ",
                                 "\"\\ud800\"",
                                 "\xff\xfe",
                                 "\"\\u0000\"",
                                 ",",
                                 ":",
                                 "{}",
                                 "[]",
                                 "\"machines\": [], "};
  std::string t = seed;
  if (rng() % 4 == 0) {
    const json j = json::parse(seed, nullptr, false);
    if (!j.is_discarded()) {
      json m = mutated(j, rng);
      // Down one level too: the config's job and machines, the journal's arrays.
      for (auto& [k, v] : m.items())
        if ((v.is_object() || v.is_array()) && rng() % 3 == 0 && !v.empty()) {
          if (v.is_object())
            v = mutated(v, rng);
          else
            v[rng() % v.size()] = mutated(json{{"x", v[0]}}, rng)["x"];
        }
      return m.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  for (int e = 1 + static_cast<int>(rng() % 4); e > 0 && !t.empty(); --e) {
    const std::size_t at = rng() % (t.size() + 1);
    switch (rng() % 6) {
      case 0:
        t[std::min(at, t.size() - 1)] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        t.erase(at, 1 + rng() % 16);
        break;
      case 2:
        t.insert(at, tokens[rng() % (sizeof tokens / sizeof *tokens)]);
        break;
      case 3:
        t.insert(at, t.substr(at, rng() % 64));
        break;
      case 4:
        t.resize(at);
        break;
      default:
        t.insert(at, 1, static_cast<char>(rng() % 256));
        break;
    }
  }
  return t;
}

// Feeds `frames` inputs to `read`, which returns true when the input was taken and false when
// it was refused in the documented way; anything else (another exception, a crash) fails.
int fuzz_in_process(const std::string& target, const std::vector<std::string>& seeds,
                    const Options& o, const std::function<bool(const std::string&)>& read) {
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ull + std::hash<std::string>{}(target));
  const auto t0 = Clock::now();
  long taken = 0;
  for (const auto& s : seeds)
    if (!read(s)) fail(target + " target: a valid seed was refused: " + s.substr(0, 200));
  for (long i = 0; i < o.frames; ++i) {
    const std::string in = mutate_text(seeds[rng() % seeds.size()], rng);
    try {
      taken += read(in);
    } catch (const std::exception& e) {
      fail(target + " target: input " + std::to_string(i) + " threw " + e.what() +
           " instead of a one-line refusal: " + in.substr(0, 300));
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s: %ld inputs in %.1f s (%.0f/s): %ld taken, %ld refused in one line\n",
              target.c_str(), o.frames, secs, o.frames / secs, taken, o.frames - taken);
  return 0;
}

int fuzz_config(const Options& o) {
  const auto registry = faultline::policies::builtin_registry();
  json machines =
      json::array({{{"name", "m0"}, {"addr", "127.0.0.1"}, {"workdir", "w/m0"}, {"nic", "eth0"}},
                   {{"name", "m1"}, {"gpu_pci", {"0000:17:00.0"}}}});
  const json full{
      {"description", "fuzz"},
      {"controller", "127.0.0.1:7700"},
      {"token_file", "token"},
      {"status_token_file", "status-token"},
      {"metrics_listen", "127.0.0.1:9464"},
      {"machines", machines},
      {"standby", json::array({{{"name", "s0"}, {"ssh", "ops@host"}}})},
      {"job",
       {{"versions", {{"v1", {"/bin/true", "--x"}}, {"v2", {"/bin/true"}}}},
        {"version", "v1"},
        {"gpus_per_machine", 1},
        {"nominal_step_time_s", 0.1},
        {"env", {{"A", "b"}}}}},
      {"policy",
       {{"stack", "byterobust"}, {"params", {{"standby_pool", 1}, {"localization", "bisection"}}}}},
      {"seed", 7},
      {"trainjob_bin", "/bin/true"},
      {"heartbeat_s", 0.5},
      {"heartbeat_timeout_s", 3},
      {"repair", {{"check_after_s", 1}, {"max_checks", 3}}},
      {"slurm_standby", {{"workdir", "/w/{node}"}}}};
  const json small{{"token_file", "t"},
                   {"machines", {{{"name", "a"}}}},
                   {"job", {{"versions", {{"v", {"x"}}}}}},
                   {"trainjob_bin", "t"}};
  return fuzz_in_process(
      "config", {full.dump(), full.dump(2), small.dump()}, o, [&](const std::string& text) {
        try {
          live::parse_live_config(text, "/fuzz/live.json", registry);
          return true;
        } catch (const live::LiveConfigError& e) {
          const std::string w = e.what();
          if (w.rfind("/fuzz/live.json: ", 0) != 0 || w.find('\n') != std::string::npos)
            fail("config target: an error that is not one line naming the file: " +
                 w.substr(0, 300));
          return false;
        }
      });
}

int fuzz_journal(const Options& o) {
  live::Journal writer(o.dir + "/fuzz-journal.json");
  auto& st = writer.state();
  st.origin_unix_ns = 1700000000000000000;
  st.gen = 3;
  st.version = "v1";
  st.good_version = "v1";
  st.running = true;
  st.slots = {0, 1, 2};
  st.standby = {3};
  st.evicted = {4};
  st.step_times = {0.1, 0.11};
  st.strikes = {{4, 2}};
  st.retired = {5};
  std::string err;
  if (!writer.save(&err)) fail("journal target: " + err);
  const std::string seed = slurp(o.dir + "/fuzz-journal.json");
  return fuzz_in_process("journal", {seed}, o, [](const std::string& text) {
    live::Journal j("/fuzz/journal.json");
    std::string why;
    const bool ok = j.parse(text, &why);
    if (!ok && (why.rfind("/fuzz/journal.json: ", 0) != 0 || why.find('\n') != std::string::npos))
      fail("journal target: an error that is not one line naming the file: " + why.substr(0, 300));
    return ok;
  });
}

int fuzz_rank_lines(const Options& o) {
  const std::vector<std::string> seeds = {
      R"({"type":"step","rank":0,"step":12,"loss":2.5,"grad_norm":1.0,"step_time_s":0.1})",
      R"({"type":"started","rank":1,"step":0})",
      R"({"type":"fatal","rank":0,"signature":"CUDA error: an illegal memory access was encountered"})",
      R"({"type":"checkpoint","rank":0,"step":20})", R"({"type": "step", "step": 2, "loss": NaN})"};
  return fuzz_in_process("rank-pipe", seeds, o, [](const std::string& line) {
    try {
      json parsed;
      live::parse_rank_report_line(line, &parsed);
      return true;
    } catch (const live::BadMessage&) {
      return false;
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "rank-wrap") return rank_wrap(argc, argv);
  Options o;
  o.self = fs::canonical("/proc/self/exe").string();
  long long frames = o.frames;
  faultline::cli::FlagTable flags("faultline_live_fuzz", "faultline_live_fuzz [options]");
  flags
      .choice("--target", "what to fuzz (default all)",
              {"controller", "agent", "config", "journal", "rank-pipe", "all"}, &o.target)
      .integer("--frames", "N", "N >= 1", "frames per target (default 1000000)", 1, LLONG_MAX,
               &frames)
      .value("--seed", "S", "an unsigned integer", "the seed (default 1)",
             [&o](const std::string& v) {
               long long x;
               if (!faultline::cli::parse_int(v, 0, LLONG_MAX, &x)) return false;
               o.seed = static_cast<std::uint64_t>(x);
               return true;
             })
      .text("--dir", "DIR", "work here and keep it (default: a temporary directory)", &o.dir)
      .text("--faultline", "BIN", "the faultline program", &o.faultline)
      .text("--trainjob", "BIN", "the training job", &o.trainjob);
  if (const int rc = flags.parse({argv + 1, argv + argc}); rc >= 0) return rc;
  o.frames = static_cast<long>(frames);
  const bool keep = !o.dir.empty();
  if (o.dir.empty())
    o.dir = (fs::temp_directory_path() / ("faultline-live-fuzz-" + std::to_string(::getpid())))
                .string();
  fs::create_directories(o.dir);
  g_dir = o.dir;
  std::printf("faultline_live_fuzz: seed %llu, %ld frames per target, in %s\n",
              static_cast<unsigned long long>(o.seed), o.frames, o.dir.c_str());
  std::fflush(stdout);
  const auto wanted = [&](const char* t) { return o.target == "all" || o.target == t; };
  if (wanted("config")) fuzz_config(o);
  if (wanted("journal")) fuzz_journal(o);
  if (wanted("rank-pipe")) fuzz_rank_lines(o);
  std::fflush(stdout);
  if (wanted("controller")) fuzz_controller(o);
  std::fflush(stdout);
  if (wanted("agent")) fuzz_agent(o);
  if (!keep) fs::remove_all(o.dir);
  return 0;
}
