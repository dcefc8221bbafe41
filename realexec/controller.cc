#include "realexec/controller.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <set>
#include <stdexcept>

namespace faultline::live {

using nlohmann::json;

namespace {

constexpr double kHelloTimeoutS = 5;
constexpr double kStartupWaitS = 30;
constexpr std::uint64_t kOwnReqBase = 1ull << 40;  // controller-originated requests

// Injectable faults and whether each leaves the machine broken until it is evicted.
const std::map<std::string, bool>& fault_kinds() {
  static const std::map<std::string, bool> kinds = {
      {"kill", false}, {"stop", true},  {"crash", false}, {"hang", false},        {"nan", false},
      {"slow", true},  {"sdc", true},   {"nic_down", true}, {"machine_down", true}, {"repair", false}};
  return kinds;
}

}  // namespace

Controller::Controller(const LiveConfig& config, const Registry& registry, Reactor& reactor, bool fresh)
    : config_(config), reactor_(reactor) {
  std::string err;
  if (!load_token(config_.token_file, &token_, &err)) throw std::runtime_error(err);
  if (!config_.status_token_file.empty()) {
    if (!load_token(config_.status_token_file, &status_token_, &err)) throw std::runtime_error(err);
    if (tokens_equal(status_token_, token_))
      throw std::runtime_error(config_.status_token_file + ": token: the read-only credential equals token_file's");
  }
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported like a full disk,
  // instead of killing the controller.
  std::signal(SIGXFSZ, SIG_IGN);
  std::error_code ec;
  std::filesystem::create_directories(config_.state_dir, ec);
  if (ec) throw std::runtime_error(config_.state_dir + ": cannot create the state directory: " + ec.message());
  const std::string journal_path = config_.state_dir + "/journal.json";
  const std::string log_path = config_.state_dir + "/events.jsonl";
  if (fresh) {
    std::filesystem::remove(journal_path, ec);
    std::filesystem::remove(log_path, ec);
  }
  journal_ = std::make_unique<Journal>(journal_path);
  if (!journal_->load(&err)) throw std::runtime_error(err);
  try {
    log_ = std::make_unique<traces::EventLogWriter>(log_path);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  world_ = std::make_unique<LiveWorld>(config_, registry, reactor_, *this, *log_, *journal_);
  if (!journal_->resumed()) {
    const ClusterSpec spec = config_.cluster_spec();
    traces::EventLogHeader h;
    h.stack = config_.stack;
    h.params = {config_.params.values().begin(), config_.params.values().end()};
    h.seed = config_.seed;
    h.machines = spec.machines;
    h.gpus_per_machine = spec.gpus_per_machine;
    h.tp = spec.tp;
    h.pp = spec.pp;
    h.dp = spec.dp;
    h.standby_machines = spec.standby_machines;
    h.nominal_step_time_s = config_.job.nominal_step_time_s;
    h.checkpoint_every_steps = journal_->state().ckpt_every;
    h.config_file = std::filesystem::absolute(config_.file).string();
    log_->header(0.0, h);
  }
  listen_fd_ = listen_tcp(config_.controller_host, config_.controller_port, &err);
  if (listen_fd_ < 0)
    throw std::runtime_error(config_.file + ": controller: cannot listen on " + config_.controller_host + ":" +
                             std::to_string(config_.controller_port) + ": " + err);
  if (config_.metrics_port > 0) start_metrics();
}

void Controller::start_metrics() {
  std::string token, err;
  if (!config_.metrics_token_file.empty()) {
    if (!load_token(config_.metrics_token_file, &token, &err)) throw std::runtime_error(err);
    if (tokens_equal(token, token_) || (!status_token_.empty() && tokens_equal(token, status_token_)))
      throw std::runtime_error(config_.metrics_token_file +
                               ": token: the metrics credential equals a control credential");
  }
  const int fd = listen_tcp(config_.metrics_host, config_.metrics_port, &err);
  if (fd < 0)
    throw std::runtime_error(config_.file + ": metrics_listen: cannot listen on " + config_.metrics_host + ":" +
                             std::to_string(config_.metrics_port) + ": " + err);
  metrics_ = std::make_unique<MetricsServer>(reactor_, fd, std::move(token),
                                             [this] { return render(world_->metrics()); });
}

Controller::~Controller() {
  metrics_.reset();
  sessions_.clear();
  if (listen_fd_ >= 0) {
    reactor_.remove_fd(listen_fd_);
    ::close(listen_fd_);
  }
}

int Controller::run(double duration_s) {
  reactor_.add_fd(listen_fd_, EPOLLIN, [this](std::uint32_t) { on_accept(); });
  // SIGTERM/SIGINT stop the controller only: the agents keep the job running and a
  // restarted controller adopts it. `faultline live stop` ends the whole run.
  reactor_.on_signal(SIGTERM, [this] { reactor_.stop(); });
  reactor_.on_signal(SIGINT, [this] { reactor_.stop(); });
  if (duration_s > 0)
    reactor_.add_timer(Duration::seconds(duration_s), [this] { shutdown("run duration reached"); });
  // The policy starts once every machine's agent has said hello, or after
  // kStartupWaitS with whatever has connected (a missing machine is then a failure the
  // policy handles like any other).
  reactor_.add_timer(Duration::seconds(kStartupWaitS), [this] { start_world(); });
  std::uint64_t finish_timer = 0;
  std::function<void()> poll_finished = [&] {
    finish_timer = reactor_.add_timer(Duration::seconds(0.5), poll_finished);
    watch_storage();
    if (world_->finished())
      shutdown(world_->ended_verdict().empty() ? "the job finished"
                                               : "the policy ended the run: " + world_->ended_verdict());
  };
  poll_finished();
  reactor_.run();
  if (finish_timer) reactor_.cancel_timer(finish_timer);
  watch_storage();  // a last try for what still waits
  int code = world_->ended_verdict().empty() ? 0 : kExitEndedRun;
  std::cout << std::flush;
  if (journal_->health().failing)
    std::cerr << log_stamp() << " faultline live: the journal could not be saved since "
              << utc_stamp(journal_->health().since_unix_ms) << " (" << journal_->health().last_error
              << "): a restarted controller resumes from the previous journal\n";
  const traces::StorageHealth& h = log_->health();
  if (const std::uint64_t lost = h.lost + h.pending; lost > 0) {
    // What still waits in the backlog now is lost with the process.
    std::cerr << log_stamp() << " faultline live: the event log " << log_->path() << " is incomplete: " << lost
              << " records lost to write failures (" << h.last_error << ")"
              << (code == 0 ? "; exit status " + std::to_string(kExitLostRecords) : "") << "\n";
    if (code == 0) code = kExitLostRecords;
  }
  std::cerr << std::flush;
  return code;
}

void Controller::watch_storage() {
  log_->flush();
  journal_->retry();
  const std::string stamp = log_stamp();
  {
    const traces::StorageHealth& h = log_->health();
    if (h.outages > log_watch_.outages) {
      log_watch_.outages = h.outages;
      log_watch_.failing = true;
      std::cerr << stamp << " faultline live: storage: writing the event log failed at " << utc_stamp(h.since_unix_ms)
                << ": " << h.last_error << "; " << h.pending
                << " records pending, kept in memory and retried (reported once per outage)\n";
    }
    if (log_watch_.failing && !h.failing) {
      log_watch_.failing = false;
      const std::string line = "storage: the event log is written again after failing since " +
                               utc_stamp(h.since_unix_ms) + ": " + std::to_string(h.written_late) +
                               " records written late, " + std::to_string(h.outage_lost) + " lost";
      std::cerr << stamp << " faultline live: " << line << "\n";
      if (!shutting_down_) world_->note(line);  // the log itself says where it has a gap (never after the summary)
    }
  }
  {
    const traces::StorageHealth& h = journal_->health();
    if (h.outages > journal_watch_.outages) {
      journal_watch_.outages = h.outages;
      journal_watch_.failing = true;
      std::cerr << stamp << " faultline live: storage: saving the journal failed at " << utc_stamp(h.since_unix_ms)
                << ": " << h.last_error << "; the previous journal stays, retried (reported once per outage)\n";
    }
    if (journal_watch_.failing && !h.failing) {
      journal_watch_.failing = false;
      const std::string line =
          "storage: the journal is saved again after failing since " + utc_stamp(h.since_unix_ms);
      std::cerr << stamp << " faultline live: " << line << "\n";
      if (!shutting_down_) world_->note(line);
    }
  }
  std::cerr << std::flush;
}

bool Controller::awaited(MachineId m) const {
  // A resumed run does not wait for machines its journal has out of service (evicted,
  // retired): their agents may never return (a drained Slurm node, a host in repair), and
  // the run goes on without them; one that does come back is taken as it connects.
  if (!journal_->resumed()) return true;
  const JournalState& st = journal_->state();
  auto has = [m](const std::vector<MachineId>& v) { return std::find(v.begin(), v.end(), m) != v.end(); };
  return !has(st.evicted) && !has(st.retired);
}

void Controller::start_world() {
  if (world_started_) return;
  world_started_ = true;
  world_->start();
}

void Controller::shutdown(const std::string& why) {
  if (shutting_down_) return;
  shutting_down_ = true;
  start_world();
  world_->note("shutdown: " + why);
  const double ettr = world_->write_summary();
  std::cout << log_stamp() << " faultline live: " << why << "; measured ETTR " << ettr << "\n" << std::flush;
  for (auto& [sid, s] : sessions_)
    if (s.role == Session::Role::kAgent && s.conn && s.conn->is_open())
      s.conn->send(json{{"type", "shutdown"}, {"req", kOwnReqBase}});
  // Give the agents a moment to receive it, and a scraper its chance at the final values.
  const double linger_s = metrics_ ? std::max(0.5, config_.metrics_linger_s) : 0.5;
  reactor_.add_timer(Duration::seconds(linger_s), [this] { reactor_.stop(); });
}

bool Controller::send(MachineId m, const json& msg) {
  auto it = machine_session_.find(m);
  if (it == machine_session_.end()) return false;
  auto s = sessions_.find(it->second);
  if (s == sessions_.end() || !s->second.conn || !s->second.conn->is_open()) return false;
  return s->second.conn->send(msg);
}

bool Controller::connected(MachineId m) const {
  auto it = machine_session_.find(m);
  if (it == machine_session_.end()) return false;
  auto s = sessions_.find(it->second);
  return s != sessions_.end() && s->second.conn && s->second.conn->is_open();
}

void Controller::on_accept() {
  for (;;) {
    std::string peer;
    const int fd = accept_tcp(listen_fd_, &peer);
    if (fd < 0) return;
    const std::uint64_t sid = next_session_++;
    Session& s = sessions_[sid];
    s.conn = std::make_unique<Conn>(
        reactor_, fd, peer,
        Conn::Handlers{[this, sid](const json& m) { on_message(sid, m); },
                       [this, sid](const std::string& why) { on_close(sid, why); }});
    s.timer = reactor_.add_timer(Duration::seconds(kHelloTimeoutS), [this, sid] {
      auto it = sessions_.find(sid);
      if (it == sessions_.end()) return;
      it->second.timer = 0;
      if (it->second.role == Session::Role::kHello || it->second.role == Session::Role::kChallenged)
        refuse(sid, "no authenticated hello within 5 s");
    });
  }
}

void Controller::refuse(std::uint64_t sid, const std::string& why) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  note_unauthenticated("refused connection from " + it->second.conn->peer() + ": " + why);
  it->second.conn->send(json{{"type", "refused"}, {"reason", why}});
  it->second.role = Session::Role::kClient;  // no further messages are acted on
  it->second.conn->set_handlers({[](const json&) {}, [this, sid](const std::string& w) { on_close(sid, w); }});
  reactor_.add_timer(Duration::seconds(0.2), [this, sid] {
    auto s = sessions_.find(sid);
    if (s != sessions_.end() && s->second.conn->is_open()) s->second.conn->close("refused");
  });
}

void Controller::arm_heartbeat(std::uint64_t sid) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  if (it->second.timer) reactor_.cancel_timer(it->second.timer);
  it->second.timer = reactor_.add_timer(Duration::seconds(config_.heartbeat_timeout_s), [this, sid] {
    auto s = sessions_.find(sid);
    if (s == sessions_.end()) return;
    s->second.timer = 0;
    s->second.conn->close("no heartbeat for " + std::to_string(config_.heartbeat_timeout_s) + " s");
  });
}

