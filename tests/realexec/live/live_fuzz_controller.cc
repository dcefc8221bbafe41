// The live-mode protocol fuzzer's controller target (live_fuzz.cc says what it sends and checks).
#include "tests/realexec/live/live_fuzz.h"

namespace faultline::live_fuzz {

// --- target: controller ------------------------------------------------------------------------

namespace {

struct EventLogView {
  long last_step = -1;
  long notes = 0;
  long refusal_notes = 0;
  bool parsed = true;
};

EventLogView read_events(const std::string& path) {
  EventLogView v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line, nullptr, false);
    if (!r.is_object()) {
      v.parsed = false;
      continue;
    }
    const std::string kind = r.value("kind", "");
    if (kind == "progress") v.last_step = std::max(v.last_step, r.value("step", -1L));
    if (kind == "note") {
      ++v.notes;
      const std::string t = r.value("text", "");
      if (t.find("refused") != std::string::npos) ++v.refusal_notes;
    }
  }
  return v;
}

}  // namespace

int fuzz_controller(const Options& o) {
  const std::string dir = o.dir + "/controller";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string token = random_token(), status_token = random_token();
  write_private(dir + "/token", token);
  write_private(dir + "/status-token", status_token);
  const int port = free_port();
  auto machine = [&](const std::string& n) {
    return json{{"name", n}, {"addr", "127.0.0.1"}, {"workdir", dir + "/" + n}};
  };
  const json config{{"description", "faultline_live_fuzz: controller target"},
                    {"controller", "127.0.0.1:" + std::to_string(port)},
                    {"token_file", dir + "/token"},
                    {"status_token_file", dir + "/status-token"},
                    {"machines", {machine("m0"), machine("m1")}},
                    {"standby", {machine("s0"), machine("s1")}},
                    {"job",
                     {{"versions",
                       {{"v1",
                         {o.trainjob, "--seed", "7", "--hidden", "32", "--step-ms", "100",
                          "--loss-log", dir + "/loss.log"}}}},
                      {"master_port", free_port()},
                      {"nominal_step_time_s", 0.1},
                      {"replay_steps", 12}}},
                    {"policy",
                     {{"stack", "byterobust"},
                      {"params",
                       {{"stall_window_s", 30},
                        {"recrash_window_s", 5},
                        {"probe_deadline_s", 60},
                        {"standby_pool", 1}}}}},
                    {"seed", 7},
                    {"state_dir", dir + "/state"},
                    {"trainjob_bin", o.trainjob},
                    {"heartbeat_s", 0.5},
                    {"heartbeat_timeout_s", 10}};
  const std::string cfg = dir + "/live.json";
  std::ofstream(cfg) << config.dump(2);
  const pid_t ctl = start({o.faultline, "live", "run", cfg, "--fresh"}, dir + "/controller.log");
  std::vector<pid_t> agents;
  for (const char* n : {"m0", "m1", "s0"})
    agents.push_back(
        start({o.faultline, "agent", cfg, "--name", n}, dir + "/agent-" + std::string(n) + ".log"));
  struct Cleanup {
    std::vector<pid_t> pids;
    ~Cleanup() {
      for (pid_t p : pids) kill_group(p);
    }
  } cleanup{agents};
  cleanup.pids.push_back(ctl);
  const std::string events = dir + "/state/events.jsonl";
  const auto t_up = Clock::now();
  while (read_events(events).last_step < 5) {
    if (!alive(ctl))
      fail("controller target: the controller exited before the job trained (" + dir +
           "/controller.log)");
    if (seconds_since(t_up) > 90) fail("controller target: the job did not reach step 5 in 90 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const long step_before = read_events(events).last_step;
  const std::string host = "127.0.0.1";

  // Sessions: an operator, a read-only reader, and the standby slot s1 as an agent.
  auto admin = Peer::dial(host, port), reader = Peer::dial(host, port),
       agent = Peer::dial(host, port);
  if (!admin || authenticate(*admin, token, "client", "").is_null())
    fail("controller target: operator handshake");
  if (!reader || authenticate(*reader, status_token, "client-read", "").is_null())
    fail("controller target: read-only handshake");
  if (!agent || authenticate(*agent, token, "agent", "s1").is_null())
    fail("controller target: agent handshake as s1");

  Mutator mu(o.seed);
  auto& rng = mu.rng();
  const std::vector<json> client_seeds = {
      json{{"type", "status"}, {"req", 1}}, json{{"type", "stop"}, {"req", 2}},
      json{{"type", "inject"}, {"req", 3}, {"machine", "m1"}, {"fault", "kill"}, {"detail", "d"}},
      json{{"type", "update"}, {"req", 4}, {"version", "v1"}, {"urgent", true}}};
  const json hello = live::PeerHandshake("agent", "m0").hello(live::kProtocolVersion);
  const std::vector<json> pre_auth_seeds = {
      hello, live::PeerHandshake("client", "").hello(live::kProtocolVersion),
      json{{"type", "auth"},
           {"proof", std::string(64, 'a')},
           {"gen", 1},
           {"ranks", json::array({0})}},
      json{{"type", "status"}, {"req", 1}}};
  std::map<std::string, long> sent;  // frames by channel
  long total = 0, status_checks = 0, agent_reconnects = 0;
  std::int64_t next_req = 1000000;
  // Is the running generation's number known? Reports and exits of it are sent too: they
  // must not move the job (s1 runs none of its ranks).
  auto gen_now = [&]() -> std::int64_t {
    const json j = json::parse(slurp(dir + "/state/journal.json"), nullptr, false);
    return j.is_object() ? j.value("gen", 1L) : 1;
  };
  std::int64_t gen = gen_now();
  const auto t0 = Clock::now();
  auto check_status = [&](Peer& p, const char* who) {
    const std::int64_t req = next_req++;
    p.send(json{{"type", "status"}, {"req", req}});
    const json r = p.await(
        [&](const json& m) {
          return m.value("type", "") == "done" && m.value("req", json()) == req;
        },
        20);
    if (r.is_null())
      fail(std::string("controller target: the ") + who +
           " session got no answer to status after " + std::to_string(total) + " frames");
    if (!r.value("ok", false))
      fail(std::string("controller target: status refused on the ") + who +
           " session: " + r.dump());
    p.messages().clear();  // the refusals of the batch
    ++status_checks;
  };
  while (total < o.frames) {
    const int batch = 2000;
    // The operator session: mutated requests; one that would be obeyed (a valid stop,
    // inject or update) is not sent.
    for (int i = 0; i < batch; ++i) {
      const json m = mutated(client_seeds[rng() % client_seeds.size()], rng);
      try {
        const auto req = live::decode_client_request(m);
        if (!std::holds_alternative<live::StatusRequest>(req.body)) continue;
      } catch (const live::BadMessage&) {
      }
      admin->queue(frame(dump(m)));
      ++sent["operator"];
      ++total;
      if (admin->queued() > (256u << 10)) admin->pump(0);
    }
    if (!admin->flush(20))
      fail("controller target: the operator session was closed after " + std::to_string(total) +
           " frames");
    check_status(*admin, "operator");
    // The read-only session: anything, valid stops and injects included; none may act.
    for (int i = 0; i < batch / 4; ++i) {
      reader->queue(frame(mu.body(client_seeds[rng() % client_seeds.size()], 0)));
      ++sent["read-only"];
      ++total;
    }
    if (!reader->flush(20)) fail("controller target: the read-only session was closed");
    check_status(*reader, "read-only");
    // The agent session of s1: mutated agent messages, the running generation's included.
    if (total % 40000 < batch * 2) gen = gen_now();
    const std::vector<json> agent_seeds = {
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report",
              {{"type", "step"},
               {"rank", 0},
               {"step", 1000000},
               {"loss", 1.0},
               {"step_time_s", 0.1}}}},
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report", {{"type", "started"}, {"rank", 0}, {"step", 0}}}},
        json{{"type", "exit"},
             {"gen", gen},
             {"rank", 1},
             {"code", 1},
             {"signal", 0},
             {"signature", "x"}},
        json{{"type", "alert"}, {"kind", "nic"}, {"detail", "d"}},
        json{{"type", "done"}, {"req", 123456789}, {"ok", true}, {"rendezvous", "ok"}},
        json{{"type", "rendezvous"}, {"probe_req", 123456789}, {"blob", "464c525630303031"}},
        json{{"type", "heartbeat"}}};
    for (int i = 0; i < batch; ++i) {
      agent->queue(frame(mu.body(agent_seeds[rng() % agent_seeds.size()], 0)));
      ++sent["agent s1"];
      ++total;
      if (agent->queued() > (256u << 10)) agent->pump(0);
    }
    if (!agent->flush(20)) {
      // A controller may close a session that never answers its requests; an agent
      // reconnects, and so does this one.
      ++agent_reconnects;
      agent = Peer::dial(host, port);
      if (!agent || authenticate(*agent, token, "agent", "s1").is_null())
        fail("controller target: s1 could not reconnect after " + std::to_string(total) +
             " frames");
    }
    agent->messages().clear();  // the controller's requests to s1, unanswered
    // Unauthenticated: fresh connections, each with a few mutated first messages, broken
    // bytes or an impossible length.
    for (int c = 0; c < 10; ++c) {
      auto p = Peer::dial(host, port);
      if (!p)
        fail("controller target: a connection was not accepted after " + std::to_string(total) +
             " frames");
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < k; ++i) {
        const int pick = static_cast<int>(rng() % 20);
        if (pick == 0)
          p->queue(frame("{}", static_cast<std::uint32_t>(rng())));  // length beyond the limit
        else
          p->queue(frame(mu.body(pre_auth_seeds[rng() % pre_auth_seeds.size()], 4)));
        ++sent["unauthenticated"];
        ++total;
      }
      p->pump(0);
    }
    check_status(*admin, "operator");
    if (!alive(ctl))
      fail("controller target: the controller died after " + std::to_string(total) + " frames");
  }
  const double fuzz_s = seconds_since(t0);
  // Still in charge: it answers, the job trains on, progress never ran ahead of the job.
  const long step_after_fuzz = read_events(events).last_step;
  const auto t_train = Clock::now();
  while (read_events(events).last_step < step_after_fuzz + 20) {
    if (seconds_since(t_train) > 60)
      fail("controller target: the job did not train 20 more steps after the fuzzing");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  check_status(*admin, "operator");
  const EventLogView v = read_events(events);
  const long logged = last_logged_step(dir + "/loss.log");
  if (!v.parsed) fail("controller target: the event log has a line that is not a JSON object");
  if (v.last_step > logged + 1)
    fail("controller target: the controller's progress (step " + std::to_string(v.last_step) +
         ") ran ahead of the job's own log (step " + std::to_string(logged) +
         "): a forged report was believed");
  if (v.refusal_notes > 2000)
    fail("controller target: " + std::to_string(v.refusal_notes) +
         " refusal notes flood the event log");
  if (run_wait({o.faultline, "live", "stop", cfg}, dir + "/client.log") != 0)
    fail("controller target: live stop failed");
  kill_mentioning(dir);
  std::printf("controller: %ld frames in %.1f s (%.0f/s):", total, fuzz_s, total / fuzz_s);
  for (const auto& [k, n] : sent) std::printf(" %s %ld,", k.c_str(), n);
  std::printf(
      " %ld status checks answered, s1 reconnected %ld times; trained steps %ld -> %ld during the "
      "fuzzing,"
      " %ld after; %ld refusal notes\n",
      status_checks, agent_reconnects, step_before, step_after_fuzz, v.last_step, v.refusal_notes);
  return 0;
}

}  // namespace faultline::live_fuzz
