// The agent: connection management, request validation and execution, rank
// supervision and host inspection, all on one reactor.
//
// Validation throws BadRequest inside a handler; on_message turns it into an `error`
// reply, so a malformed request never reaches a half-done state.
#include "realexec/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

namespace faultline::live {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxReportLine = 4096;
constexpr std::size_t kMaxStderrLine = 4096;
constexpr std::size_t kMaxSignature = 300;
constexpr std::int64_t kMaxReq = std::int64_t{1} << 53;
constexpr std::int64_t kMaxDeadlineMs = 3600 * 1000;
constexpr int kMaxLocalRanks = 1024;
constexpr std::size_t kMaxDirective = 200;
constexpr std::size_t kMaxChildren = 64;  // probes, replays, debuggers, `ip` at once

struct BadRequest {
  std::string reason;
};

[[noreturn]] void bad(const std::string& reason) { throw BadRequest{reason}; }

std::optional<std::int64_t> opt_int(const json& m, const char* key, std::int64_t lo,
                                    std::int64_t hi) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!it->is_number_integer()) bad(std::string(key) + ": expected an integer in " + range);
  std::int64_t v;
  if (it->is_number_unsigned()) {
    auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) {
      bad(std::string(key) + ": expected an integer in " + range + ", got " + std::to_string(u));
    }
    v = static_cast<std::int64_t>(u);
  } else {
    v = it->get<std::int64_t>();
  }
  if (v < lo || v > hi) {
    bad(std::string(key) + ": expected an integer in " + range + ", got " + std::to_string(v));
  }
  return v;
}

std::int64_t need_int(const json& m, const char* key, std::int64_t lo, std::int64_t hi) {
  auto v = opt_int(m, key, lo, hi);
  if (!v) bad(std::string(key) + ": missing (expected an integer)");
  return *v;
}

bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

std::optional<std::string> opt_string(const json& m, const char* key, std::size_t max_len) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  if (!it->is_string()) bad(std::string(key) + ": expected a string");
  std::string s = it->get<std::string>();
  if (s.size() > max_len) {
    bad(std::string(key) + ": expected at most " + std::to_string(max_len) + " characters");
  }
  if (!printable(s)) bad(std::string(key) + ": expected a single line of printable characters");
  return s;
}

std::string need_string(const json& m, const char* key, std::size_t max_len) {
  auto v = opt_string(m, key, max_len);
  if (!v) bad(std::string(key) + ": missing (expected a string)");
  return *v;
}

// A host name or address for MASTER_ADDR: letters, digits and . - _ : only.
std::string need_host(const json& m, const char* key) {
  std::string s = need_string(m, key, 253);
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
               c == ':';
      })) {
    bad(std::string(key) + ": expected a host name or IP address");
  }
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Whether a stderr line reads like the reason a rank failed.
bool looks_like_error(const std::string& line) {
  static const char* const kWords[] = {"error",
                                       "exception",
                                       "fatal",
                                       "abort",
                                       "panic",
                                       "terminate called",
                                       "segmentation fault",
                                       "assert",
                                       "failed",
                                       "traceback",
                                       "timed out",
                                       "timeout",
                                       "killed",
                                       "core dumped"};
  const std::string low = lower(line);
  for (const char* w : kWords) {
    if (low.find(w) != std::string::npos) return true;
  }
  return false;
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// The last line of `text` that parses as a JSON object, or null.
json last_json_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = text.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    std::string line = trim(text.substr(start, end - start));
    if (!line.empty() && line[0] == '{') {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_object()) return j;
    }
    if (start == 0) break;
    end = start - 1;
  }
  return nullptr;
}

std::string last_line(const std::string& text) {
  std::string last;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::string line =
        trim(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (!line.empty()) last = line;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (last.size() > kMaxSignature) last.resize(kMaxSignature);
  return last;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace

struct Agent::Rank {
  int rank = 0;
  int local_rank = 0;
  std::int64_t gen = 0;
  pid_t pid = -1;
  int report_fd = -1;  // our end of the socketpair (fd 3 in the rank)
  int stderr_fd = -1;  // read end of the rank's stderr pipe
  int log_fd = -1;     // logs/rank<r>.gen<g>.log, where stderr is copied
  std::string report_buf;
  bool report_skipping = false;  // inside an over-long report line
  int bad_reports = 0;
  std::string stderr_buf;
  std::string error_line;       // last stderr line that looked like an error
  std::string fatal_signature;  // from a `fatal` report
  bool killed_by_agent = false;
};

struct Agent::PendingKill {
  std::int64_t req = 0;
  std::uint64_t epoch = 0;
  Instant started;
  std::uint64_t timer = 0;
  bool shutdown = false;
};

Agent::Agent(Reactor& r, const LiveConfig& config, std::string name, std::string token,
             AgentOptions options)
    : r_(r),
      config_(config),
      name_(std::move(name)),
      token_(std::move(token)),
      options_(std::move(options)),
      backoff_(options_.backoff_min) {
  for (const auto* list : {&config_.machines, &config_.standby}) {
    for (const auto& m : *list) {
      if (m.name == name_) machine_ = &m;
    }
  }
  if (machine_ == nullptr) {
    throw LiveConfigError(config_.file + ": machines: no machine or standby named '" + name_ + "'");
  }
}

Agent::~Agent() {
  *alive_ = false;
  kill_all_ranks();
  for (auto& [rank, rk] : ranks_) close_rank_fds(*rk);
  for (auto& w : children_) {
    if (auto c = w.lock()) c->cancel();
  }
  for (auto& k : kills_) r_.cancel_timer(k->timer);
  for (auto& [kind, t] : inspect_timers_) r_.cancel_timer(t);
  if (redial_timer_) r_.cancel_timer(redial_timer_);
  if (heartbeat_timer_) r_.cancel_timer(heartbeat_timer_);
  conn_.reset();
}

void Agent::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "faultline agent " << name_ << ": " << line << std::endl;
  }
}

