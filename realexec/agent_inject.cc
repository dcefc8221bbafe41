// The agent's fault injection for drills and tests: ground truth, kept apart from the
// observation channel (the controller records it; the policy never sees it).
#include "realexec/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

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
      host_->kill_group(rk->pid, SIGKILL);
    } else {
      host_->kill_group(rk->pid, SIGSTOP);
    }
    log("injected " + fault + " into rank " + std::to_string(rk->rank));
    reply_done(epoch, req, started, {{"ok", true}, {"rank", rk->rank}, {"pid", rk->pid}});
    return;
  }
  if (fault == "crash" || fault == "hang" || fault == "nan" || fault == "slow" || fault == "sdc") {
    std::string line = fault;
    if (fault == "crash") {
      line += " " + (detail.empty() ? std::string("injected crash") : detail);
    } else if (fault == "slow" || fault == "sdc") {
      if (auto why = inject_detail_error(fault, detail)) bad("detail: " + *why);
      line += " " + (fault == "sdc" && detail.empty() ? std::string("after=0") : detail);
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

}  // namespace faultline::live
