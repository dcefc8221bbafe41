// The agent's stop-time work: probes in child processes with deadlines, stack capture
// with gdb, and replays of the job on a group of machines.
#include "kernels/probe_exit_codes.h"
#include "realexec/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

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
          if (res.timed_out || code == kernels::kExitDeadline) {
            body["ok"] = false;
            body["timed_out"] = true;
            body["detail"] = res.timed_out ? "killed at the deadline" : "deadline_exceeded";
          } else if (code == kernels::kExitPass) {
            body["ok"] = true;
            body["detail"] = verdict.empty() ? "pass" : verdict;
          } else if (code == kernels::kExitNoGpu) {
            body["ok"] = true;
            body["detail"] = "no_gpu";
          } else {
            body["ok"] = false;
            std::string why = code == kernels::kExitUsage ? "usage error" : verdict.empty() ? "fail" : verdict;
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

}  // namespace faultline::live
