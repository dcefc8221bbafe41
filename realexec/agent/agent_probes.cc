// The agent's stop-time work: probes in child processes with deadlines, stack capture
// with gdb, and replays of the job on a group of machines.
#include "kernels/probe_exit_codes.h"
#include "realexec/agent/agent_internal.h"

namespace faultline::live {

using namespace agent_detail;

namespace {

// The reply to a probe the training job ran (inter_all_gather, bitwise, stress).
json trainjob_probe_body(const std::string& test, const ChildResult& res) {
  json body = {{"test", test}, {"timed_out", res.timed_out}};
  if (!res.started) {
    body["ok"] = false;
    body["detail"] = res.spawn_error;
    return body;
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
  // The all-gather's own time, without the process start: what a grouped probe compares.
  if (ok && test == "inter_all_gather" && line.is_object() && line.contains("seconds") &&
      line["seconds"].is_number())
    body["collective_s"] = line["seconds"];
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
  return body;
}

// The JSON report faultline-probe wrote (one document on stdout), or null.
json probe_report_of(const ChildResult& res) {
  json report = json::parse(res.out, nullptr, false);
  if (report.is_discarded() || !report.is_object()) report = last_json_line(res.out);
  return report.is_object() ? report : json();
}

// The probe's verdict, "" when it gave none; with one, it and the report go into the reply.
std::string add_verdict(const json& report, json& body) {
  if (!report.is_object() || !report.contains("verdict") || !report["verdict"].is_string())
    return "";
  body["verdict"] = report["verdict"];
  body["report"] = report;
  // faultline-probe's timed NCCL all-gather, per iteration, when it ran one.
  if (report.contains("metrics") && report["metrics"].is_object()) {
    const json& m = report["metrics"];
    if (auto it = m.find("nccl_all_gather_time_us"); it != m.end() && it->is_number())
      body["collective_s"] = it->get<double>() / 1e6;
  }
  return report["verdict"].get<std::string>();
}

// The last note of a probe report: why it failed, in its own words.
std::string last_note(const json& report) {
  if (!report.is_object() || !report.contains("notes") || !report["notes"].is_array() ||
      report["notes"].empty())
    return "";
  const json& n = report["notes"].back();
  if (!n.is_string()) return "";
  std::string s = n.get<std::string>();
  if (s.size() > kMaxSignature) s.resize(kMaxSignature);
  return s;
}

// The reply to a probe faultline-probe ran (gpu_diag, intra_all_to_all).
json kernel_probe_body(const std::string& test, const ChildResult& res) {
  json body = {{"test", test}, {"timed_out", false}};
  if (!res.started) {
    body["ok"] = false;
    body["detail"] = res.spawn_error;
    return body;
  }
  const std::string verdict = add_verdict(probe_report_of(res), body);
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
    std::string why = code == kernels::kExitUsage ? "usage error"
                      : verdict.empty()           ? "fail"
                                                  : verdict;
    std::string last = last_line(res.err);
    body["detail"] = why + " (" + describe_wait_status(res.wait_status) + ")" +
                     (last.empty() ? "" : ": " + last);
  }
  return body;
}

// How far a relayed all-gather's rendezvous got, as the probe's report says; "not_reached"
// when it does not say (one killed or crashed before saying did not join).
std::string rendezvous_of(const json& report) {
  if (report.is_object() && report.contains("details") && report["details"].is_object()) {
    const json& d = report["details"];
    if (d.contains("rendezvous") && d["rendezvous"].is_string()) {
      const std::string v = d["rendezvous"];
      if (v == "ok" || v == "timed_out" || v == "failed") return v;
    }
  }
  return "not_reached";
}

}  // namespace

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
  auto child = host_->run(r_, std::move(spec), deadline, [guard, done](const ChildResult& res) {
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
    run_tracked(std::move(spec), deadline,
                [this, epoch, req, started, test](const ChildResult& res) {
                  reply_done(epoch, req, started, kernel_probe_body(test, res));
                });
    return;
  }

  if (test == "inter_all_gather" && opt_bool(m, "rendezvous", false) &&
      !config_.probe_bin.empty()) {
    run_relayed_all_gather(m, req, started, deadline_ms, std::move(env));
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
    env["FAULTLINE_RENDEZVOUS_KEY"] = rendezvous_key(
        "probe\n" + env["MASTER_ADDR"] + ":" + env["MASTER_PORT"] + "\n" + std::to_string(world));
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
    reply_done(epoch, req, started, trainjob_probe_body(test, res));
  });
}

// --- inter_all_gather across machines, the rendezvous relayed by the controller ----------
// faultline-probe nccl runs with a rendezvous file of its own on each machine. Rank 0's probe
// writes the NCCL unique id there (atomically: a temporary name renamed into place); this agent
// polls for it and sends it to the controller, which relays it over the authenticated channel to
// the agents of the same request, which write it to their probes' files. No port is opened for
// it. Without a GPU the probe does the rendezvous alone (random bytes for an id) and reports
// no_gpu; the data path is then tested by the training job's CPU all-gather, as without
// probe_bin, within what is left of the deadline.

