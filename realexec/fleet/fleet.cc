// The virtual fleet: many unchanged Agents on a few reactors, their ranks faked (FakeHost),
// a fault storm, and the measurement of the controller's reaction to each fault. See
// fleet.h and docs/running-live.md ("At the size of your cluster").
#include "realexec/fleet/fleet.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "realexec/agent/agent.h"

namespace faultline::live {

using nlohmann::json;

namespace {

double mono_s() { return static_cast<double>(monotonic_now().ns) / 1e9; }
// The wall clock: the controller's run time is the wall time since its origin (journal.json's
// origin_unix_ns), so that live-storm.sh places injections on the event log's time line.
double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::atomic<pid_t> g_next_pid{4000000};
std::atomic<std::int64_t> g_step{0};  // the newest step rank 0 reported: where restarts resume
std::atomic<std::int64_t> g_gen{0};   // the newest generation launched: the job that runs
// A hung rank stalls its collectives, so every rank of its generation stops stepping (rank 0's
// step reports, the ones the controller reads for progress, stop too), until a restart.
std::atomic<std::int64_t> g_hung_gen{-1};

// The paced storm's state, shared by the reactors: faults left of each kind (a fixed order),
// the end of a hang's hold, the time of the last fault, the next fault id.
struct Paced {
  std::mutex mu;
  std::mutex inject_mu;  // one reactor injects at a time: a hang's hold is seen by the others
  std::vector<std::pair<std::string, int>> left;
  std::atomic<double> quiet_until{0};
  std::atomic<double> last_at{0};
  std::atomic<int> next_fid{0};
  double t0 = 0;  // the fleet's start (mono_s)
  std::vector<std::string> open_kinds() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& [kind, n] : left)
      if (n > 0) out.push_back(kind);
    return out;
  }
  void take(const std::string& kind, int n) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [k, m] : left)
      if (k == kind) m -= n;
    last_at = mono_s();
  }
  bool finished(double now, double settle_s) {
    return open_kinds().empty() && now - last_at.load() >= settle_s;
  }
};
Paced g_paced;

// What the fleet injected and what the controller did about it, from every reactor.
class Recorder {
 public:
  explicit Recorder(const std::string& out_file) {
    if (!out_file.empty()) out_.open(out_file, std::ios::trunc);
  }
  // A fault on `machine`; `awaits`: the controller is expected to stop the job for it.
  // `extra`: the paced storm's fault id (fid) and, for a NaN, the step that reports it.
  void inject(const std::string& fault, const std::string& machine, int id, bool awaits,
              const std::string& signature = "", const json& extra = json::object()) {
    std::lock_guard<std::mutex> lock(mu_);
    const double t = mono_s();
    ++faults_;
    if (awaits) pending_.push_back({fault, t});
    json j = {{"kind", "inject"}, {"fault", fault},   {"machine", machine},     {"id", id},
              {"t", t},           {"wall", wall_s()}, {"signature", signature}, {"awaits", awaits}};
    j.update(extra);
    write(j);
  }
  // The first kill request the agent of fault `fid`'s machine received after the fault: a
  // job-wide stop as its agent sees it.
  void kill_seen(int fid, const std::string& machine) {
    std::lock_guard<std::mutex> lock(mu_);
    write({{"kind", "kill_seen"},
           {"fid", fid},
           {"machine", machine},
           {"t", mono_s()},
           {"wall", wall_s()}});
  }
  // A request the controller sent an agent: a `kill` is its first action on a fault (StopJob).
  void request(const std::string& type) {
    if (type != "kill") return;
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) return;
    const double t = mono_s();
    for (const auto& p : pending_) {
      (p.fault == "hang" ? hang_s_ : decision_s_).push_back(t - p.t);
      write({{"kind", "decision"}, {"fault", p.fault}, {"latency_s", t - p.t}});
    }
    pending_.clear();
  }
  void storm_over() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!over_) write({{"kind", "storm_over"}, {"t", mono_s()}, {"wall", wall_s()}});
    over_ = true;
  }
  void heartbeat_gap(double s) {
    std::lock_guard<std::mutex> lock(mu_);
    herd_s_ = std::max(herd_s_, s);
  }
  json summary(int agents) {
    std::lock_guard<std::mutex> lock(mu_);
    json j = {{"agents", agents},
              {"faults", faults_},
              {"decisions", decision_s_.size()},
              {"undecided", pending_.size()},
              {"decision_p50_s", quantile(decision_s_, 0.5)},
              {"decision_p99_s", quantile(decision_s_, 0.99)},
              {"hang_detect_p50_s", quantile(hang_s_, 0.5)},
              {"reconnect_max_s", herd_s_}};
    return j;
  }

 private:
  struct Pending {
    std::string fault;
    double t;
  };
  static double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }
  void write(const json& j) {
    if (out_.is_open()) out_ << j.dump() << "\n" << std::flush;
  }
  std::mutex mu_;
  std::ofstream out_;
  std::uint64_t faults_ = 0;
  std::vector<Pending> pending_;
  std::vector<double> decision_s_, hang_s_;
  double herd_s_ = 0;
  bool over_ = false;
};