std::map<int, pid_t> Agent::rank_pids() const {
  std::map<int, pid_t> out;
  for (const auto& [rank, rk] : ranks_) out[rank] = rk->pid;
  return out;
}

void Agent::start() {
  // The workdir holds ckpt/, logs/ and the faults file; children run in it.
  if (!machine_->workdir.empty()) {
    for (const char* sub : {"", "/ckpt", "/logs"}) {
      std::error_code ec;
      std::filesystem::create_directories(machine_->workdir + sub, ec);
      if (ec) log("cannot create " + machine_->workdir + sub + ": " + ec.message());
    }
  }
  std::string err;
  if (!kmsg_.open(options_.kmsg_path, &err)) kmsg_error_ = err;
  heartbeat_tick();
  dial();
}

// ---------------------------------------------------------------------------------------
// Connection

void Agent::dial() {
  redial_timer_ = 0;
  if (finished_) return;
  std::string err;
  int fd = connect_tcp(config_.controller_host, config_.controller_port, &err);
  if (fd < 0) {
    log("cannot dial the controller: " + err);
    schedule_redial();
    return;
  }
  ++epoch_;
  welcomed_ = false;
  std::weak_ptr<bool> guard = alive_;
  Conn::Handlers h;
  h.on_message = [this, guard](const json& m) {
    if (guard.lock()) on_message(m);
  };
  h.on_close = [this, guard](const std::string& why) {
    if (guard.lock()) on_close(why);
  };
  conn_ = std::make_unique<Conn>(
      r_, fd, config_.controller_host + ":" + std::to_string(config_.controller_port), std::move(h),
      true);
  conn_->send(hello());
}

void Agent::schedule_redial() {
  if (finished_ || redial_timer_ != 0) return;
  std::weak_ptr<bool> guard = alive_;
  redial_timer_ = r_.add_timer(backoff_, [this, guard] {
    if (guard.lock()) dial();
  });
  backoff_ = std::min(backoff_ * 2, options_.backoff_max);
}

json Agent::hello() const {
  json ranks = json::array();
  for (const auto& [rank, rk] : ranks_) {
    ranks.push_back({{"rank", rk->rank}, {"local_rank", rk->local_rank}, {"pid", rk->pid}});
  }
  return {{"type", "hello"},           {"token", token_},   {"role", "agent"}, {"name", name_},
          {"proto", kProtocolVersion}, {"pid", ::getpid()}, {"gen", gen_},     {"ranks", ranks}};
}

void Agent::on_close(const std::string& why) {
  const bool was_welcomed = welcomed_;
  welcomed_ = false;
  conn_.reset();
  if (shutting_down_ || finished_) {
    finish(exit_code_);
    return;
  }
  log(std::string(was_welcomed ? "lost the controller: " : "no session with the controller: ") +
      why + "; retrying in " + fmt_seconds(backoff_.to_seconds()) + " s");
  schedule_redial();
}

void Agent::send(json msg, Delivery d) {
  if (welcomed_ && conn_ && conn_->is_open()) {
    conn_->send(msg);
    return;
  }
  if (d == Delivery::kQueue) {
    queued_.push_back(std::move(msg));
    if (queued_.size() > options_.max_queued_exits) {
      queued_.pop_front();
      log("dropped the oldest queued message: more than " +
          std::to_string(options_.max_queued_exits) + " waiting for the controller");
    }
  }
}

void Agent::heartbeat_tick() {
  if (welcomed_ && conn_) conn_->send({{"type", "heartbeat"}});
  double every = config_.heartbeat_s > 0.05 ? config_.heartbeat_s : 0.05;
  std::weak_ptr<bool> guard = alive_;
  heartbeat_timer_ = r_.add_timer(Duration::seconds(every), [this, guard] {
    if (guard.lock()) heartbeat_tick();
  });
}

void Agent::reply_done(std::uint64_t epoch, std::int64_t req, Instant started, json body) {
  if (epoch != epoch_ || !conn_ || !conn_->is_open()) {
    log("reply to request " + std::to_string(req) + " dropped: its connection is gone");
    return;
  }
  body["type"] = "done";
  body["req"] = req;
  if (!body.contains("ok")) body["ok"] = true;
  if (!body.contains("detail")) body["detail"] = "";
  body["duration_s"] = (r_.now() - started).to_seconds();
  conn_->send(body);
}

void Agent::reply_error(std::int64_t req, const std::string& reason) {
  log("invalid request " + (req >= 0 ? std::to_string(req) : std::string("?")) + ": " + reason);
  if (!conn_ || !conn_->is_open()) return;
  json e = {{"type", "error"}, {"reason", reason}};
  e["req"] = req >= 0 ? json(req) : json(nullptr);
  conn_->send(e);
}

void Agent::on_message(const json& m) {
  std::int64_t req = -1;
  std::string type;
  try {
    auto t = m.find("type");
    if (t == m.end() || !t->is_string()) bad("type: missing (expected a string)");
    type = t->get<std::string>();
    if (type == "welcome") {
      auto machine = opt_string(m, "machine", 256).value_or(name_);
      role_ = opt_string(m, "role", 32).value_or("");
      if (machine != name_) log("welcomed as '" + machine + "' but configured as '" + name_ + "'");
      welcomed_ = true;
      backoff_ = options_.backoff_min;
      log("connected to the controller as " + name_ + (role_.empty() ? "" : " (" + role_ + ")"));
      while (!queued_.empty() && conn_ && conn_->is_open()) {
        conn_->send(queued_.front());
        queued_.pop_front();
      }
      return;
    }
    if (type == "refused") {
      std::string reason = "(no reason given)";
      if (auto it = m.find("reason"); it != m.end() && it->is_string()) reason = *it;
      log("refused by the controller: " + reason);
      if (conn_) conn_->close("refused: " + reason);
      return;
    }
    if (auto v = opt_int(m, "req", 0, kMaxReq)) req = *v;
    if (req < 0) bad("req: missing (expected an integer)");
    if (!welcomed_) bad("request before welcome");
    if (type == "launch") return handle_launch(m, req);
    if (type == "kill") return handle_kill(m, req);
    if (type == "inspect") return handle_inspect(m, req);
    if (type == "probe") return handle_probe(m, req);
    if (type == "capture") return handle_capture(m, req);
    if (type == "replay") return handle_replay(m, req);
    if (type == "inject") return handle_inject(m, req);
    if (type == "shutdown") return handle_shutdown(m, req);
    bad("type: unknown message type '" + type.substr(0, 64) + "'");
  } catch (const BadRequest& e) {
    reply_error(req, (type.empty() ? "" : type + ": ") + e.reason);
  } catch (const std::exception& e) {
    // A runtime failure while executing a valid request (e.g. out of fds).
    reply_error(req, (type.empty() ? "" : type + ": ") + "agent failure: " + e.what());
  }
}

