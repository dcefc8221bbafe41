// The agent's training ranks: launch with the job's environment, report and stderr
// streams, exits, and kills with a reaping deadline.
#include "realexec/agent/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

std::map<int, pid_t> Agent::rank_pids() const {
  std::map<int, pid_t> out;
  for (const auto& [rank, rk] : ranks_) out[rank] = rk->pid;
  return out;
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

std::string Agent::rendezvous_key(const std::string& what) const {
  return hmac_sha256_hex(token_, "faultline-rendezvous/1\n" + what);
}

std::string Agent::quorum_key(std::int64_t gen) const {
  return rendezvous_key("quorum\n" + std::to_string(gen));
}

std::string Agent::child_cwd() const {
  std::error_code ec;
  if (!machine_->workdir.empty() && std::filesystem::is_directory(machine_->workdir, ec)) {
    return machine_->workdir;
  }
  return "";
}

// Replica groups (python/faultline/replicas.py): the replicas' count, their collectives'
// timeout and the quorum they start in, written to the quorum file before they start.
struct agent_detail::ReplicaLaunch {
  std::int64_t count = 1;
  double timeout_s = 60;
  Quorum quorum;
};

// A launch request, decoded: what every rank's environment is made of (rank_env).
struct agent_detail::LaunchPlan {
  std::int64_t gen = 0, world = 1, master_port = 0, ckpt_every = 0;
  std::string master_addr;
  std::size_t local_world = 0;  // the ranks this agent runs
  bool reform = false, in_place = false;
  const ReplicaLaunch* replicas = nullptr;  // none: no replica groups
};

namespace {

std::optional<ReplicaLaunch> replica_launch(const json& m, std::size_t ranks) {
  const auto it = m.find("replicas");
  if (it == m.end()) return std::nullopt;
  if (!it->is_object()) bad("replicas: expected {count, timeout_s, quorum}");
  ReplicaLaunch r;
  r.count = need_int(*it, "count", 1, 99);
  r.timeout_s = opt_number(*it, "timeout_s", 0.1, 86400).value_or(60);
  if (!it->contains("quorum")) bad("replicas.quorum: required");
  r.quorum = decode_quorum(it->at("quorum"));
  if (ranks != 1) bad("replicas: expected one rank per machine");
  return r;
}

// A replica's environment: FAULTLINE_REPLICA, _REPLICAS, _QUORUM_FILE, _STORE_PORT (the store
// it hosts) and _REPLICA_TIMEOUT_S.
void replica_env(const ReplicaLaunch& r, std::int64_t rank, std::int64_t master_port,
                 const std::string& quorum_file, std::map<std::string, std::string>& env) {
  env["FAULTLINE_REPLICA"] = std::to_string(rank);
  env["FAULTLINE_REPLICAS"] = std::to_string(r.count);
  env["FAULTLINE_QUORUM_FILE"] = quorum_file;
  env["FAULTLINE_STORE_PORT"] = std::to_string(master_port + 1 + rank);
  env["FAULTLINE_REPLICA_TIMEOUT_S"] = fmt_seconds(r.timeout_s);
}

// A launch's `ranks`: (rank, local_rank) pairs, each unique, rank below `world`.
std::vector<std::pair<int, int>> launch_ranks(const json& m, std::int64_t world) {
  auto rit = m.find("ranks");
  if (rit == m.end() || !rit->is_array() || rit->empty() ||
      rit->size() > static_cast<std::size_t>(kMaxLocalRanks)) {
    bad("ranks: expected an array of 1.." + std::to_string(kMaxLocalRanks) +
        " {rank, local_rank} objects");
  }
  std::vector<std::pair<int, int>> wanted;
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
  return wanted;
}

}  // namespace

std::string Agent::in_place_refusal(const std::vector<std::pair<int, int>>& wanted) const {
  for (const auto& [rank, rk] : ranks_) {
    const bool wanted_rank = std::any_of(wanted.begin(), wanted.end(),
                                         [r = rank](const auto& w) { return w.first == r; });
    if (!rk->holding || !wanted_rank)
      return "in place: rank " + std::to_string(rank) + " (generation " + std::to_string(rk->gen) +
             ") runs and does not hold in place";
  }
  return "";
}

void Agent::handle_launch(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::int64_t gen = need_int(m, "gen", 0, kMaxReq);
  const std::string version = need_string(m, "version", 128);
  const std::int64_t world = need_int(m, "world_size", 1, 1 << 20);
  const std::string master_addr = need_host(m, "master_addr");
  const std::int64_t master_port = need_int(m, "master_port", 1, 65535);
  const std::int64_t ckpt_every = opt_int(m, "ckpt_every", 0, 1000000000).value_or(0);
  // PROTOCOL.md, "In-place restarts": where re-form directives come; keep the holding ranks.
  const bool reform = opt_bool(m, "reform", false);
  const bool in_place = opt_bool(m, "in_place", false);
  auto vit = config_.job.versions.find(version);
  if (vit == config_.job.versions.end() || vit->second.empty()) {
    bad("version: unknown code version '" + version + "'");
  }
  const std::vector<std::pair<int, int>> wanted = launch_ranks(m, world);  // (rank, local_rank)
  const std::optional<ReplicaLaunch> replicas = replica_launch(m, wanted.size());
  if (in_place && replicas) bad("in_place: not with replicas");
  if (std::string why = in_place ? in_place_refusal(wanted) : ""; !why.empty()) {
    reply_done(epoch_, req, started, {{"ok", false}, {"detail", why}});
    return;
  }
  if (!ranks_.empty() && !in_place) {
    // Ranks of an older generation still run (the controller could not kill them: this
    // agent was silent when its machine was evicted, or the kill was lost). They die before
    // the new ones start, within a bounded wait; the launch then goes on, or fails saying
    // which did not die. Refusing instead made a controller retry forever.
    log("launch of generation " + std::to_string(gen) + ": killing the " +
        std::to_string(ranks_.size()) + " ranks of generation " + std::to_string(gen_) +
        " still running first");
    kill_all_ranks();
    launch_after_reaping(m, req, started,
                         r_.now() + std::min(options_.kill_timeout, Duration::seconds(10)));
    return;
  }
  if (machine_->workdir.empty()) bad("machine " + name_ + " has no workdir in the config");
  if (std::string err = make_workdirs(); !err.empty()) {
    reply_done(epoch_, req, started, {{"ok", false}, {"detail", err}});
    return;
  }

  if (replicas) {
    // A quorum file left by an earlier generation names a store that is gone.
    if (std::string err = write_quorum(replicas->quorum, gen); !err.empty()) {
      reply_done(epoch_, req, started, {{"ok", false}, {"detail", err}});
      return;
    }
  }
  gen_ = gen;
  const LaunchPlan plan{gen,        world,       master_port,
                        ckpt_every, master_addr, wanted.size(),
                        reform,     in_place,    replicas ? &*replicas : nullptr};
  json pids = json::object();
  std::string failure;
  std::vector<int> kept;
  for (const auto& [rank, local] : wanted) {
    if (in_place && ranks_.count(rank)) {  // holding: its directive, and it stays
      if (std::string err = write_reform(rank, gen, master_addr, master_port); !err.empty()) {
        failure = "rank " + std::to_string(rank) + ": " + err;
        break;
      }
      keep_holding_rank(rank, gen, pids);
      kept.push_back(rank);
      continue;
    }
    std::map<std::string, std::string> env = rank_env(plan, rank, local);
    if (failure = spawn_rank(rank, local, gen, vit->second, std::move(env), pids); !failure.empty())
      break;
  }
  if (!failure.empty()) {
    log("launch of generation " + std::to_string(gen) + " failed: " + failure);
    kill_all_ranks();  // their exits follow
    reply_done(epoch_, req, started, {{"ok", false}, {"detail", failure}, {"pids", pids}});
    return;
  }
  log((in_place ? "re-formed generation " : "launched generation ") + std::to_string(gen) +
      (in_place ? " in place (" : " (") + version + "): " +
      (in_place ? std::to_string(kept.size()) + " ranks kept, " +
                      std::to_string(wanted.size() - kept.size()) + " launched"
                : std::to_string(wanted.size()) + " ranks"));
  reply_done(epoch_, req, started,
             {{"ok", true}, {"gen", gen}, {"pids", pids}, {"kept", json(kept)}});
}

std::string Agent::make_workdirs() const {
  std::error_code ec;
  for (const char* sub : {"/ckpt", "/logs"}) {
    std::filesystem::create_directories(machine_->workdir + sub, ec);
    if (ec) return "cannot create " + machine_->workdir + sub + ": " + ec.message();
  }
  return "";
}

void Agent::keep_holding_rank(int rank, std::int64_t gen, json& pids) {
  ranks_.at(rank)->gen = gen;
  ranks_.at(rank)->holding = false;
  pids[std::to_string(rank)] = ranks_.at(rank)->pid;
}

std::map<std::string, std::string> Agent::rank_env(const LaunchPlan& l, int rank, int local) const {
  std::map<std::string, std::string> env = base_env();
  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(l.world);
  env["LOCAL_RANK"] = std::to_string(local);
  env["LOCAL_WORLD_SIZE"] = std::to_string(l.local_world);
  env["MASTER_ADDR"] = l.master_addr;
  env["MASTER_PORT"] = std::to_string(l.master_port);
  env["FAULTLINE_CKPT_EVERY"] = std::to_string(l.ckpt_every);
  env["FAULTLINE_REPORT_FD"] = "3";
  env["FAULTLINE_GEN"] = std::to_string(l.gen);
  env["FAULTLINE_RENDEZVOUS_KEY"] =
      rendezvous_key("launch\n" + std::to_string(l.gen) + "\n" + l.master_addr + ":" +
                     std::to_string(l.master_port));
  if (l.replicas) {
    replica_env(*l.replicas, rank, l.master_port, quorum_file(), env);
    env["FAULTLINE_QUORUM_KEY"] = quorum_key(l.gen);
  }
  if (l.reform || l.in_place) env["FAULTLINE_REFORM_FILE"] = reform_file(rank);
  if (l.in_place) env["FAULTLINE_IN_PLACE"] = "1";
  for (const auto& [k, v] : config_.job.env) env[k] = v;
  return env;
}

std::string Agent::spawn_rank(int rank, int local, std::int64_t gen,
                              const std::vector<std::string>& argv,
                              std::map<std::string, std::string> env, json& pids) {
  // The rank's Python stack dumps (stack_capture.h, capture_python_stack): fd 4, the agent's own
  // descriptor, after job.env (the agent reads only this one).
  const int stack_fd = host_->stack_dump_fd("faultline-stacks-rank" + std::to_string(rank));
  if (stack_fd >= 0) {
    env["FAULTLINE_STACK_FD"] = "4";
  } else {
    env.erase("FAULTLINE_STACK_FD");
  }

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    if (stack_fd >= 0) ::close(stack_fd);
    return std::string("socketpair: ") + std::strerror(errno);
  }
  const std::string log_path = machine_->workdir + "/logs/rank" + std::to_string(rank) + ".gen" +
                               std::to_string(gen) + ".log";
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = make_env(env);
  spec.cwd = machine_->workdir;
  spec.stdout_to = Redirect::file(log_path);
  spec.stderr_to = Redirect::pipe();
  spec.extra_fds[3] = sp[1];
  if (stack_fd >= 0) spec.extra_fds[4] = stack_fd;
  Spawned out;
  std::string err;
  bool ok = host_->spawn_rank(spec, &out, &err);
  ::close(sp[1]);
  if (!ok) {
    ::close(sp[0]);
    if (stack_fd >= 0) ::close(stack_fd);
    return "rank " + std::to_string(rank) + ": " + err;
  }
  adopt_rank(rank, local, gen, out, sp[0], stack_fd, log_path);
  pids[std::to_string(rank)] = out.pid;
  return "";
}