// The real output of a deterministic trainjob run (the bit-wise test: the controller checks
// its hash against a reference run of its own), run once per argv and shared.
std::string real_output(const std::vector<std::string>& argv) {
  static std::mutex mu;
  static std::map<std::vector<std::string>, std::string> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(argv);
  if (it != memo.end()) return it->second;
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  std::string out;
  if (FILE* p = ::popen((cmd + "2>/dev/null").c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return memo[argv] = out;
}

// An agent's host without processes: a rank is a timer writing step reports on the agent's
// report socket, it dies when signalled, and every probe or replay passes at once.
class FakeHost final : public AgentHost {
 public:
  FakeHost(Reactor& r, Recorder& rec, double step_s) : r_(r), rec_(rec), step_s_(step_s) {}

  bool spawn_rank(const SpawnSpec& spec, Spawned* out, std::string* err) override {
    auto it = spec.extra_fds.find(3);
    const int fd = it == spec.extra_fds.end() ? -1 : ::fcntl(it->second, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      *err = "fake rank: no report socket";
      return false;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    Rank rk;
    rk.fd = fd;
    rk.rank = env_int(spec.env, "RANK=");
    rk.gen = env_int(spec.env, "FAULTLINE_GEN=");
    rk.spawned = monotonic_now();
    for (std::int64_t g = g_gen.load(); g < rk.gen && !g_gen.compare_exchange_weak(g, rk.gen);) {
    }
    rk.step = g_step.load();
    const pid_t pid = g_next_pid++;
    ranks_[pid] = rk;
    out->pid = pid;
    out->stderr_fd = -1;
    write_line(ranks_[pid], "{\"type\":\"started\",\"rank\":" + std::to_string(rk.rank) +
                                ",\"step\":" + std::to_string(rk.step) +
                                ",\"pid\":" + std::to_string(pid) + "}");
    tick(pid);
    return true;
  }
  int stack_dump_fd(const std::string&) override { return -1; }
  void watch_rank(Reactor&, pid_t pid, std::function<void(int)> on_exit) override {
    if (auto it = ranks_.find(pid); it != ranks_.end()) it->second.on_exit = std::move(on_exit);
  }
  void signal_group(pid_t pid, int sig) override { kill_group(pid, sig); }
  void kill_group(pid_t pid, int sig) override {
    auto it = ranks_.find(pid);
    if (it == ranks_.end()) return;
    if (sig == SIGSTOP) {
      it->second.hung = true;
    } else if (sig == SIGCONT) {
      it->second.hung = false;
    } else if (sig != 0) {
      die(pid, sig);  // wait status of a death by `sig`
    }
  }
  std::shared_ptr<ChildRun> run(Reactor& r, SpawnSpec spec, Duration,
                                std::function<void(const ChildResult&)> done) override {
    const bool bitwise = spec.argv.size() > 2 && spec.argv[2] == "bitwise";
    std::string out = bitwise ? real_output(spec.argv)
                              : "{\"verdict\":\"pass\",\"hash\":\"fleet\",\"seconds\":0.001}\n";
    r.add_timer(Duration::millis(5), [done, out] {
      ChildResult res;
      res.started = true;
      res.out = out;
      done(res);
    });
    return nullptr;
  }
  int dial(const std::string& host, int port, std::string* err) override {
    if (monotonic_now() < cut_until_) {
      *err = "partitioned by the fleet's storm";
      return -1;
    }
    fd_ = connect_tcp(host, port, err);
    local_port_ = fd_ >= 0 ? local_port(fd_) : -1;
    return fd_;
  }
  void on_request(const std::string& type) override {
    if (type == "kill") {
      last_kill_ = monotonic_now();
      for (int fid : watch_) rec_.kill_seen(fid, name_);
      watch_.clear();
      if (holds_) g_paced.quiet_until = 0;  // the hang was acted on: the storm goes on
      holds_ = false;
    }
    rec_.request(type);
  }
  void set_name(const std::string& name) { name_ = name; }
  // A fault on this machine whose decision reaches its agent as a kill (crash, hang, NaN);
  // `hold`: the storm waits for it.
  void watch(int fid, bool hold) {
    watch_.push_back(fid);
    holds_ = holds_ || hold;
  }

  // Faults.
  // Ranks of the job that runs now (not leftovers of an older generation on a machine the
  // controller could not reach).
  bool has_ranks() const {
    for (const auto& [pid, rk] : ranks_)
      if (running(rk)) return true;
    return false;
  }
  void crash(const std::string& signature) {
    for (auto& [pid, rk] : ranks_) {
      if (!running(rk)) continue;
      write_line(rk, json{{"type", "fatal"}, {"rank", rk.rank}, {"signature", signature}}.dump());
      die(pid, 1 << 8);  // exit code 1
      return;
    }
  }
  // `stall_all`: the job's other ranks stop with it (the paced storm; live-scale.sh's storm
  // keeps its figures comparable with the earlier runs, where only this machine stopped).
  void hang(bool stall_all) {
    for (auto& [pid, rk] : ranks_) rk.hung = true;
    if (stall_all) g_hung_gen = g_gen.load();
  }
  bool has_rank0() const {
    for (const auto& [pid, rk] : ranks_)
      if (running(rk) && rk.rank == 0) return true;
    return false;
  }
  // Rank 0 reports its next step now, with a NaN loss (as a data-parallel job's all-reduce
  // carries one rank's NaN gradient to every rank); returns that step, or -1 without rank 0.
  std::int64_t nan() {
    for (auto& [pid, rk] : ranks_) {
      if (!running(rk) || rk.rank != 0) continue;
      rk.nan = true;
      report(rk);
      return rk.step;
    }
    return -1;
  }
  bool cut() const { return monotonic_now() < cut_until_; }
  // Cut off from the network for `s` seconds: the connection is shut down, redials fail.
  void partition(double s) {
    cut_until_ = monotonic_now() + Duration::seconds(s);
    if (fd_ >= 0 && local_port(fd_) == local_port_) ::shutdown(fd_, SHUT_RDWR);
  }

 private:
  struct Rank {
    int fd = -1;
    int rank = 0;
    std::int64_t gen = 0;
    Instant spawned{};
    std::int64_t step = 0;
    bool hung = false;
    bool nan = false;
    std::uint64_t timer = 0;
    std::function<void(int)> on_exit;
  };
  // A rank of the job as it runs now: the newest generation, launched after this host's
  // last kill request (the controller's StopJob reaches every job machine) and stepping for a few
  // steps since (the start completed).
  bool running(const Rank& rk) const {
    return rk.gen == g_gen.load() && rk.spawned > last_kill_ &&
           monotonic_now() - rk.spawned > Duration::seconds(3 * step_s_);
  }
  static int env_int(const std::vector<std::string>& env, const std::string& key) {
    for (const auto& e : env)
      if (e.compare(0, key.size(), key) == 0) return std::atoi(e.c_str() + key.size());
    return 0;
  }
  static int local_port(int fd) {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return -2;
    return a.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port) : -3;
  }
  static void write_line(Rank& rk, std::string line) {
    line += '\n';
    if (rk.fd >= 0 && ::write(rk.fd, line.data(), line.size()) < 0) {
      // The agent is behind: a step report less, as from a rank whose pipe is full.
    }
  }
  void tick(pid_t pid) {
    ranks_[pid].timer = r_.add_timer(Duration::seconds(step_s_), [this, pid] {
      auto it = ranks_.find(pid);
      if (it == ranks_.end()) return;
      Rank& rk = it->second;
      if (!rk.hung && rk.gen != g_hung_gen.load()) report(rk);
      tick(pid);
    });
  }
  void report(Rank& rk) {
    ++rk.step;
    if (rk.rank == 0) g_step = rk.step;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "{\"type\":\"step\",\"rank\":%d,\"step\":%lld,%s,\"step_time_s\":%.3f}", rk.rank,
                  static_cast<long long>(rk.step),
                  rk.nan ? "\"loss\":null,\"loss_nan\":true" : "\"loss\":2.5", step_s_);
    rk.nan = false;
    write_line(rk, buf);
  }
  void die(pid_t pid, int status) {
    auto it = ranks_.find(pid);
    if (it == ranks_.end()) return;
    r_.cancel_timer(it->second.timer);
    if (it->second.fd >= 0) ::close(it->second.fd);
    auto cb = std::move(it->second.on_exit);
    ranks_.erase(it);
    if (cb) r_.defer([cb, status] { cb(status); });
  }

  Reactor& r_;
  Recorder& rec_;
  double step_s_;
  std::map<pid_t, Rank> ranks_;
  Instant cut_until_{};
  Instant last_kill_{};
  std::string name_;
  std::vector<int> watch_;
  bool holds_ = false;
  int fd_ = -1;
  int local_port_ = -1;
};

struct Fault {
  double at_s = 0;
  std::string kind;  // crash, hang, machine_loss, partition, slow
  std::uint64_t pick = 0;
  int seq = 0;
};

// The storm: one fault every `every` seconds from `start`, none in the quiet window (a
// controller restart by the script), the kind and the target drawn from the seed.
std::vector<Fault> storm(const FleetOptions& o) {
  std::vector<Fault> out;
  if (o.storm_seed == 0 || o.quota > 0) return out;  // no storm, or the paced one
  std::mt19937_64 rng(o.storm_seed);
  int seq = 0;
  for (double t = o.storm_start_s; t < o.duration_s - 10; t += o.storm_every_s) {
    const std::uint64_t draw = rng() % 100;
    const std::uint64_t pick = rng();
    if (o.quiet_at_s >= 0 && t >= o.quiet_at_s - o.storm_every_s &&
        t <= o.quiet_at_s + o.quiet_for_s)
      continue;
    const char* kind = draw < 35   ? "crash"
                       : draw < 45 ? "hang"
                       : draw < 60 ? "machine_loss"
                       : draw < 75 ? "partition"
                                   : "slow";
    out.push_back({t, kind, pick, seq++});
  }
  return out;
}

// One reactor and its share of the agents.
class Shard {
 public:
  struct Slot {
    std::string name;
    int id = 0;
    std::shared_ptr<FakeHost> host;
    std::unique_ptr<Agent> agent;
    bool down = false;
  };
  Shard(const LiveConfig& config, const FleetOptions& o, Recorder& rec, double step_s, int index)
      : config_(config), o_(o), rec_(rec), step_s_(step_s), rng_(o.storm_seed * 1000 + index) {}
  void add(const std::string& name, int id) {
    Slot s;
    s.name = name;
    s.id = id;
    boot(s);
    slots_.push_back(std::move(s));
  }
  void run(const std::vector<Fault>& faults) {
    for (auto& s : slots_) s.agent->start();
    for (const auto& f : faults) r_.add_timer(Duration::seconds(f.at_s), [this, f] { inject(f); });
    if (o_.quota > 0) r_.add_timer(Duration::seconds(o_.storm_start_s), [this] { pace(); });
    r_.add_timer(Duration::seconds(o_.duration_s), [this] { r_.stop(); });
    r_.run();
  }

 private:
  // A machine (re)boots: a fresh host and its agent (started by the caller).
  void boot(Slot& s) {
    if (s.host) retired_.push_back(s.host);  // its ranks' timers still refer to it
    s.host = std::make_shared<FakeHost>(r_, rec_, step_s_);
    s.host->set_name(s.name);
    const std::string name = s.name;
    AgentOptions ao;
    ao.sysfs_root = "/nonexistent";
    ao.kmsg_path = "/nonexistent/kmsg";
    ao.host = s.host;
    if (o_.verbose) {
      ao.log = [name](const std::string& line) { std::cerr << name << ": " << line << "\n"; };
    } else {
      ao.log = [](const std::string&) {};
    }
    ao.on_finish = [this](int) {
      if (++finished_ >= static_cast<int>(slots_.size())) r_.stop();
    };
    s.agent = std::make_unique<Agent>(r_, config_, name, o_.token, std::move(ao));
  }

  // The paced storm (FleetOptions::quota), checked every 100 ms on this reactor.
  void pace() {
    const double now = mono_s();
    // The storm is over: the agents stay, so that the controller can be stopped first (its
    // agents vanishing would be a storm of their own).
    if (g_paced.finished(now, o_.settle_s)) return rec_.storm_over();
    const double rel = now - g_paced.t0;
    const bool quiet = o_.quiet_at_s >= 0 && rel >= o_.quiet_at_s - 2 * o_.gap_max_s &&
                       rel <= o_.quiet_at_s + o_.quiet_for_s;
    if (now >= next_at_ && !quiet) {
      std::unique_lock<std::mutex> lock(g_paced.inject_mu);
      // Faults of both reactors at least 0.3 s apart, but for the deliberate overlaps.
      if (now >= g_paced.quiet_until.load() && now - g_paced.last_at.load() >= 0.3) {
        const bool second = uniform(0, 1) < o_.overlap;
        if (inject_next(!second)) {
          next_at_ = now + uniform(o_.gap_min_s, o_.gap_max_s);
          if (second) r_.add_timer(Duration::seconds(uniform(0.05, 0.5)), [this] { overlap(); });
        }
      }
      lock.unlock();
      if (stall_s_ > 0) ::usleep(static_cast<useconds_t>(stall_s_ * 1e6));  // a slow host
      stall_s_ = 0;
    }
    r_.add_timer(Duration::millis(100), [this] { pace(); });
  }
  // A second fault while the first is handled.
  void overlap() {
    {
      std::lock_guard<std::mutex> lock(g_paced.inject_mu);
      inject_next(false);
    }
    if (stall_s_ > 0) ::usleep(static_cast<useconds_t>(stall_s_ * 1e6));
    stall_s_ = 0;
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng_() % 1000000) / 1e6;
  }
  // The next fault: a kind with faults left, drawn, or the next one that has a target here.
  bool inject_next(bool hold) {
    const std::vector<std::string> kinds = g_paced.open_kinds();
    if (kinds.empty()) return false;
    const std::size_t first = rng_() % kinds.size();
    const std::uint64_t pick = rng_();
    for (std::size_t i = 0; i < kinds.size(); ++i)
      if (paced(kinds[(first + i) % kinds.size()], pick, hold)) return true;
    return false;
  }
  bool paced(const std::string& kind, std::uint64_t pick, bool hold) {
    if (kind == "slow") {
      const int fid = g_paced.next_fid++;
      rec_.inject("slow", "shard", -1, false, "", {{"fid", fid}});
      g_paced.take(kind, 1);
      stall_s_ = o_.slow_s;  // after the lock: the other reactor's agents are not slow
      return true;
    }
    Slot* s = kind == "nan" ? rank0() : target(pick, true);
    if (s == nullptr) return false;
    if (kind == "partition") return partition_rack(*s);
    const int fid = g_paced.next_fid++;
    json extra = {{"fid", fid}};
    std::string sig;
    if (kind == "crash") sig = "fleet fault " + std::to_string(fid) + ": crash on " + s->name;
    if (kind == "nan") extra["step"] = s->host->nan();
    rec_.inject(kind, s->name, s->id, true, sig, extra);
    g_paced.take(kind, 1);
    if (kind == "machine_loss") return lose(*s);
    s->host->watch(fid, kind == "hang" && hold);
    if (kind == "crash") s->host->crash(sig);
    if (kind == "hang") {
      if (hold) g_paced.quiet_until = mono_s() + o_.hang_hold_s;
      s->host->hang(true);
    }
    return true;
  }
  Slot* rank0() {
    for (auto& s : slots_)
      if (!s.down && !s.host->cut() && s.agent->connected() && s.host->has_rank0()) return &s;
    return nullptr;
  }
  // The machine and its agent vanish; it boots again (a fresh agent, no ranks) later.
  bool lose(Slot& s) {
    s.down = true;
    s.agent.reset();
    Slot* p = &s;
    r_.add_timer(Duration::seconds(o_.revive_s), [this, p] {
      boot(*p);
      p->down = false;
      p->agent->start();
    });
    return true;
  }
  // `rack` neighbours of `s` (on this reactor) lose their connections for partition_s.
  bool partition_rack(Slot& s) {
    const std::size_t first = static_cast<std::size_t>(&s - slots_.data()) / o_.rack * o_.rack;
    int n = 0;
    for (std::size_t i = first; i < std::min(slots_.size(), first + o_.rack); ++i) {
      Slot& x = slots_[i];
      if (x.down || !x.agent->connected()) continue;
      rec_.inject("partition", x.name, x.id, x.host->has_ranks(), "",
                  {{"fid", g_paced.next_fid++}});
      x.host->partition(o_.partition_s);
      ++n;
    }
    g_paced.take("partition", n);
    return n > 0;
  }

  // A live slot with ranks (crash, hang) or any live slot, from `pick` on; null: none.
  Slot* target(std::uint64_t pick, bool with_ranks) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[(pick + i) % slots_.size()];
      if (!s.down && !s.host->cut() && s.agent->connected() && (!with_ranks || s.host->has_ranks()))
        return &s;
    }
    return nullptr;
  }
  void inject(const Fault& f) {
    if (f.kind == "slow") {
      // The whole host stalls (a checkpoint save, swapping): heartbeats late, within the timeout.
      rec_.inject("slow", "shard", -1, false);
      ::usleep(static_cast<useconds_t>(o_.slow_s * 1e6));
      return;
    }
    Slot* s = target(f.pick, f.kind == "crash" || f.kind == "hang");
    if (s == nullptr) return;
    if (f.kind == "crash") {
      const std::string sig = "fleet crash " + std::to_string(f.seq) + " on " + s->name;
      rec_.inject("crash", s->name, s->id, true, sig);
      s->host->crash(sig);
    } else if (f.kind == "hang") {
      rec_.inject("hang", s->name, s->id, true);
      s->host->hang(false);
    } else if (f.kind == "machine_loss") {
      rec_.inject("machine_loss", s->name, s->id, s->host->has_ranks());
      s->down = true;
      s->agent.reset();  // its connection and its ranks go with it
    } else {
      // A rack: `rack` neighbours lose their connections and cannot redial for a while.
      const std::size_t first = static_cast<std::size_t>(s - slots_.data()) / o_.rack * o_.rack;
      bool awaits = false;
      for (std::size_t i = first; i < std::min(slots_.size(), first + o_.rack); ++i)
        awaits |= !slots_[i].down && slots_[i].host->has_ranks();
      for (std::size_t i = first; i < std::min(slots_.size(), first + o_.rack); ++i) {
        if (slots_[i].down) continue;
        rec_.inject("partition", slots_[i].name, slots_[i].id, awaits && i == first);
        slots_[i].host->partition(o_.partition_s);
      }
    }
  }

  Reactor r_;
  const LiveConfig& config_;
  const FleetOptions& o_;
  Recorder& rec_;
  double step_s_;
  std::vector<Slot> slots_;
  std::vector<std::shared_ptr<FakeHost>> retired_;
  std::mt19937_64 rng_;
  double next_at_ = 0;
  double stall_s_ = 0;
  int finished_ = 0;
};