void Controller::on_message(std::uint64_t sid, const json& msg) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  // Every message is decoded before anything is done with it (realexec/messages.h); one
  // that does not decode is refused with its reason and noted, and the process carries on.
  try {
    if (s.role == Session::Role::kHello) return on_hello(sid, decode_hello(msg, kProtocolVersion));
    if (s.role == Session::Role::kChallenged) {
      const Auth auth = decode_auth(msg);
      const Hello& h = s.handshake.hello();
      if (!s.handshake.verify(h.read_only ? status_token_ : token_, auth)) return refuse(sid, "bad token");
      return on_authenticated(sid, auth);
    }
    if (s.role == Session::Role::kClient) {
      json req = 0;
      try {
        return on_client(s, decode_client_request(msg, &req));
      } catch (const BadMessage& e) {
        note_refusal(s, e.reason);
        s.conn->send(json{{"type", "done"}, {"req", req}, {"ok", false}, {"detail", e.reason}});
        return;
      }
    }
    arm_heartbeat(sid);
    s.last_heard = reactor_.now();
    // An agent's messages are not requests: a refusal is noted, never answered (an answer
    // to an agent that did not understand it would be refused in turn, without end).
    world_->on_agent_message(s.machine, msg);
  } catch (const BadMessage& e) {
    if (s.role == Session::Role::kHello || s.role == Session::Role::kChallenged) return refuse(sid, e.reason);
    note_refusal(s, e.reason);
  } catch (const std::exception& e) {
    // A fault of ours while acting on a valid message: say so and drop that connection,
    // never the controller.
    world_->note("internal error on a message from " + s.conn->peer() + ": " + e.what() + "; connection closed");
    s.conn->close("internal error");
  }
}

