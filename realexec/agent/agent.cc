// The agent: connection management, request dispatch and host inspection, all on one
// reactor (the ranks: agent_ranks.cc; stop-time tests: agent_probes.cc; fault injection:
// agent_inject.cc; shared internals: agent_internal.h).
//
// Validation throws BadMessage inside a handler; on_message turns it into an `error`
// reply, so a malformed request never reaches a half-done state.
#include "realexec/agent/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

Agent::Agent(Reactor& r, const LiveConfig& config, std::string name, std::string token,
             AgentOptions options)
    : r_(r),
      config_(config),
      name_(std::move(name)),
      token_(std::move(token)),
      options_(std::move(options)),
      backoff_(options_.backoff_min) {
  host_ = options_.host ? options_.host : std::make_shared<AgentHost>();
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
  withdraw_all_faults("the agent stopped", false);
  *alive_ = false;
  kill_all_ranks();
  for (auto& [rank, rk] : ranks_) close_rank_fds(*rk);
  for (auto& w : children_) {
    if (auto c = w.lock()) c->cancel();
  }
  for (auto& k : kills_) r_.cancel_timer(k->timer);
  for (auto& [req, p] : relayed_) {
    if (p->timer) r_.cancel_timer(p->timer);
    std::error_code ec;
    std::filesystem::remove(p->path, ec);
  }
  for (auto& [kind, t] : inspect_timers_) r_.cancel_timer(t);
  if (redial_timer_) r_.cancel_timer(redial_timer_);
  if (heartbeat_timer_) r_.cancel_timer(heartbeat_timer_);
  conn_.reset();
}

void Agent::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << log_stamp() << " faultline agent " << name_ << ": " << line << std::endl;
  }
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
  int fd = host_->dial(config_.controller_host, config_.controller_port, &err);
  if (fd < 0) {
    log("cannot dial the controller: " + err);
    schedule_redial();
    return;
  }
  ++epoch_;
  refused_ = 0;
  cancelled_injects_.clear();  // requests of an earlier connection
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
  handshake_ = std::make_unique<PeerHandshake>("agent", name_);
  conn_->send(handshake_->hello(kProtocolVersion));
  // A controller that accepts and never finishes the handshake (a wedged one, a port held
  // by something else) must not hold the agent: no welcome by the deadline, and it redials.
  const std::uint64_t epoch = epoch_;
  r_.add_timer(options_.handshake_timeout, [this, guard, epoch] {
    if (!guard.lock() || epoch != epoch_ || welcomed_ || !conn_ || !conn_->is_open()) return;
    conn_->close("no welcome within " + fmt_seconds(options_.handshake_timeout.to_seconds()) +
                 " s of connecting (handshake deadline)");
  });
}

void Agent::schedule_redial() {
  if (finished_ || redial_timer_ != 0) return;
  std::weak_ptr<bool> guard = alive_;
  redial_timer_ = r_.add_timer(backoff_, [this, guard] {
    if (guard.lock()) dial();
  });
  backoff_ = std::min(backoff_ * 2, options_.backoff_max);
}

json Agent::auth_fields() const {
  json ranks = json::array();
  for (const auto& [rank, rk] : ranks_) {
    ranks.push_back({{"rank", rk->rank}, {"local_rank", rk->local_rank}, {"pid", rk->pid}});
  }
  return {{"pid", ::getpid()}, {"gen", gen_}, {"ranks", ranks}};
}

void Agent::on_close(const std::string& why) {
  const bool was_welcomed = welcomed_;
  welcomed_ = false;
  conn_.reset();
  // Nobody waits for their confirmation any more: none of them may act later.
  withdraw_all_faults("the connection to the controller closed", false);
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
    if (d == Delivery::kDrop && conn_->backlog() > kDropAboveBytes) {
      // The controller reads slower than we write: drop what can be dropped, and say so
      // (once per episode), instead of letting the queue grow until the connection goes.
      if (dropped_for_backlog_++ == 0)
        log("the controller is behind (" + std::to_string(conn_->backlog() >> 20) +
            " MiB unsent): dropping reports and alerts until it catches up");
      return;
    }
    if (dropped_for_backlog_ > 0 && conn_->backlog() <= kDropAboveBytes / 2) {
      log("the controller caught up: " + std::to_string(dropped_for_backlog_) +
          " reports and alerts dropped");
      dropped_for_backlog_ = 0;
    }
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
  // Every refusal is answered; the log gets the first few of a connection, then one per 1000.
  ++refused_;
  if (refused_ <= 20 || refused_ % 1000 == 0)
    log("invalid request " + (req >= 0 ? std::to_string(req) : std::string("?")) + ": " + reason +
        (refused_ > 20 ? " (" + std::to_string(refused_) + " refused on this connection)" : ""));
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
    // Until the controller has proved the token (auth.h), only its challenge or a refusal
    // is read; anything else ends the connection. The agent never obeys a controller that
    // has not proved it holds the token, and never sends it a proof of its own.
    if (type == "challenge" && handshake_ && !handshake_->verified()) {
      Challenge c;
      try {
        c = decode_challenge(m);
      } catch (const BadMessage& e) {
        log("the controller at " + conn_->peer() + " sent an invalid challenge (" + e.reason +
            "); closing");
        conn_->close("invalid challenge");
        return;
      }
      auto answer = handshake_->answer(token_, c);
      if (!answer) {
        log("the controller at " + conn_->peer() +
            " failed authentication: its proof does not match our token (not our controller, or "
            "another "
            "token); not talking to it");
        conn_->close("the controller failed authentication");
        return;
      }
      answer->update(auth_fields());
      conn_->send(*answer);
      return;
    }
    if (type != "refused" && (!handshake_ || !handshake_->verified())) {
      log("the controller at " + (conn_ ? conn_->peer() : std::string("?")) + " sent '" +
          type.substr(0, 32) + "' before proving the token; closing");
      if (conn_) conn_->close("message before authentication");
      return;
    }
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
    host_->on_request(type);
    if (type == "launch") return handle_launch(m, req);
    if (type == "kill") return handle_kill(m, req);
    if (type == "quorum") return handle_quorum(m, req);
    if (type == "inspect") return handle_inspect(m, req);
    if (type == "probe") return handle_probe(m, req);
    if (type == "capture") return handle_capture(m, req);
    if (type == "replay") return handle_replay(m, req);
    if (type == "inject") return defer_inject(m, req);
    if (type == "cancel") return handle_cancel(m, req);
    if (type == "rendezvous") return handle_rendezvous(m, req);
    if (type == "shutdown") return handle_shutdown(m, req);
    bad("type: unknown message type '" + type.substr(0, 64) + "'");
  } catch (const BadMessage& e) {
    reply_error(req, (type.empty() ? "" : type + ": ") + e.reason);
  } catch (const std::exception& e) {
    // A runtime failure while executing a valid request (e.g. out of fds).
    reply_error(req, (type.empty() ? "" : type + ": ") + "agent failure: " + e.what());
  }
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
  if (options_.on_finish) {
    options_.on_finish(code);
  } else {
    r_.stop();
  }
}

}  // namespace faultline::live