void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int run_fleet(const FleetOptions& o) {
  LiveConfig config;
  try {
    config = load_live_config(o.config_file, policies::builtin_registry());
  } catch (const std::exception& e) {
    std::cerr << "faultline fleet: " << e.what() << "\n";
    return 2;
  }
  std::vector<std::pair<std::string, int>> names;
  for (const auto& m : config.machines) names.emplace_back(m.name, static_cast<int>(names.size()));
  for (const auto& m : config.standby) names.emplace_back(m.name, static_cast<int>(names.size()));
  const int n = static_cast<int>(names.size());
  const int count = o.count > 0 ? o.count : n - o.first;
  if (o.first < 0 || o.first >= n || count < 1 || o.first + count > n) {
    std::cerr << "faultline fleet: --first/--count: expected a range within the config's " << n
              << " machines\n";
    return 2;
  }
  FleetOptions opts = o;
  if (opts.token.empty()) {
    std::string err;
    if (!load_token(config.token_file, &opts.token, &err)) {
      std::cerr << "faultline fleet: " << err << "\n";
      return 2;
    }
  }
  raise_fd_limit();
  ::signal(SIGPIPE, SIG_IGN);
  Recorder rec(o.out_file);
  const double step_s = config.job.nominal_step_time_s > 0 ? config.job.nominal_step_time_s : 1;
  const int threads = std::max(1, std::min(o.threads, count));
  std::vector<std::unique_ptr<Shard>> shards;
  for (int t = 0; t < threads; ++t)
    shards.push_back(std::make_unique<Shard>(config, opts, rec, step_s, t));
  g_paced.t0 = mono_s();
  if (o.quota > 0)
    for (const char* k : {"crash", "hang", "nan", "machine_loss", "partition", "slow"})
      g_paced.left.emplace_back(k, o.quota);
  for (int i = 0; i < count; ++i)
    shards[static_cast<std::size_t>(i % threads)]->add(names[o.first + i].first,
                                                       names[o.first + i].second);
  std::vector<std::vector<Fault>> per(static_cast<std::size_t>(threads));
  for (const auto& f : storm(opts)) per[static_cast<std::size_t>(f.seq % threads)].push_back(f);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back([&, t] { shards[t]->run(per[static_cast<std::size_t>(t)]); });
  for (auto& th : running) th.join();
  std::cout << rec.summary(count).dump() << std::endl;
  return 0;
}