void Controller::note_unauthenticated(const std::string& text) {
  // Anyone can connect: the first 20 are noted, then one line per 1000, so that a flood of
  // connections cannot fill the event log or the terminal.
  ++unauthenticated_;
  if (unauthenticated_ > 20 && unauthenticated_ % 1000 != 0) return;
  const std::string line =
      text + (unauthenticated_ > 20 ? " (" + std::to_string(unauthenticated_) + " refused so far)" : "");
  world_->note(line);
  std::cerr << log_stamp() << " faultline live: " << line << "\n";
}

void Controller::note_refusal(Session& s, const std::string& reason) {
  // The first few of each connection, then one line per 1000: a flood of junk must not
  // fill the event log.
  ++s.refused;
  if (s.refused <= 5 || s.refused % 1000 == 0) {
    const std::string who = s.machine != kNoMachine ? "agent of " + config_machine_name(s.machine) : s.conn->peer();
    world_->note("refused a message from " + who + ": " + reason +
                 (s.refused > 5 ? " (" + std::to_string(s.refused) + " refused so far)" : ""));
  }
}

std::string Controller::config_machine_name(MachineId m) const {
  const auto jobs = config_.machines.size();
  if (m >= 0 && static_cast<std::size_t>(m) < jobs) return config_.machines[m].name;
  if (m >= 0 && static_cast<std::size_t>(m) - jobs < config_.standby.size()) return config_.standby[m - jobs].name;
  return "machine " + std::to_string(m);
}

