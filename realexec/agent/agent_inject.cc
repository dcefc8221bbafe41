// The agent's fault injection for drills and tests: ground truth, kept apart from the
// observation channel (the controller records it; the policy never sees it). A fault the
// job itself must express (a fault-file directive) is confirmed only once the job
// acknowledged it, by the id the agent wrote into the directive; one not acknowledged in
// time is taken back out of the file, so it never acts late (PROTOCOL.md, "Fault
// acknowledgement").
#include <sys/file.h>

#include "realexec/agent/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

namespace {

// Runs `fn` holding the flock of the fault file's directory, the lock the jobs take to consume
// a directive (realexec/trainjob/faults.h, python/faultline/faults.py): an append or a removal
// never interleaves with a job's rewrite of the file.
template <typename Fn>
auto with_directory_lock(const std::string& dir, Fn fn) {
  const int lock_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd >= 0) {
    while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  auto out = fn();
  if (lock_fd >= 0) ::close(lock_fd);  // releases the lock
  return out;
}

// Appends `line` to the fault file; "" or why not.
std::string append_directive(const std::string& dir, const std::string& path,
                             const std::string& line) {
  return with_directory_lock(dir, [&]() -> std::string {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const std::string text = line + "\n";
    const bool ok =
        fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const std::string why = ok ? "" : "cannot append to " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return why;
  });
}

// Removes the first line equal to `line` from the fault file (temporary file and rename):
// 1 when it was there, 0 when not (a job consumed it, or the file is gone), -1 on an error
// (*error says it).
int remove_directive(const std::string& dir, const std::string& path, const std::string& line,
                     std::string* error) {
  return with_directory_lock(dir, [&]() -> int {
    std::FILE* f = std::fopen(path.c_str(), "re");
    if (f == nullptr) return 0;
    std::string text;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
    std::string out;
    bool found = false;
    for (std::size_t start = 0; start < text.size();) {
      std::size_t nl = text.find('\n', start);
      const std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
      const std::string raw = text.substr(start, end - start);
      start = end;
      if (!found && trim(raw) == line) {
        found = true;
        continue;
      }
      out += raw;
    }
    if (!found) return 0;
    const std::string tmp = path + ".agent.tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const bool ok = fd >= 0 &&
                    ::write(fd, out.data(), out.size()) == static_cast<ssize_t>(out.size()) &&
                    ::fsync(fd) == 0;
    *error = ok ? "" : tmp + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
      *error = path + ": " + std::strerror(errno);
      return -1;
    }
    return ok ? 1 : -1;
  });
}