namespace {

// The fleet's table: CONFIG into o->config_file, every option a number >= 0 that `set` stores
// (as the old parser: counts are truncated, some clamped).
cli::FlagTable fleet_table(FleetOptions* o) {
  cli::FlagTable t("faultline-live fleet", "faultline-live fleet CONFIG [options]",
                   "Runs K virtual agents (machines N.. of CONFIG, standbys after the job's "
                   "machines) with\nfake ranks against the controller of CONFIG, injects a fault "
                   "storm when --storm is\ngiven (with --quota N: N faults of every kind, paced, "
                   "each with an id: live-storm.sh),\nand prints a JSON summary line "
                   "(docs/running-live.md, docs/live-scale.md).");
  t.positional(&o->config_file);
  const auto number = [&t](const char* name, const char* arg, const char* help,
                           std::function<void(double)> set) {
    t.value(name, arg, "a number >= 0", help, [set](const std::string& v) {
      double x;
      if (!cli::parse_double(v, 0, HUGE_VAL, &x)) return false;
      set(x);
      return true;
    });
  };
  const auto count = [](int* out) { return [out](double x) { *out = static_cast<int>(x); }; };
  const auto seconds = [](double* out) { return [out](double x) { *out = x; }; };
  number("--first", "N", "the first machine (an index into machines, then standby)",
         count(&o->first));
  number("--count", "K", "how many agents (default: every machine from --first on)",
         count(&o->count));
  number("--threads", "T", "reactors, each with its share of the agents (default 1)",
         count(&o->threads));
  number("--duration", "S", "how long the fleet runs (default 60)", seconds(&o->duration_s));
  number("--storm", "SEED", "inject a fault storm of this seed (default 0: none)",
         [o](double x) { o->storm_seed = static_cast<std::uint64_t>(x); });
  number("--storm-start", "S", "the first fault, after the job is up (default 20)",
         seconds(&o->storm_start_s));
  number("--every", "S", "one fault this often (default 6, at least 0.1)",
         [o](double x) { o->storm_every_s = std::max(0.1, x); });
  number("--quiet-at", "S", "no fault within [S - every, S + quiet-for] (default: none)",
         seconds(&o->quiet_at_s));
  number("--quiet-for", "S", "how long that quiet window lasts (default 20)",
         seconds(&o->quiet_for_s));
  number("--partition-s", "S", "how long a partitioned rack cannot redial (default 8)",
         seconds(&o->partition_s));
  number("--rack", "N", "agents per rack; partitions take one rack (default 8, at least 1)",
         [o](double x) { o->rack = std::max(1, static_cast<int>(x)); });
  number("--slow-s", "S", "how long a slow host stalls its agents (default 2)",
         seconds(&o->slow_s));
  t.text("--out", "FILE", "injections and decisions, one JSON line each (default: none)",
         &o->out_file);
  number("--verbose", "N", "N > 0: the agents' log lines on stderr",
         [o](double x) { o->verbose = x > 0; });
  number("--quota", "N", "the paced storm (live-storm.sh): N faults of every kind",
         count(&o->quota));
  number("--overlap", "P", "the paced storm: a second fault follows with probability P (0.3)",
         [o](double x) { o->overlap = std::min(1.0, x); });
  number("--gap-min", "S", "the paced storm: the shortest gap between faults (1)",
         seconds(&o->gap_min_s));
  number("--gap-max", "S", "the paced storm: the longest gap (2.5, at least --gap-min)",
         [o](double x) { o->gap_max_s = std::max(o->gap_min_s, x); });
  number("--hang-hold", "S", "the paced storm: a hang holds the storm this long (15)",
         seconds(&o->hang_hold_s));
  number("--revive", "S", "the paced storm: a lost machine comes back after S (12)",
         seconds(&o->revive_s));
  number("--settle", "S", "the paced storm: the fleet ends S after the last fault (20)",
         seconds(&o->settle_s));
  return t;
}

}  // namespace

int fleet_main(const std::vector<std::string>& args) {
  FleetOptions o;
  const cli::FlagTable table = fleet_table(&o);
  if (const int rc = table.parse(args); rc >= 0) return rc;
  if (o.config_file.empty()) return table.usage_error("expected a CONFIG file");
  return run_fleet(o);
}

}  // namespace faultline::live
