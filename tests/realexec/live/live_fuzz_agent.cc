// The live-mode protocol fuzzer's agent target and its rank pipe (rank-wrap): live_fuzz.cc says
// what they send and check.
#include "tests/realexec/live/live_fuzz.h"

namespace faultline::live_fuzz {

// --- target: agent (and its rank pipe) ---------------------------------------------------------

namespace {

int accept_one(int listen_fd, double timeout_s) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
}

}  // namespace

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

}  // namespace faultline::live_fuzz