void Controller::on_hello(std::uint64_t sid, const Hello& hello) {
  Session& s = sessions_.at(sid);
  if (hello.read_only && status_token_.empty())
    return refuse(sid, "read-only access is not configured (the config has no status_token_file)");
  if (hello.role == Hello::Role::kAgent) {
    bool known = false;
    for (const auto& m : config_.machines) known |= m.name == hello.name;
    for (const auto& m : config_.standby) known |= m.name == hello.name;
    if (!known) return refuse(sid, "unknown machine \"" + hello.name.substr(0, 64) + "\"");
  }
  s.role = Session::Role::kChallenged;
  s.conn->send(s.handshake.challenge(hello.read_only ? status_token_ : token_, hello));
}

void Controller::on_authenticated(std::uint64_t sid, const Auth& auth) {
  Session& s = sessions_.at(sid);
  const Hello hello = s.handshake.hello();
  if (s.timer) reactor_.cancel_timer(s.timer);
  s.timer = 0;
  if (hello.role == Hello::Role::kClient) {
    s.role = Session::Role::kClient;
    s.read_only = hello.read_only;
    s.conn->send(json{{"type", "welcome"}, {"role", "client"}, {"access", hello.read_only ? "read" : "admin"}});
    return;
  }
  const std::string& name = hello.name;
  MachineId m = kNoMachine;
  for (size_t i = 0; i < config_.machines.size(); ++i)
    if (config_.machines[i].name == name) m = static_cast<MachineId>(i);
  for (size_t i = 0; i < config_.standby.size(); ++i)
    if (config_.standby[i].name == name) m = static_cast<MachineId>(config_.machines.size() + i);
  if (m == kNoMachine) return refuse(sid, "unknown machine \"" + name.substr(0, 64) + "\"");
  if (auto old = machine_session_.find(m); old != machine_session_.end() && old->second != sid) {
    auto os = sessions_.find(old->second);
    // A session is bound to its machine: while the one there is live (heard from within
    // heartbeat_timeout_s) a second hello for the name is refused; a restarted agent gets
    // in once the old session has closed or gone silent.
    if (os != sessions_.end() && os->second.conn && os->second.conn->is_open() &&
        reactor_.now() - os->second.last_heard < Duration::seconds(config_.heartbeat_timeout_s))
      return refuse(sid, name + " already has a live session (from " + os->second.conn->peer() + ")");
    machine_session_.erase(old);
    if (os != sessions_.end()) {
      os->second.machine = kNoMachine;  // replaced: its close is not a loss
      os->second.conn->close("replaced by a new connection");
    }
  }
  s.role = Session::Role::kAgent;
  s.machine = m;
  s.last_heard = reactor_.now();
  machine_session_[m] = sid;
  const bool in_job = world_->cluster().slot_of(m) >= 0;
  s.conn->send(json{{"type", "welcome"}, {"machine", name}, {"machine_id", m}, {"role", in_job ? "job" : "standby"}});
  arm_heartbeat(sid);
  world_->on_agent_connected(m, auth);
  if (!world_started_) {
    bool all = true;
    for (MachineId x = 0; x < static_cast<MachineId>(config_.machines.size() + config_.standby.size()); ++x)
      all &= connected(x) || !awaited(x);
    if (all) reactor_.defer([this] { start_world(); });
  }
}