// ---------------------------------------------------------------------------------------
// Requests

std::map<std::string, std::string> Agent::base_env() const {
  std::map<std::string, std::string> env;
  env["FAULTLINE_MACHINE"] = name_;
  env["FAULTLINE_HOST_ADDR"] = machine_->addr;
  env["FAULTLINE_CKPT_DIR"] = machine_->workdir + "/ckpt";
  env["FAULTLINE_FAULT_FILE"] = machine_->workdir + "/faults";
  return env;
}

std::string Agent::child_cwd() const {
  std::error_code ec;
  if (!machine_->workdir.empty() && std::filesystem::is_directory(machine_->workdir, ec)) {
    return machine_->workdir;
  }
  return "";
}

void Agent::require_capacity() {
  children_.erase(std::remove_if(children_.begin(), children_.end(),
                                 [](const std::weak_ptr<ChildRun>& w) { return w.expired(); }),
                  children_.end());
  if (children_.size() + ranks_.size() >= kMaxChildren) {
    bad("busy: " + std::to_string(children_.size()) + " helper processes already running");
  }
}

void Agent::run_tracked(SpawnSpec spec, Duration deadline,
                        std::function<void(const ChildResult&)> done) {
  std::weak_ptr<bool> guard = alive_;
  auto child = run_child(r_, std::move(spec), deadline, [guard, done](const ChildResult& res) {
    if (guard.lock()) done(res);
  });
  children_.erase(std::remove_if(children_.begin(), children_.end(),
                                 [](const std::weak_ptr<ChildRun>& w) { return w.expired(); }),
                  children_.end());
  children_.push_back(child);
}

void Agent::handle_launch(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::int64_t gen = need_int(m, "gen", 0, kMaxReq);
  const std::string version = need_string(m, "version", 128);
  const std::int64_t world = need_int(m, "world_size", 1, 1 << 20);
  const std::string master_addr = need_host(m, "master_addr");
  const std::int64_t master_port = need_int(m, "master_port", 1, 65535);
  const std::int64_t ckpt_every = opt_int(m, "ckpt_every", 0, 1000000000).value_or(0);
  auto vit = config_.job.versions.find(version);
  if (vit == config_.job.versions.end() || vit->second.empty()) {
    bad("version: unknown code version '" + version + "'");
  }
  auto rit = m.find("ranks");
  if (rit == m.end() || !rit->is_array() || rit->empty() ||
      rit->size() > static_cast<std::size_t>(kMaxLocalRanks)) {
    bad("ranks: expected an array of 1.." + std::to_string(kMaxLocalRanks) +
        " {rank, local_rank} objects");
  }
  std::vector<std::pair<int, int>> wanted;  // (rank, local_rank)
  std::set<std::int64_t> seen_rank;
  std::set<std::int64_t> seen_local;
  for (const auto& e : *rit) {
    if (!e.is_object()) bad("ranks: expected {rank, local_rank} objects");
    std::int64_t rank = need_int(e, "rank", 0, world - 1);
    std::int64_t local = need_int(e, "local_rank", 0, kMaxLocalRanks - 1);
    if (!seen_rank.insert(rank).second) bad("ranks: rank " + std::to_string(rank) + " twice");
    if (!seen_local.insert(local).second) {
      bad("ranks: local_rank " + std::to_string(local) + " twice");
    }
    wanted.emplace_back(static_cast<int>(rank), static_cast<int>(local));
  }
  if (!ranks_.empty()) {
    bad("ranks of generation " + std::to_string(gen_) + " are still running; kill them first");
  }
  if (machine_->workdir.empty()) bad("machine " + name_ + " has no workdir in the config");
  std::error_code ec;
  for (const char* sub : {"/ckpt", "/logs"}) {
    std::filesystem::create_directories(machine_->workdir + sub, ec);
    if (ec) {
      reply_done(epoch_, req, started,
                 {{"ok", false},
                  {"detail", "cannot create " + machine_->workdir + sub + ": " + ec.message()}});
      return;
    }
  }

  gen_ = gen;
  json pids = json::object();
  std::string failure;
  std::weak_ptr<bool> guard = alive_;
  for (const auto& [rank, local] : wanted) {
    std::map<std::string, std::string> env = base_env();
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(world);
    env["LOCAL_RANK"] = std::to_string(local);
    env["LOCAL_WORLD_SIZE"] = std::to_string(wanted.size());
    env["MASTER_ADDR"] = master_addr;
    env["MASTER_PORT"] = std::to_string(master_port);
    env["FAULTLINE_CKPT_EVERY"] = std::to_string(ckpt_every);
    env["FAULTLINE_REPORT_FD"] = "3";
    env["FAULTLINE_GEN"] = std::to_string(gen);
    for (const auto& [k, v] : config_.job.env) env[k] = v;

    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
      failure = std::string("socketpair: ") + std::strerror(errno);
      break;
    }
    const std::string log_path = machine_->workdir + "/logs/rank" + std::to_string(rank) + ".gen" +
                                 std::to_string(gen) + ".log";
    SpawnSpec spec;
    spec.argv = vit->second;
    spec.env = make_env(env);
    spec.cwd = machine_->workdir;
    spec.stdout_to = Redirect::file(log_path);
    spec.stderr_to = Redirect::pipe();
    spec.extra_fds[3] = sp[1];
    Spawned out;
    std::string err;
    bool ok = spawn(spec, &out, &err);
    ::close(sp[1]);
    if (!ok) {
      ::close(sp[0]);
      failure = "rank " + std::to_string(rank) + ": " + err;
      break;
    }
    auto rk = std::make_unique<Rank>();
    rk->rank = rank;
    rk->local_rank = local;
    rk->gen = gen;
    rk->pid = out.pid;
    rk->report_fd = sp[0];
    rk->stderr_fd = out.stderr_fd;
    rk->log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    set_nonblocking(rk->report_fd);
    Rank* raw = rk.get();
    ranks_[rank] = std::move(rk);
    r_.add_fd(raw->report_fd, EPOLLIN, [this, raw](std::uint32_t) { on_rank_report(*raw); });
    if (raw->stderr_fd >= 0) {
      r_.add_fd(raw->stderr_fd, EPOLLIN, [this, raw](std::uint32_t) { on_rank_stderr(*raw); });
    }
    const int rank_id = rank;
    r_.watch_child(out.pid, [this, guard, rank_id](int status) {
      if (guard.lock()) on_rank_exit(rank_id, status);
    });
    pids[std::to_string(rank)] = out.pid;
  }
  if (!failure.empty()) {
    log("launch of generation " + std::to_string(gen) + " failed: " + failure);
    kill_all_ranks();  // their exits follow
    reply_done(epoch_, req, started, {{"ok", false}, {"detail", failure}, {"pids", pids}});
    return;
  }
  log("launched generation " + std::to_string(gen) + " (" + version +
      "): " + std::to_string(wanted.size()) + " ranks");
  reply_done(epoch_, req, started, {{"ok", true}, {"gen", gen}, {"pids", pids}});
}