void Agent::adopt_rank(int rank, int local_rank, std::int64_t gen, const Spawned& out,
                       int report_fd, int stack_fd, const std::string& log_path) {
  auto rk = std::make_unique<Rank>();
  rk->rank = rank;
  rk->local_rank = local_rank;
  rk->gen = gen;
  rk->pid = out.pid;
  rk->report_fd = report_fd;
  rk->stack_fd = stack_fd;
  rk->stderr_fd = out.stderr_fd;
  rk->log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  agent_detail::set_nonblocking(rk->report_fd);  // net/proc.cc has its own
  Rank* raw = rk.get();
  ranks_[rank] = std::move(rk);
  r_.add_fd(raw->report_fd, EPOLLIN, [this, raw](std::uint32_t) { on_rank_report(*raw); });
  if (raw->stderr_fd >= 0) {
    r_.add_fd(raw->stderr_fd, EPOLLIN, [this, raw](std::uint32_t) { on_rank_stderr(*raw); });
  }
  std::weak_ptr<bool> guard = alive_;
  host_->watch_rank(r_, out.pid, [this, guard, rank](int status) {
    if (guard.lock()) on_rank_exit(rank, status);
  });
}

void Agent::launch_after_reaping(const json& m, std::int64_t req, Instant started, Instant until) {
  std::weak_ptr<bool> guard = alive_;
  const std::uint64_t epoch = epoch_;
  r_.add_timer(Duration::millis(20), [this, guard, epoch, m, req, started, until] {
    if (!guard.lock() || epoch != epoch_) return;  // the agent, or the session that asked, is gone
    if (ranks_.empty()) {
      try {
        handle_launch(m, req);
      } catch (const BadMessage& e) {
        reply_error(req, "launch: " + e.reason);
      }
      return;
    }
    if (r_.now() >= until) {
      reply_done(epoch, req, started,
                 {{"ok", false},
                  {"detail", std::to_string(ranks_.size()) + " ranks of generation " +
                                 std::to_string(gen_) + " not reaped within " +
                                 fmt_seconds((until - started).to_seconds()) +
                                 " s of SIGKILL; not launching over them"}});
      return;
    }
    launch_after_reaping(m, req, started, until);
  });
}