void Controller::on_client(Session& s, const ClientRequest& request) {
  auto reply = [&](bool ok, const std::string& detail, json extra = json::object()) {
    extra["type"] = "done";
    extra["req"] = request.req;
    extra["ok"] = ok;
    extra["detail"] = detail;
    s.conn->send(extra);
  };
  if (std::holds_alternative<StatusRequest>(request.body))
    return reply(true, "", json{{"status", world_->status()}});
  if (s.read_only) {
    note_refusal(s, "a read-only session may only ask for status");
    return reply(false, "refused: a read-only session may only ask for status");
  }
  if (std::holds_alternative<StopRequest>(request.body)) {
    reply(true, "stopping");
    return shutdown("stopped by an operator");
  }
  if (const auto* u = std::get_if<UpdateRequest>(&request.body)) {
    if (!config_.job.versions.count(u->version)) return reply(false, "update: version: expected one of job.versions");
    world_->request_code_update(u->version, u->urgent);
    return reply(true, "code update " + u->version + " requested");
  }
  const auto& in = std::get<InjectRequest>(request.body);
  MachineId m = kNoMachine;
  for (size_t i = 0; i < config_.machines.size(); ++i)
    if (config_.machines[i].name == in.machine) m = static_cast<MachineId>(i);
  for (size_t i = 0; i < config_.standby.size(); ++i)
    if (config_.standby[i].name == in.machine) m = static_cast<MachineId>(config_.machines.size() + i);
  if (m == kNoMachine) return reply(false, "inject: machine: expected a machine name from the config");
  auto k = fault_kinds().find(in.fault);
  if (k == fault_kinds().end())
    return reply(false, "inject: fault: expected kill|stop|crash|hang|nan|slow|sdc|nic_down|machine_down|repair");
  if (!connected(m)) return reply(false, "inject: machine " + in.machine + " is not connected");
  if (in.fault == "repair") {
    // Clear the machine's injected faults, then return it to the pool if evicted.
    send(m, json{{"type", "inject"}, {"req", kOwnReqBase + 1}, {"fault", in.fault}, {"detail", ""}});
    const bool pooled = world_->repaired(m);
    return reply(true, in.machine + " repaired" + (pooled ? "; back in the standby pool" : ""));
  }
  world_->record_fault(m, in.fault, in.detail, k->second);
  send(m, json{{"type", "inject"}, {"req", kOwnReqBase + 1}, {"fault", in.fault}, {"detail", in.detail}});
  return reply(true, in.fault + " injected on " + in.machine);
}

void Controller::on_close(std::uint64_t sid, const std::string& why) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  const MachineId m = it->second.machine;
  const bool agent = it->second.role == Session::Role::kAgent;
  if (it->second.role == Session::Role::kChallenged) {
    const Hello& h = it->second.handshake.hello();
    note_unauthenticated("connection from " + it->second.conn->peer() + " (" + h.proof_role() +
                         (h.name.empty() ? "" : " " + h.name) +
                         ") closed before answering the challenge: it did not prove the token (" + why + ")");
  }
  if (it->second.timer) reactor_.cancel_timer(it->second.timer);
  // Destroy the connection after this callback returns.
  auto conn = std::shared_ptr<Conn>(std::move(it->second.conn));
  sessions_.erase(it);
  reactor_.defer([conn] {});
  if (agent && m != kNoMachine) {
    auto ms = machine_session_.find(m);
    if (ms != machine_session_.end() && ms->second == sid) {
      machine_session_.erase(ms);
      if (!shutting_down_) world_->on_agent_lost(m, why);
    }
  }
}

}  // namespace faultline::live