void Agent::handle_kill(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  auto gen = opt_int(m, "gen", 0, kMaxReq);
  if (ranks_.empty() || (gen && *gen != gen_)) {
    reply_done(epoch_, req, started,
               {{"ok", true},
                {"detail", gen ? "no ranks of generation " + std::to_string(*gen) + " running"
                               : std::string("no ranks running")}});
    return;
  }
  kill_all_ranks();
  auto k = std::make_unique<PendingKill>();
  k->req = req;
  k->epoch = epoch_;
  k->started = started;
  PendingKill* raw = k.get();
  std::weak_ptr<bool> guard = alive_;
  k->timer = r_.add_timer(options_.kill_timeout, [this, guard, raw] {
    if (!guard.lock()) return;
    auto it =
        std::find_if(kills_.begin(), kills_.end(), [raw](const auto& p) { return p.get() == raw; });
    if (it == kills_.end()) return;
    reply_done(raw->epoch, raw->req, raw->started,
               {{"ok", false},
                {"detail", std::to_string(ranks_.size()) + " ranks not reaped after " +
                               fmt_seconds(options_.kill_timeout.to_seconds()) + " s"}});
    kills_.erase(it);
  });
  kills_.push_back(std::move(k));
}

void Agent::handle_inspect(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  auto kit = m.find("kinds");
  if (kit == m.end() || !kit->is_object()) bad("kinds: expected an object {kind: interval_s}");
  std::map<std::string, Duration> wanted;
  json ignored = json::array();
  std::vector<std::string> notes;
  for (auto it = kit->begin(); it != kit->end(); ++it) {
    const std::string& kind = it.key();
    if (kind.size() > 64 || !printable(kind)) bad("kinds: expected short printable kind names");
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0.05 ||
        it->get<double>() > 86400) {
      bad("kinds." + kind + ": expected an interval in seconds in [0.05, 86400]");
    }
    if (kind != "nic" && kind != "gpu" && kind != "host") {
      ignored.push_back(kind);
      continue;
    }
    if (kind == "nic" && machine_->nic.empty()) {
      ignored.push_back(kind);
      notes.push_back("nic: no interface configured for " + name_);
      continue;
    }
    wanted[kind] = Duration::seconds(it->get<double>());
  }
  if ((wanted.count("gpu") || wanted.count("host")) && !kmsg_.is_open()) {
    notes.push_back("kernel log unavailable (" + kmsg_error_ +
                    "); Xid and machine-check checks skipped");
    if (!kmsg_error_said_) {
      log("kernel log unavailable: " + kmsg_error_ + "; Xid and machine-check checks skipped");
      kmsg_error_said_ = true;
    }
  }
  if (wanted.count("gpu") && machine_->gpu_pci.empty()) {
    notes.push_back("gpu: no gpu_pci configured for " + name_ + ", Xid lines cannot be matched");
  }
  for (auto& [kind, t] : inspect_timers_) r_.cancel_timer(t);
  inspect_timers_.clear();
  inspect_every_ = wanted;
  json active = json::array();
  std::weak_ptr<bool> guard = alive_;
  for (const auto& [kind, every] : wanted) {
    active.push_back(kind);
    const std::string k = kind;
    inspect_timers_[k] = r_.add_timer(Duration::zero(), [this, guard, k] {
      if (guard.lock()) inspect_tick(k);
    });
  }
  std::string detail;
  for (const auto& n : notes) detail += (detail.empty() ? "" : "; ") + n;
  reply_done(epoch_, req, started,
             {{"ok", true}, {"active", active}, {"ignored", ignored}, {"detail", detail}});
}