std::string join_kinds(const std::set<std::string>& kinds) {
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

void Agent::defer_inject(const json& m, std::int64_t req) {
  // Applied after every message already received: when this agent was stopped, the
  // controller may have given up on the request and sent its `cancel` behind it; the cancel
  // is read first and wins, so a fault nobody waits for never lands late.
  std::weak_ptr<bool> guard = alive_;
  const std::uint64_t epoch = epoch_;
  r_.defer([this, guard, epoch, m, req] {
    if (!guard.lock()) return;
    if (epoch != epoch_ || !conn_ || !conn_->is_open()) {
      log("injection of request " + std::to_string(req) + " dropped: its connection is gone");
      return;
    }
    if (cancelled_injects_.erase(req)) {
      log("injection of request " + std::to_string(req) +
          " cancelled by the controller before it was applied");
      return;
    }
    try {
      handle_inject(m, req);
    } catch (const BadMessage& e) {
      reply_error(req, "inject: " + e.reason);
    } catch (const std::exception& e) {
      reply_error(req, std::string("inject: agent failure: ") + e.what());
    }
  });
}

void Agent::inject_directive(const json& m, std::int64_t req, const std::string& fault) {
  const Instant started = r_.now();
  const std::string detail = opt_string(m, "detail", kMaxDirective).value_or("");
  const auto local = opt_int(m, "local_rank", 0, kMaxLocalRanks - 1);
  const std::int64_t deadline_ms =
      opt_int(m, "deadline_ms", 1, 600000).value_or(kDefaultAckDeadlineMs);
  std::string body = fault;
  if (fault == "crash") {
    body += " " + (detail.empty() ? std::string("injected crash") : detail);
  } else if (fault == "slow" || fault == "sdc") {
    if (auto why = inject_detail_error(fault, detail)) bad("detail: " + *why);
    body += " " + (fault == "sdc" && detail.empty() ? std::string("after=0") : detail);
  }
  if (machine_->workdir.empty()) bad("machine " + name_ + " has no workdir in the config");
  // The rank that is to take it must run, and must take this kind: a fault the job cannot
  // express is refused here, before anything is written or recorded.
  const int target = static_cast<int>(local.value_or(0));
  const Rank* rk = local_rank(target);
  if (rk == nullptr) {
    reply_done(epoch_, req, started,
               {{"ok", false},
                {"detail", "no local rank " + std::to_string(target) + " running to take " + fault +
                               ": nothing injected"}});
    return;
  }
  if (rk->takes_faults && !rk->takes_faults->count(fault)) {
    const std::string takes = join_kinds(*rk->takes_faults);
    reply_done(epoch_, req, started,
               {{"ok", false},
                {"detail", "the job on " + name_ + " (rank " + std::to_string(rk->rank) +
                               ") cannot express " + fault + ": " +
                               (takes.empty() ? std::string("it acknowledges no injected fault")
                                              : "it takes only " + takes) +
                               "; nothing injected"}});
    return;
  }
  std::string id = random_nonce().substr(0, 16);
  while (pending_faults_.count(id)) id = random_nonce().substr(0, 16);
  std::string line = "id=" + id + " ";
  if (local) line += "local_rank=" + std::to_string(*local) + " ";
  line += body;
  std::error_code ec;
  std::filesystem::create_directories(machine_->workdir, ec);
  const std::string why = append_directive(machine_->workdir, machine_->workdir + "/faults", line);
  if (!why.empty()) {
    reply_done(epoch_, req, started, {{"ok", false}, {"detail", why}});
    return;
  }
  log("injected directive '" + line + "'; waiting for the job's acknowledgement");
  auto p = std::make_unique<PendingFault>();
  p->id = id;
  p->kind = fault;
  p->line = line;
  p->local_rank = target;
  p->req = req;
  p->epoch = epoch_;
  p->started = started;
  p->deadline = Duration::millis(deadline_ms);
  std::weak_ptr<bool> guard = alive_;
  p->timer = r_.add_timer(p->deadline, [this, guard, id] {
    if (guard.lock()) expire_fault(id);
  });
  pending_faults_[id] = std::move(p);
}

void Agent::on_fault_ack(Rank& rk, const RankReport& r) {
  auto it = pending_faults_.find(r.fault_id);
  if (it == pending_faults_.end()) {
    // A restarted rank takes a persistent directive again: already confirmed, nothing to do.
    if (std::find(confirmed_faults_.begin(), confirmed_faults_.end(), r.fault_id) !=
        confirmed_faults_.end())
      return;
    note_bad_report(rk, "fault: unknown id '" + r.fault_id + "' (no injection waits for it)");
    return;
  }
  PendingFault& p = *it->second;
  if (p.kind != r.fault || p.local_rank != rk.local_rank) {
    note_bad_report(rk, "fault: id '" + r.fault_id + "' is a " + p.kind + " for local rank " +
                            std::to_string(p.local_rank) + ", acknowledged as " + r.fault +
                            " by local rank " + std::to_string(rk.local_rank));
    return;
  }
  if (p.timer) r_.cancel_timer(p.timer);
  log("rank " + std::to_string(rk.rank) + " took the injected directive '" + p.line + "'");
  reply_done(p.epoch, p.req, p.started,
             {{"ok", true}, {"detail", p.line}, {"id", p.id}, {"rank", rk.rank}});
  confirmed_faults_.push_back(p.id);
  if (confirmed_faults_.size() > kRememberedFaults) confirmed_faults_.pop_front();
  pending_faults_.erase(it);
}

void Agent::expire_fault(const std::string& id) {
  // What the ranks wrote before the deadline counts: their reports are read first.
  for (auto& [rank, rk] : ranks_) on_rank_report(*rk);
  auto it = pending_faults_.find(id);
  if (it == pending_faults_.end()) return;  // acknowledged just now
  std::unique_ptr<PendingFault> p = std::move(it->second);
  pending_faults_.erase(it);
  p->timer = 0;
  withdraw_fault(
      *p, "not acknowledged by the job within " + fmt_seconds(p->deadline.to_seconds()) + " s",
      true);
}

void Agent::withdraw_fault(PendingFault& p, const std::string& why, bool reply) {
  if (p.timer) r_.cancel_timer(p.timer);
  p.timer = 0;
  std::string error;
  const int removed =
      remove_directive(machine_->workdir, machine_->workdir + "/faults", p.line, &error);
  const std::string detail =
      why + (removed > 0    ? ": cancelled (removed from the fault file)"
             : removed == 0 ? ": no longer in the fault file (taken without an acknowledgement, "
                              "or cleared)"
                            : ": cannot remove it from the fault file: " + error);
  log("injected directive '" + p.line + "' " + detail);
  if (reply) reply_done(p.epoch, p.req, p.started, {{"ok", false}, {"detail", detail}});
}

void Agent::withdraw_all_faults(const std::string& why, bool reply) {
  auto pending = std::move(pending_faults_);
  pending_faults_.clear();
  for (auto& [id, p] : pending) withdraw_fault(*p, why, reply);
}

void Agent::handle_cancel(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::int64_t inject_req = need_int(m, "inject_req", 0, kMaxReq);
  for (auto it = pending_faults_.begin(); it != pending_faults_.end(); ++it) {
    if (it->second->req != inject_req || it->second->epoch != epoch_) continue;
    std::unique_ptr<PendingFault> p = std::move(it->second);
    pending_faults_.erase(it);
    withdraw_fault(*p, "cancelled by the controller", true);
    reply_done(epoch_, req, started, {{"ok", true}, {"detail", "cancelled " + p->line}});
    return;
  }
  // Not applied yet (it waits behind this message), or answered already: an inject not yet
  // applied never will be.
  cancelled_injects_.insert(inject_req);
  while (cancelled_injects_.size() > kRememberedFaults)
    cancelled_injects_.erase(cancelled_injects_.begin());
  reply_done(epoch_, req, started, {{"ok", true}, {"detail", "no directive of it pending"}});
}

void Agent::handle_inject(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::uint64_t epoch = epoch_;
  const std::string fault = need_string(m, "fault", 32);
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
      host_->kill_group(rk->pid, SIGKILL);
    } else {
      host_->kill_group(rk->pid, SIGSTOP);
    }
    log("injected " + fault + " into rank " + std::to_string(rk->rank));
    reply_done(epoch, req, started, {{"ok", true}, {"rank", rk->rank}, {"pid", rk->pid}});
    return;
  }
  if (is_file_fault(fault)) return inject_directive(m, req, fault);
  if (fault == "nic_down" || fault == "repair") {
    std::string removed;
    if (fault == "repair") {
      withdraw_all_faults("cleared by a repair", true);
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

}  // namespace faultline::live