void Agent::run_relayed_all_gather(const json& m, std::int64_t req, Instant started,
                                   std::int64_t deadline_ms,
                                   std::map<std::string, std::string> env) {
  const std::uint64_t epoch = epoch_;
  const std::int64_t world = need_int(m, "world_size", 1, 1 << 20);
  const std::int64_t rank = need_int(m, "rank", 0, world - 1);
  const std::string master_addr = need_host(m, "master_addr");
  const std::int64_t master_port = need_int(m, "master_port", 1, 65535);
  if (auto it = relayed_.find(req); it != relayed_.end() && it->second->epoch == epoch)
    bad("req: an inter_all_gather probe of request " + std::to_string(req) + " already runs");
  const std::string base =
      child_cwd().empty() ? std::filesystem::temp_directory_path().string() : child_cwd();
  const std::string dir = base + "/rendezvous";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  auto p = std::make_shared<RelayedProbe>();
  p->req = req;
  p->epoch = epoch;
  p->rank = rank;
  // Fresh for this run: a file left by an earlier one would be read as this run's id.
  p->path = dir + "/probe-" + std::to_string(::getpid()) + "-" + std::to_string(epoch) + "-" +
            std::to_string(req) + "-" + std::to_string(r_.now().ns);
  std::filesystem::remove(p->path, ec);
  relayed_[req] = p;

  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["MASTER_ADDR"] = master_addr;
  env["MASTER_PORT"] = std::to_string(master_port);
  env["FAULTLINE_RENDEZVOUS_KEY"] = rendezvous_key(
      "probe\n" + master_addr + ":" + std::to_string(master_port) + "\n" + std::to_string(world));
  SpawnSpec spec;
  spec.argv = {config_.probe_bin, "nccl",
               "--collectives",   "all_gather",
               "--rendezvous",    "file:" + p->path,
               "--rank",          std::to_string(rank),
               "--nranks",        std::to_string(world),
               "--deadline",      fmt_seconds(static_cast<double>(deadline_ms) / 1000.0 * 0.9)};
  spec.env = make_env(env);
  spec.cwd = child_cwd();
  run_tracked(std::move(spec), Duration::millis(static_cast<double>(deadline_ms)),
              [this, p, epoch, req, started, deadline_ms, env](const ChildResult& res) {
                // A last look first: the probe may exit right after writing the file, and
                // the blob must reach the controller before this reply (one ordered
                // connection).
                if (p->rank == 0) publish_rendezvous(*p);
                p->running = false;
                if (p->timer) r_.cancel_timer(p->timer);
                p->timer = 0;
                std::error_code ec;
                std::filesystem::remove(p->path, ec);
                if (auto it = relayed_.find(req); it != relayed_.end() && it->second == p)
                  relayed_.erase(it);

                json body = {{"test", "inter_all_gather"}, {"timed_out", false}};
                if (!res.started) {
                  body["ok"] = false;
                  body["rendezvous"] = "not_reached";
                  body["detail"] = res.spawn_error;
                  reply_done(epoch, req, started, body);
                  return;
                }
                const json report = probe_report_of(res);
                const std::string verdict = add_verdict(report, body);
                const int code = res.exit_code();
                // How far it got, as the probe says. A probe too old to take part without a GPU
                // says nothing and exits no_gpu.
                const std::string rdv = rendezvous_of(report);
                if (!(code == kernels::kExitNoGpu && rdv == "not_reached"))
                  body["rendezvous"] = rdv;
                const std::string note = last_note(report);
                if (res.timed_out || code == kernels::kExitDeadline) {
                  body["ok"] = false;
                  body["timed_out"] = true;
                  body["detail"] =
                      std::string(res.timed_out ? "killed at the deadline" : "deadline_exceeded") +
                      (note.empty() || res.timed_out ? "" : ": " + note);
                } else if (code == kernels::kExitPass) {
                  body["ok"] = true;
                  body["detail"] = verdict.empty() ? "pass" : verdict;
                } else if (code == kernels::kExitNoGpu) {
                  const std::int64_t left_ms =
                      deadline_ms - static_cast<std::int64_t>(res.elapsed.to_seconds() * 1000);
                  run_fallback_all_gather(epoch, req, started, left_ms, env, body);
                  return;
                } else {
                  body["ok"] = false;
                  const std::string why = code == kernels::kExitUsage ? "usage error"
                                          : verdict.empty()           ? "fail"
                                                                      : verdict;
                  std::string last = note.empty() ? last_line(res.err) : note;
                  body["detail"] = why + " (" + describe_wait_status(res.wait_status) + ")" +
                                   (last.empty() ? "" : ": " + last);
                }
                reply_done(epoch, req, started, body);
              });
  if (rank == 0) watch_rendezvous(p);
}