void Agent::handle_probe(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::uint64_t epoch = epoch_;
  const std::string test = need_string(m, "test", 64);
  const std::int64_t deadline_ms = need_int(m, "deadline_ms", 1, kMaxDeadlineMs);
  const bool is_trainjob = test == "inter_all_gather" || test == "bitwise" || test == "stress";
  if (test != "gpu_diag" && test != "intra_all_to_all" && !is_trainjob) {
    bad("test: expected gpu_diag, intra_all_to_all, inter_all_gather, bitwise or stress, got '" +
        test.substr(0, 64) + "'");
  }
  require_capacity();
  const Duration deadline = Duration::millis(static_cast<double>(deadline_ms));
  const double deadline_s = static_cast<double>(deadline_ms) / 1000.0;
  const std::int64_t local_rank = opt_int(m, "local_rank", 0, kMaxLocalRanks - 1).value_or(0);
  SpawnSpec spec;
  std::map<std::string, std::string> env = base_env();
  for (const auto& [k, v] : config_.job.env) env[k] = v;
  env["LOCAL_RANK"] = std::to_string(local_rank);

  if (!is_trainjob) {
    if (config_.probe_bin.empty()) {
      reply_done(
          epoch, req, started,
          {{"test", test}, {"ok", true}, {"timed_out", false}, {"detail", "no probe program"}});
      return;
    }
    // Leave the probe a margin to report deadline_exceeded itself before we kill it.
    const std::string own_deadline = fmt_seconds(deadline_s * 0.9);
    if (test == "gpu_diag") {
      spec.argv = {config_.probe_bin, "gemm",
                   "--deadline",      own_deadline,
                   "--duration",      fmt_seconds(std::clamp(deadline_s * 0.1, 0.2, 5.0))};
    } else {
      spec.argv = {config_.probe_bin, "nccl",       "--collectives",
                   "all_to_all",      "--deadline", own_deadline};
    }
    spec.env = make_env(env);
    spec.cwd = child_cwd();
    run_tracked(
        std::move(spec), deadline, [this, epoch, req, started, test](const ChildResult& res) {
          json body = {{"test", test}, {"timed_out", false}};
          if (!res.started) {
            body["ok"] = false;
            body["detail"] = res.spawn_error;
            reply_done(epoch, req, started, body);
            return;
          }
          json report = json::parse(res.out, nullptr, false);
          if (report.is_discarded() || !report.is_object()) report = last_json_line(res.out);
          std::string verdict;
          if (report.is_object() && report.contains("verdict") && report["verdict"].is_string()) {
            verdict = report["verdict"];
            body["verdict"] = verdict;
            body["report"] = report;
          }
          const int code = res.exit_code();
          if (res.timed_out || code == 4) {
            body["ok"] = false;
            body["timed_out"] = true;
            body["detail"] = res.timed_out ? "killed at the deadline" : "deadline_exceeded";
          } else if (code == 0) {
            body["ok"] = true;
            body["detail"] = verdict.empty() ? "pass" : verdict;
          } else if (code == 3) {
            body["ok"] = true;
            body["detail"] = "no_gpu";
          } else {
            body["ok"] = false;
            std::string why = code == 2 ? "usage error" : verdict.empty() ? "fail" : verdict;
            std::string last = last_line(res.err);
            body["detail"] = why + " (" + describe_wait_status(res.wait_status) + ")" +
                             (last.empty() ? "" : ": " + last);
          }
          reply_done(epoch, req, started, body);
        });
    return;
  }

  if (config_.trainjob_bin.empty()) {
    reply_done(epoch, req, started,
               {{"test", test},
                {"ok", true},
                {"timed_out", false},
                {"skipped", true},
                {"detail", "no trainjob program"}});
    return;
  }
  if (test == "inter_all_gather") {
    const std::int64_t world = need_int(m, "world_size", 1, 1 << 20);
    const std::int64_t rank = need_int(m, "rank", 0, world - 1);
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(world);
    env["MASTER_ADDR"] = need_host(m, "master_addr");
    env["MASTER_PORT"] = std::to_string(need_int(m, "master_port", 1, 65535));
    // The job's own deadline a little before ours, so it can say what it waited for.
    spec.argv = {config_.trainjob_bin, "--probe", "allgather", "--deadline-ms",
                 std::to_string(std::max<std::int64_t>(1, deadline_ms * 9 / 10))};
  } else {
    const std::uint64_t seed =
        static_cast<std::uint64_t>(opt_int(m, "seed", 0, INT64_MAX).value_or(1));
    std::int64_t steps = opt_int(m, "steps", 1, 1000000).value_or(config_.job.bitwise_steps);
    if (steps < 1) steps = 1;
    if (test == "stress") steps *= 10;
    env["RANK"] = "0";
    env["WORLD_SIZE"] = "1";
    spec.argv = {
        config_.trainjob_bin, "--probe", "bitwise", "--seed", std::to_string(seed), "--steps",
        std::to_string(steps)};
  }
  spec.env = make_env(env);
  spec.cwd = child_cwd();
  run_tracked(std::move(spec), deadline, [this, epoch, req, started, test](const ChildResult& res) {
    json body = {{"test", test}, {"timed_out", res.timed_out}};
    if (!res.started) {
      body["ok"] = false;
      body["detail"] = res.spawn_error;
      reply_done(epoch, req, started, body);
      return;
    }
    json line = last_json_line(res.out);
    const bool exited_ok = !res.timed_out && res.exit_code() == 0;
    bool ok = exited_ok;
    if (test != "inter_all_gather") {
      if (line.is_object() && line.contains("hash") && line["hash"].is_string()) {
        body["hash"] = line["hash"];
      } else {
        ok = false;
      }
    }
    body["ok"] = ok;
    if (line.is_object()) body["result"] = line;
    if (res.timed_out) {
      body["detail"] = "killed at the deadline";
    } else if (!exited_ok) {
      std::string last = last_line(res.err);
      if (line.is_object() && line.contains("error") && line["error"].is_string()) {
        last = line["error"].get<std::string>().substr(0, kMaxSignature);
      }
      body["detail"] = describe_wait_status(res.wait_status) + (last.empty() ? "" : ": " + last);
    } else if (!ok) {
      body["detail"] = "no hash in the program's output";
    } else {
      body["detail"] = "";
    }
    reply_done(epoch, req, started, body);
  });
}