std::string Agent::write_reform(int rank, std::int64_t gen, const std::string& master_addr,
                                std::int64_t master_port) const {
  const std::string path = reform_file(rank);
  const std::string tmp = path + ".tmp";
  const json d{{"gen", gen},
               {"rank", rank},
               {"master_addr", master_addr},
               {"master_port", master_port},
               {"rendezvous_key", rendezvous_key("launch\n" + std::to_string(gen) + "\n" +
                                                 master_addr + ":" + std::to_string(master_port))}};
  const std::string text = d.dump() + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const std::string why = ok ? "" : tmp + ": " + std::strerror(errno);
  if (fd >= 0) ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) return path + ": " + std::strerror(errno);
  return why;
}

std::string Agent::write_quorum(const Quorum& q, std::int64_t gen) const {
  if (machine_->workdir.empty()) return "machine " + name_ + " has no workdir in the config";
  const std::string path = quorum_file();
  const std::string tmp = path + ".tmp";
  json signed_quorum = encode(q);
  signed_quorum["mac"] = quorum_mac(quorum_key(gen), q);
  const std::string text = signed_quorum.dump() + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  const std::string why = ok ? "" : tmp + ": " + std::strerror(errno);
  if (fd >= 0) ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) return path + ": " + std::strerror(errno);
  return why;
}