void Agent::run_fallback_all_gather(std::uint64_t epoch, std::int64_t req, Instant started,
                                    std::int64_t left_ms, std::map<std::string, std::string> env,
                                    json probe_body) {
  if (config_.trainjob_bin.empty()) {
    probe_body["ok"] = true;
    probe_body["skipped"] = true;
    probe_body["detail"] = "no_gpu; no trainjob program for the CPU all-gather";
    reply_done(epoch, req, started, probe_body);
    return;
  }
  if (left_ms < 1) {
    probe_body["ok"] = false;
    probe_body["timed_out"] = true;
    probe_body["detail"] = "no_gpu, and no time left for the CPU all-gather";
    reply_done(epoch, req, started, probe_body);
    return;
  }
  SpawnSpec spec;
  spec.argv = {config_.trainjob_bin, "--probe", "allgather", "--deadline-ms",
               std::to_string(std::max<std::int64_t>(1, left_ms * 9 / 10))};
  spec.env = make_env(env);
  spec.cwd = child_cwd();
  run_tracked(std::move(spec), Duration::millis(static_cast<double>(left_ms)),
              [this, epoch, req, started, probe_body](const ChildResult& res) {
                json body = trainjob_probe_body("inter_all_gather", res);
                for (const char* key : {"rendezvous", "verdict", "report"})
                  if (probe_body.contains(key)) body[key] = probe_body[key];
                const std::string detail = body.value("detail", "");
                body["detail"] = "no_gpu; CPU all-gather " +
                                 std::string(body.value("ok", false) ? "passed" : "failed") +
                                 (detail.empty() ? "" : ": " + detail);
                reply_done(epoch, req, started, body);
              });
}

void Agent::publish_rendezvous(RelayedProbe& p) {
  if (p.published) return;
  const int fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;  // not written yet
  std::string bytes(kMaxRendezvousBlob + 1, '\0');
  std::size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
    if (got == bytes.size()) break;
  }
  ::close(fd);
  p.published = true;  // once, right or wrong: a peer must never see two ids
  if (got == 0 || got > kMaxRendezvousBlob) {
    log("rendezvous file " + p.path + " holds " +
        (got == 0 ? std::string("nothing") : "over 1 KiB") +
        ": not relayed; the other machines' probes will time out");
    return;
  }
  bytes.resize(got);
  if (p.epoch != epoch_) return;  // the request's connection is gone, and its reply with it
  send(json{{"type", "rendezvous"}, {"probe_req", p.req}, {"blob", to_hex(bytes)}},
       Delivery::kDrop);
}

void Agent::watch_rendezvous(const std::shared_ptr<RelayedProbe>& p) {
  if (!p->running || p->published) return;
  std::weak_ptr<bool> guard = alive_;
  p->timer = r_.add_timer(Duration::millis(10), [this, guard, p] {
    if (!guard.lock()) return;
    p->timer = 0;
    if (!p->running) return;
    publish_rendezvous(*p);
    watch_rendezvous(p);
  });
}

void Agent::handle_rendezvous(const json& m, std::int64_t req) {
  const Instant started = r_.now();
  const std::int64_t probe_req = need_int(m, "probe_req", 0, kMaxReq);
  const std::string blob = need_hex_blob(m, "blob");
  auto it = relayed_.find(probe_req);
  if (it == relayed_.end() || it->second->epoch != epoch_ || !it->second->running)
    bad("probe_req: no inter_all_gather probe with a relayed rendezvous runs for request " +
        std::to_string(probe_req));
  RelayedProbe& p = *it->second;
  if (p.rank == 0)
    bad("probe_req: request " + std::to_string(probe_req) + " is rank 0, which publishes the blob");
  if (p.received) bad("probe_req: request " + std::to_string(probe_req) + " already has its blob");
  // As the probe writes it: a temporary name renamed into place, so it never reads half a file.
  const std::string tmp = p.path + ".relay";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < blob.size()) {
    const ssize_t n = ::write(fd, blob.data() + done, blob.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (done != blob.size() || ::rename(tmp.c_str(), p.path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + p.path + ": " + why);
  }
  p.received = true;
  reply_done(epoch_, req, started, {{"ok", true}});
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
    auto answer = [this, guard, g, key, epoch, req, started](const std::string& sig) {
      if (!guard.lock()) return;
      g->by_rank[key] = sig;
      if (--g->left == 0) {
        reply_done(epoch, req, started, {{"ok", true}, {"by_rank", g->by_rank}});
      }
    };
    // A Python rank that announced its stack signal dumps its own stacks; the others get gdb.
    auto child = rk->stack_signal != 0 && rk->stack_fd >= 0
                     ? capture_python_stack(r_, rk->pid, rk->stack_fd, rk->stack_signal,
                                            options_.stacks, std::move(answer))
                     : capture_stack(r_, rk->pid, options_.stacks, std::move(answer));
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
  env["FAULTLINE_RENDEZVOUS_KEY"] = rendezvous_key(
      "replay\n" + master_addr + ":" + std::to_string(master_port) + "\n" + std::to_string(world));
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