void Agent::handle_capture(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::uint64_t epoch = epoch_;
  if (ranks_.empty()) {
    reply_done(epoch, req, started, {{"ok", true}, {"by_rank", json::object()}});
    return;
  }
  require_capacity();
  struct Gather {
    json by_rank = json::object();
    std::size_t left = 0;
  };
  auto g = std::make_shared<Gather>();
  g->left = ranks_.size();
  std::weak_ptr<bool> guard = alive_;
  for (const auto& [rank, rk] : ranks_) {
    const std::string key = std::to_string(rank);
    auto child =
        capture_stack(r_, rk->pid, options_.stacks,
                      [this, guard, g, key, epoch, req, started](const std::string& sig) {
                        if (!guard.lock()) return;
                        g->by_rank[key] = sig;
                        if (--g->left == 0) {
                          reply_done(epoch, req, started, {{"ok", true}, {"by_rank", g->by_rank}});
                        }
                      });
    if (child) children_.push_back(child);
  }
}

void Agent::handle_replay(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::uint64_t epoch = epoch_;
  const std::int64_t steps = need_int(m, "steps", 1, 10000000);
  const std::int64_t world = need_int(m, "world_size", 1, 1 << 20);
  const std::int64_t rank = need_int(m, "rank", 0, world - 1);
  const std::string master_addr = need_host(m, "master_addr");
  const std::int64_t master_port = need_int(m, "master_port", 1, 65535);
  const std::int64_t deadline_ms = need_int(m, "deadline_ms", 1, kMaxDeadlineMs);
  const std::int64_t local_rank = opt_int(m, "local_rank", 0, kMaxLocalRanks - 1).value_or(0);
  require_capacity();
  if (config_.trainjob_bin.empty()) {
    reply_done(epoch, req, started, {{"ok", false}, {"detail", "no trainjob program configured"}});
    return;
  }
  std::map<std::string, std::string> env = base_env();
  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["MASTER_ADDR"] = master_addr;
  env["MASTER_PORT"] = std::to_string(master_port);
  for (const auto& [k, v] : config_.job.env) env[k] = v;
  // from_init: replay a shortened job from the seed's initial state (in an empty
  // checkpoint directory), so every group's hash is comparable with a reference run.
  if (m.contains("from_init") && m["from_init"].is_boolean() && m["from_init"].get<bool>()) {
    const std::string dir = machine_->workdir + "/replay";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    env["FAULTLINE_CKPT_DIR"] = dir;
  }
  SpawnSpec spec;
  spec.argv = {config_.trainjob_bin, "--replay", "--steps", std::to_string(steps)};
  if (auto seed = opt_int(m, "seed", 0, INT64_MAX)) {
    spec.argv.push_back("--seed");
    spec.argv.push_back(std::to_string(*seed));
  }
  spec.env = make_env(env);
  spec.cwd = child_cwd();
  run_tracked(std::move(spec), Duration::millis(static_cast<double>(deadline_ms)),
              [this, epoch, req, started, rank](const ChildResult& res) {
                json body = {{"timed_out", res.timed_out}, {"rank", rank}};
                if (!res.started) {
                  body["ok"] = false;
                  body["detail"] = res.spawn_error;
                  reply_done(epoch, req, started, body);
                  return;
                }
                json line = last_json_line(res.out);
                bool ok = !res.timed_out && res.exit_code() == 0;
                if (line.is_object() && line.contains("from_step"))
                  body["from_step"] = line["from_step"];
                if (rank == 0) {
                  if (line.is_object() && line.contains("hash") && line["hash"].is_string()) {
                    body["hash"] = line["hash"];
                  } else if (ok) {
                    ok = false;
                    body["detail"] = "no hash in rank 0's output";
                  }
                }
                body["ok"] = ok;
                if (res.timed_out) {
                  body["detail"] = "killed at the deadline";
                } else if (res.exit_code() != 0) {
                  std::string last = last_line(res.err);
                  body["detail"] =
                      describe_wait_status(res.wait_status) + (last.empty() ? "" : ": " + last);
                }
                reply_done(epoch, req, started, body);
              });
}

Agent::Rank* Agent::local_rank(int local) {
  for (auto& [rank, rk] : ranks_) {
    if (rk->local_rank == local) return rk.get();
  }
  return nullptr;
}