void Agent::handle_quorum(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::int64_t gen = need_int(m, "gen", 0, kMaxReq);
  if (!m.contains("quorum")) bad("quorum: required");
  const Quorum q = decode_quorum(m.at("quorum"));
  if (gen != gen_) {
    reply_done(epoch_, req, started,
               {{"ok", false},
                {"detail", "generation " + std::to_string(gen) + " is not the one running (" +
                               std::to_string(gen_) + ")"}});
    return;
  }
  const std::string err = write_quorum(q, gen);
  if (err.empty()) log("quorum " + std::to_string(q.number) + " written");
  reply_done(epoch_, req, started, {{"ok", err.empty()}, {"detail", err}});
}

void Agent::handle_kill(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  auto gen = opt_int(m, "gen", 0, kMaxReq);
  if (opt_bool(m, "spare_holding", false)) {
    const double grace = opt_number(m, "hold_grace_s", 0, 60).value_or(0);
    kill_sparing(req, epoch_, started, started + Duration::seconds(grace), false, gen);
    return;
  }
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

void Agent::kill_sparing(std::int64_t req, std::uint64_t epoch, Instant started,
                         Instant grace_until, bool killed, std::optional<std::int64_t> gen) {
  if (epoch != epoch_) return;  // the session that asked is gone
  const auto newer = [gen](const Rank& rk) { return gen && rk.gen > *gen; };
  std::vector<int> spared;
  std::size_t others = 0;
  for (const auto& [rank, rk] : ranks_) {
    if (newer(*rk)) continue;
    if (rk->holding && !rk->killed_by_agent)
      spared.push_back(rank);
    else
      ++others;
  }
  if (others == 0) {
    if (!spared.empty())
      log("kill: " + std::to_string(spared.size()) + " ranks hold in place, spared");
    reply_done(epoch, req, started, {{"ok", true}, {"spared", json(spared)}});
    return;
  }
  const Instant now = r_.now();
  if (now >= grace_until && !killed) {
    for (auto& [rank, rk] : ranks_) {
      if (newer(*rk) || (rk->holding && !rk->killed_by_agent)) continue;
      rk->killed_by_agent = true;
      host_->signal_group(rk->pid, SIGKILL);
    }
    killed = true;
  }
  if (killed && now >= grace_until + options_.kill_timeout) {
    reply_done(epoch, req, started,
               {{"ok", false},
                {"detail", std::to_string(others) + " ranks not reaped after " +
                               fmt_seconds(options_.kill_timeout.to_seconds()) + " s"}});
    return;
  }
  std::weak_ptr<bool> guard = alive_;
  r_.add_timer(Duration::millis(20), [this, guard, req, epoch, started, grace_until, killed, gen] {
    if (guard.lock()) kill_sparing(req, epoch, started, grace_until, killed, gen);
  });
}

Agent::Rank* Agent::local_rank(int local) {
  for (auto& [rank, rk] : ranks_) {
    if (rk->local_rank == local) return rk.get();
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// Ranks

void Agent::kill_all_ranks() {
  for (auto& [rank, rk] : ranks_) {
    rk->killed_by_agent = true;
    host_->signal_group(rk->pid, SIGKILL);
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
  for (int* fd : {&rk.log_fd, &rk.stack_fd}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
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
      // Decoded here; what goes on is the parsed object with the fields live mode reads in
      // their canonical encoding (a bare NaN becomes null plus a flag).
      RankReport report;
      json forwarded;
      try {
        report = parse_rank_report_line(line, &forwarded);
      } catch (const BadMessage& e) {
        note_bad_report(rk, e.reason);
        continue;
      }
      if (report.type == "fault") {
        // Ground truth, for the agent alone: the acknowledgement of an injected directive.
        // Its step before it stays before it.
        flush_step(rk);
        on_fault_ack(rk, report);
        continue;
      }
      if (report.type == "holding") rk.holding = true;
      if (report.type == "started") rk.holding = false;
      // Its Python stacks on a signal, when it has the agent's descriptor to write them to.
      if (report.type == "started")
        rk.stack_signal = rk.stack_fd >= 0 ? stack_signal_number(report.stack_signal) : 0;
      if (report.type == "started")
        rk.takes_faults = report.faults
                              ? std::set<std::string>(report.faults->begin(), report.faults->end())
                              : std::set<std::string>{};
      if (report.type == "fatal" && !report.signature.empty())
        rk.fatal_signature = report.signature;
      forwarded.update(encode(report));
      forward_report(
          rk, {{"type", "report"}, {"gen", rk.gen}, {"rank", rk.rank}, {"report", forwarded}},
          report.type == "step");
    }
    rk.report_buf.erase(0, start);
    if (rk.report_buf.size() > kMaxReportLine) {
      rk.report_buf.clear();
      rk.report_skipping = true;
      note_bad_report(rk, "longer than 4 KiB");
    }
  }
}

void Agent::forward_report(Rank& rk, json msg, bool step) {
  if (!step) {
    flush_step(rk);  // the step before it stays before it
    send(std::move(msg), Delivery::kDrop);
    return;
  }
  const Instant now = r_.now();
  if (rk.tokens_at.ns == 0) rk.step_tokens = kStepReportBurst;
  rk.step_tokens = std::min(kStepReportBurst,
                            rk.step_tokens + (now - rk.tokens_at).to_seconds() * kStepReportsPerS);
  rk.tokens_at = now;
  if (!rk.pending_step && rk.step_tokens >= 1) {
    rk.step_tokens -= 1;
    send(std::move(msg), Delivery::kDrop);
    return;
  }
  if (rk.pending_step) {
    ++rk.coalesced;
  } else if (rk.coalesced == 0) {
    log("rank " + std::to_string(rk.rank) + " reports steps faster than " +
        fmt_seconds(kStepReportsPerS) +
        " a second: coalescing them, the newest goes to the controller");
  }
  rk.pending_step = std::move(msg);
  if (rk.flush_timer == 0) {
    std::weak_ptr<bool> guard = alive_;
    const int rank = rk.rank;
    const std::int64_t gen = rk.gen;
    rk.flush_timer =
        r_.add_timer(Duration::seconds(1 / kStepReportsPerS), [this, guard, rank, gen] {
          if (!guard.lock()) return;
          auto it = ranks_.find(rank);
          if (it == ranks_.end() || it->second->gen != gen) return;
          it->second->flush_timer = 0;
          flush_step(*it->second);
        });
  }
}

void Agent::flush_step(Rank& rk) {
  if (rk.flush_timer) {
    r_.cancel_timer(rk.flush_timer);
    rk.flush_timer = 0;
  }
  if (!rk.pending_step) return;
  json msg = std::move(*rk.pending_step);
  rk.pending_step.reset();
  rk.step_tokens = std::max(0.0, rk.step_tokens - 1);
  send(std::move(msg), Delivery::kDrop);
}

// The first few dropped lines of a rank, then one per 1000: a rank that writes junk must
// not fill the agent's log.
void Agent::note_bad_report(Rank& rk, const std::string& reason) {
  ++rk.bad_reports;
  if (rk.bad_reports > 5 && rk.bad_reports % 1000 != 0) return;
  log("rank " + std::to_string(rk.rank) + ": report line dropped: " + reason +
      (rk.bad_reports > 5 ? " (" + std::to_string(rk.bad_reports) + " dropped so far)" : ""));
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
  flush_step(rk);  // its newest step before its exit
  if (rk.coalesced > 0)
    log("rank " + std::to_string(rk.rank) + ": " + std::to_string(rk.coalesced) +
        " step reports coalesced (only the newest of each burst went to the controller)");
  std::string signature;
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  // Only the wait status says whether the agent's SIGKILL ended the rank: one that exited
  // with a code of its own, or of another signal, had died before the kill landed (a crash
  // just before a stop reached this agent), and its exit is its own.
  const bool by_agents_kill =
      rk.killed_by_agent && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (!by_agents_kill && !clean_exit) {
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

}  // namespace faultline::live