void Agent::handle_inject(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::uint64_t epoch = epoch_;
  const std::string fault = need_string(m, "fault", 32);
  const std::string detail = opt_string(m, "detail", kMaxDirective).value_or("");
  const auto local = opt_int(m, "local_rank", 0, kMaxLocalRanks - 1);
  const std::string fault_file = machine_->workdir + "/faults";

  if (fault == "kill" || fault == "stop") {
    Rank* rk = local_rank(static_cast<int>(local.value_or(0)));
    if (rk == nullptr) {
      reply_done(epoch, req, started,
                 {{"ok", false},
                  {"detail", "no local rank " + std::to_string(local.value_or(0)) + " running"}});
      return;
    }
    if (fault == "kill") {
      ::kill(-rk->pid, SIGKILL);
    } else {
      ::kill(-rk->pid, SIGSTOP);
    }
    log("injected " + fault + " into rank " + std::to_string(rk->rank));
    reply_done(epoch, req, started, {{"ok", true}, {"rank", rk->rank}, {"pid", rk->pid}});
    return;
  }
  if (fault == "crash" || fault == "hang" || fault == "nan" || fault == "slow" || fault == "sdc") {
    std::string line = fault;
    if (fault == "crash") {
      line += " " + (detail.empty() ? std::string("injected crash") : detail);
    } else if (fault == "slow") {
      char* end = nullptr;
      double f = std::strtod(detail.c_str(), &end);
      if (detail.empty() || end == detail.c_str() || *end != '\0' || !std::isfinite(f) || f <= 0) {
        bad("detail: slow expects a positive slowdown factor, e.g. \"3\"");
      }
      line += " " + detail;
    } else if (fault == "sdc") {
      std::string d = detail.empty() ? "after=0" : detail;
      if (d.rfind("after=", 0) != 0 || d.size() == 6 ||
          !std::all_of(d.begin() + 6, d.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        bad("detail: sdc expects \"after=N\" (N steps)");
      }
      line += " " + d;
    }
    if (local) line = "local_rank=" + std::to_string(*local) + " " + line;
    if (machine_->workdir.empty()) bad("machine " + name_ + " has no workdir in the config");
    std::error_code ec;
    std::filesystem::create_directories(machine_->workdir, ec);
    int fd = ::open(fault_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    std::string text = line + "\n";
    bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    std::string why = ok ? "" : fault_file + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (ok) log("injected directive '" + line + "'");
    reply_done(epoch, req, started,
               {{"ok", ok}, {"detail", ok ? line : "cannot append to " + why}});
    return;
  }
  if (fault == "nic_down" || fault == "repair") {
    std::string removed;
    if (fault == "repair") {
      std::error_code ec;
      std::filesystem::remove(fault_file, ec);
      removed = ec ? "cannot remove " + fault_file + ": " + ec.message() : "fault file removed";
      if (machine_->nic.empty()) {
        reply_done(epoch, req, started, {{"ok", !ec}, {"detail", removed}});
        return;
      }
    } else if (machine_->nic.empty()) {
      bad("fault: nic_down needs a nic in the config of machine " + name_);
    }
    require_capacity();
    SpawnSpec spec;
    spec.argv = {options_.ip_program,
                 "link",
                 "set",
                 "dev",
                 machine_->nic,
                 fault == "repair" ? "up" : "down"};
    spec.env = make_env({{"LC_ALL", "C"}});
    run_tracked(std::move(spec), Duration::seconds(10),
                [this, epoch, req, started, removed](const ChildResult& res) {
                  const bool ok = res.started && !res.timed_out && res.exit_code() == 0;
                  std::string detail = removed;
                  if (!ok) {
                    std::string why = !res.started ? res.spawn_error
                                      : res.timed_out
                                          ? "ip timed out"
                                          : "ip " + describe_wait_status(res.wait_status) + ": " +
                                                last_line(res.err);
                    detail += (detail.empty() ? "" : "; ") + why;
                  }
                  reply_done(epoch, req, started, {{"ok", ok}, {"detail", detail}});
                });
    return;
  }
  if (fault == "machine_down") {
    log("machine_down: killing every rank and exiting with code 137");
    kill_all_ranks();
    for (auto& w : children_) {
      if (auto c = w.lock()) c->cancel();
    }
    if (conn_) conn_->close("machine_down");
    finish(137);
    return;
  }
  bad("fault: expected kill, stop, crash, hang, nan, slow, sdc, nic_down, machine_down or "
      "repair, got '" +
      fault.substr(0, 32) + "'");
}

void Agent::handle_shutdown(const json& m, std::int64_t req) {
  shutting_down_ = true;
  log("shutdown requested");
  auto k = std::make_unique<PendingKill>();
  k->req = req;
  k->epoch = epoch_;
  k->started = r_.now();
  k->shutdown = true;
  PendingKill* raw = k.get();
  std::weak_ptr<bool> guard = alive_;
  k->timer = r_.add_timer(options_.kill_timeout, [this, guard, raw] {
    if (!guard.lock()) return;
    log("shutdown: ranks not reaped in time; exiting anyway");
    finish(0);
  });
  kills_.push_back(std::move(k));
  kill_all_ranks();
  settle_kills();
}

// ---------------------------------------------------------------------------------------
// Ranks

void Agent::kill_all_ranks() {
  for (auto& [rank, rk] : ranks_) {
    rk->killed_by_agent = true;
    signal_group(rk->pid, SIGKILL);
  }
}

void Agent::close_rank_fds(Rank& rk) {
  for (int* fd : {&rk.report_fd, &rk.stderr_fd}) {
    if (*fd >= 0) {
      r_.remove_fd(*fd);
      ::close(*fd);
      *fd = -1;
    }
  }
  if (rk.log_fd >= 0) {
    ::close(rk.log_fd);
    rk.log_fd = -1;
  }
}

void Agent::on_rank_report(Rank& rk) {
  char buf[16384];
  while (rk.report_fd >= 0) {
    ssize_t n = ::read(rk.report_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the rank closed its end (or an error): no more reports
      r_.remove_fd(rk.report_fd);
      ::close(rk.report_fd);
      rk.report_fd = -1;
      return;
    }
    rk.report_buf.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    while (true) {
      auto nl = rk.report_buf.find('\n', start);
      if (nl == std::string::npos) break;
      std::string line = rk.report_buf.substr(start, nl - start);
      start = nl + 1;
      if (rk.report_skipping) {
        rk.report_skipping = false;
        continue;
      }
      if (trim(line).empty()) continue;
      json report;
      std::string problem;
      if (line.size() > kMaxReportLine) {
        problem = "longer than 4 KiB";
      } else {
        report = json::parse(line, nullptr, false);
        if (report.is_discarded() || !report.is_object()) problem = "not a JSON object";
      }
      if (!problem.empty()) {
        if (rk.bad_reports++ < 5) {
          log("rank " + std::to_string(rk.rank) + ": report line dropped: " + problem);
        }
        continue;
      }
      if (report.value("type", "") == "fatal") {
        for (const char* key : {"signature", "message", "detail"}) {
          auto it = report.find(key);
          if (it != report.end() && it->is_string() && !it->get<std::string>().empty()) {
            rk.fatal_signature = it->get<std::string>().substr(0, kMaxSignature);
            break;
          }
        }
      }
      send({{"type", "report"}, {"gen", rk.gen}, {"rank", rk.rank}, {"report", report}},
           Delivery::kDrop);
    }
    rk.report_buf.erase(0, start);
    if (rk.report_buf.size() > kMaxReportLine) {
      rk.report_buf.clear();
      rk.report_skipping = true;
      if (rk.bad_reports++ < 5) {
        log("rank " + std::to_string(rk.rank) + ": report line dropped: longer than 4 KiB");
      }
    }
  }
}

void Agent::on_rank_stderr(Rank& rk) {
  char buf[16384];
  auto take_line = [&rk](const std::string& raw) {
    std::string line = trim(raw);
    if (line.empty() || !looks_like_error(line)) return;
    if (line.size() > kMaxSignature) line.resize(kMaxSignature);
    rk.error_line = line;
  };
  while (rk.stderr_fd >= 0) {
    ssize_t n = ::read(rk.stderr_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      r_.remove_fd(rk.stderr_fd);
      ::close(rk.stderr_fd);
      rk.stderr_fd = -1;
      if (!rk.stderr_buf.empty()) take_line(rk.stderr_buf);
      rk.stderr_buf.clear();
      return;
    }
    if (rk.log_fd >= 0) {
      ssize_t w = ::write(rk.log_fd, buf, static_cast<std::size_t>(n));
      (void)w;  // a full log disk must not stop supervision
    }
    rk.stderr_buf.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    while (true) {
      auto nl = rk.stderr_buf.find('\n', start);
      if (nl == std::string::npos) break;
      take_line(rk.stderr_buf.substr(start, nl - start));
      start = nl + 1;
    }
    rk.stderr_buf.erase(0, start);
    if (rk.stderr_buf.size() > kMaxStderrLine) {
      take_line(rk.stderr_buf);
      rk.stderr_buf.clear();
    }
  }
}

void Agent::on_rank_exit(int rank, int status) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  Rank& rk = *it->second;
  // Everything the rank wrote before dying is in the socket and the pipe: take it now,
  // so its reports and its error line come before the exit.
  on_rank_report(rk);
  on_rank_stderr(rk);
  if (!rk.stderr_buf.empty()) {
    std::string line = trim(rk.stderr_buf);
    if (!line.empty() && looks_like_error(line)) rk.error_line = line.substr(0, kMaxSignature);
  }
  close_rank_fds(rk);
  std::string signature;
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!rk.killed_by_agent && !clean_exit) {
    // The rank's own word first (a `fatal` report), then what its stderr said.
    signature = !rk.fatal_signature.empty() ? rk.fatal_signature : rk.error_line;
  }
  if (signature.empty()) signature = describe_wait_status(status);
  json msg = {{"type", "exit"},
              {"gen", rk.gen},
              {"rank", rk.rank},
              {"pid", rk.pid},
              {"code", WIFEXITED(status) ? WEXITSTATUS(status) : -1},
              {"signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0},
              {"signature", signature}};
  log("rank " + std::to_string(rk.rank) + " (gen " + std::to_string(rk.gen) + ", pid " +
      std::to_string(rk.pid) + ") exited: " + signature);
  ranks_.erase(it);
  send(std::move(msg), Delivery::kQueue);
  settle_kills();
}

void Agent::settle_kills() {
  if (!ranks_.empty() || kills_.empty()) return;
  auto kills = std::move(kills_);
  kills_.clear();
  bool shutdown = false;
  for (auto& k : kills) {
    r_.cancel_timer(k->timer);
    reply_done(k->epoch, k->req, k->started, {{"ok", true}});
    shutdown = shutdown || k->shutdown;
  }
  if (shutdown) {
    if (conn_ && conn_->is_open()) {
      conn_->close_after_flush("shutdown");  // on_close finishes
      std::weak_ptr<bool> guard = alive_;
      r_.add_timer(Duration::seconds(2), [this, guard] {
        if (guard.lock()) finish(0);
      });
    } else {
      finish(0);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Inspection

void Agent::alert(const std::string& kind, const std::string& detail) {
  send({{"type", "alert"}, {"kind", kind}, {"detail", detail}}, Delivery::kDrop);
}

void Agent::drain_kernel_log() {
  if (!kmsg_.is_open()) return;
  const bool gpu = inspect_every_.count("gpu") != 0;
  const bool host = inspect_every_.count("host") != 0;
  for (const auto& line : kmsg_.read_new()) {
    std::string pci;
    std::string text = line.substr(0, 400);
    if (gpu && is_xid_line(line, machine_->gpu_pci, &pci)) alert("gpu", "GPU " + pci + ": " + text);
    if (host && is_machine_check_line(line)) alert("host", "kernel: " + text);
  }
}

void Agent::inspect_tick(const std::string& kind) {
  auto every = inspect_every_.find(kind);
  if (every == inspect_every_.end()) return;
  if (kind == "nic") {
    NicState st = read_nic_state(options_.sysfs_root, machine_->nic);
    if (!st.up) alert("nic", st.detail);
  } else {
    drain_kernel_log();
    if (kind == "host" && !machine_->workdir.empty()) {
      std::string problem = filesystem_problem(machine_->workdir);
      if (!problem.empty()) alert("host", problem);
    }
  }
  std::weak_ptr<bool> guard = alive_;
  inspect_timers_[kind] = r_.add_timer(every->second, [this, guard, kind] {
    if (guard.lock()) inspect_tick(kind);
  });
}

void Agent::finish(int code) {
  if (finished_) return;
  finished_ = true;
  exit_code_ = code;
  if (redial_timer_) r_.cancel_timer(redial_timer_);
  redial_timer_ = 0;
  if (heartbeat_timer_) r_.cancel_timer(heartbeat_timer_);
  heartbeat_timer_ = 0;
  for (auto& [kind, t] : inspect_timers_) r_.cancel_timer(t);
  inspect_timers_.clear();
  r_.stop();
}

}  // namespace faultline::live
