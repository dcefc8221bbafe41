// Live mode end to end against hostile and careless peers: mutated frames, strangers holding
// connections, a controller out of file descriptors, thousands of idle connections, and a
// status too large for one frame.
#include <sys/types.h>

#include "tests/realexec/idle_flood.h"
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/prometheus_support.h"
#include "tests/realexec/live/raw_peer.h"

namespace {

using namespace faultline::live_e2e;

// Each message that killed the controller in the operator's review, then tens of thousands
// of mutated ones, unauthenticated, as an operator client and as an agent: every one is
// refused with a reason, the controller stays up and answers, and the job keeps training.
TEST(LiveE2E, HostileFramesAreRefusedAndTheRunCarriesOn) {
  LiveCluster c("hostile", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  auto alive = [&](const std::string& after) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(c.controller_alive()) << "the controller died after " << after;
  };
  // Before authentication: each on a connection of its own, refused with a reason.
  const json hello_ok = faultline::live::PeerHandshake("client", "").hello(2);
  json proto_text = hello_ok, role_number = hello_ok, old_protocol = hello_ok;
  proto_text["proto"] = "1";
  role_number["role"] = 7;
  old_protocol["proto"] = 1;
  old_protocol["token"] = c.token();  // the old clear-text hello
  for (const json& m : {json{{"type", nullptr}}, json{{"type", 5}}, json{{"type", {{"a", 1}}}},
                        proto_text, role_number, old_protocol}) {
    RawPeer p(host, port);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.send(m));
    p.receive_type("welcome");
    EXPECT_FALSE(p.refusal().empty()) << m.dump() << " was not refused";
    alive(m.dump());
  }
  // An operator client: requests of the wrong shape get a failed reply, the session stays.
  {
    RawPeer p(host, port);
    ASSERT_FALSE(p.authenticate(c.token()).is_null());
    for (const json& m :
         {json{{"type", nullptr}}, json{{"type", "inject"}, {"machine", 3}, {"req", 1}},
          json{{"type", "status"}, {"req", {{"a", 1}}}},
          json{{"type", "update"}, {"version", 2}}}) {
      ASSERT_TRUE(p.send(m));
      const json r = p.receive_type("done");
      ASSERT_FALSE(r.is_null()) << m.dump();
      EXPECT_EQ(r.value("ok", true), false) << m.dump();
      alive(m.dump());
    }
    ASSERT_TRUE(p.send(json{{"type", "status"}, {"req", 2}}));
    EXPECT_EQ(p.receive_type("done").value("ok", false), true) << "the same session still answers";
  }
  // An agent: sessions are bound to their machine, so the name of a live one is refused;
  // the standby's agent is killed first and its name taken. Then a rank report whose NaN
  // flag is a string, for the generation that is running.
  {
    RawPeer p(host, port);
    EXPECT_TRUE(p.authenticate(c.token(), "agent", "m1").is_null());
    EXPECT_NE(p.refusal().find("m1 already has a live session"), std::string::npos) << p.refusal();
  }
  c.kill_machine("s0");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const json journal = json::parse(slurp(c.dir() + "/state/journal.json"), nullptr, false);
  ASSERT_TRUE(journal.is_object() && journal.contains("gen"));
  const json gen = journal["gen"];
  std::mt19937_64 rng(7);
  {
    RawPeer p(host, port);
    ASSERT_FALSE(p.authenticate(c.token(), "agent", "s0").is_null()) << p.refusal();
    ASSERT_TRUE(
        p.send(json{{"type", "report"},
                    {"gen", gen},
                    {"rank", 0},
                    {"report", {{"type", "step"}, {"rank", 0}, {"step", 5}, {"loss_nan", "no"}}}}));
    alive("a report with \"loss_nan\": \"no\"");
    const std::vector<json> seeds = {
        json{{"type", "report"},
             {"gen", gen},
             {"rank", 0},
             {"report",
              {{"type", "step"}, {"rank", 0}, {"step", 5}, {"loss", 1.0}, {"step_time_s", 0.1}}}},
        json{{"type", "exit"},
             {"gen", gen.get<long>() + 1000},
             {"rank", 0},
             {"code", 1},
             {"signal", 0},
             {"signature", "x"}},
        json{{"type", "alert"}, {"kind", "nic"}, {"detail", "d"}},
        json{{"type", "done"}, {"req", 123456789}, {"ok", true}}, json{{"type", "heartbeat"}}};
    for (int i = 0; i < 20000; ++i) {
      json m = mutated(seeds[rng() % seeds.size()], rng);
      // Stale generations only: a well-formed report or exit of the running one would be
      // believed, as it should be from an authenticated agent.
      if (m.contains("gen") && m["gen"] == gen) m["gen"] = gen.get<long>() + 1000;
      if (!p.send(m)) break;
    }
    alive("20000 mutated agent messages");
  }
  // Unauthenticated peers, one mutated hello each.
  for (int i = 0; i < 300; ++i) {
    RawPeer p(host, port);
    if (!p.ok()) continue;
    json m = mutated(hello_ok, rng);
    if (m == hello_ok) continue;
    p.send(m);
  }
  alive("300 mutated hellos");
  // Still in charge: it answers, the job trains, and the refusals are noted, not flooded.
  EXPECT_EQ(c.client({"status", c.config()}), 0);
  ASSERT_FALSE(c.wait_step(c.last_step() + 20, 60).is_null()) << "the job stopped training";
  int refusal_notes = 0;
  for (const auto& r : c.records())
    if (LiveCluster::is_note(r, "refused a message from")) ++refusal_notes;
  EXPECT_GE(refusal_notes, 5);
  EXPECT_LT(refusal_notes, 200) << "one note per refused frame floods the log";
  EXPECT_FALSE(c.wait_for(
                    [](const json& r) {
                      return LiveCluster::is_note(
                          r, "refused a message from agent of s0: report: report.loss_nan:");
                    },
                    5)
                   .is_null());
  c.stop_run();
}

// The controller's resident memory, in KiB (VmRSS), or -1.
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// CPU seconds (user + system) a process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Issue 37, item 11: at a low fd limit, accept failing with EMFILE on the level-triggered
// listener spun the controller at ~90% CPU (and `live status` took 8.4 s). Accepting pauses
// now, a quarter second at a time, with one note.
TEST(LiveE2E, OutOfFdsTheControllerPausesAcceptingInsteadOfSpinning) {
  LiveCluster c("emfile", json::object());
  c.start_controller(true, {"prlimit", "--nofile=48:48", "--"});
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  std::vector<std::unique_ptr<RawPeer>> held;
  for (int i = 0; i < 80; ++i)
    held.push_back(std::make_unique<RawPeer>(c.controller_host(), c.controller_port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu0 = cpu_seconds(c.controller_pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double busy = (cpu_seconds(c.controller_pid()) - cpu0) / 2;
  std::cout << "controller CPU while out of fds: " << 100 * busy << "%\n";
  EXPECT_LT(busy, 0.3) << "the controller spins on accept";
  held.clear();
  std::this_thread::sleep_for(
      std::chrono::seconds(6));  // the held ones' hello deadline frees their fds
  EXPECT_EQ(c.client({"status", c.config()}), 0);
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null());
  c.stop_run();
  EXPECT_FALSE(
      c.wait_for(
           [](const json& r) { return LiveCluster::is_note(r, "cannot accept connections: "); }, 1)
          .is_null());
}

// Issue 37, items 10, 12, 14 and 15: strangers and colleagues on the control port. (10) 200
// unauthenticated connections each holding a partial 1 MiB frame took the controller from 35
// to 269 MiB; before authentication a frame is at most 4 KiB and at most 64 such connections
// are open. (12) Frame-level garbage was logged nowhere; it is noted with its reason.
// (14) Bad-token attempts left no line once 20 refusals of any kind had been noted; they are
// always said (10 a minute one by one, the rest summed up). (15) Read-only sessions never timed
// out and could lock the operator out of `live status`; 16 per access at most, the least
// recently active one making room, and 60 s idle at most.
TEST(LiveE2E, StrangersOnTheControlPortHoldLittleAndLockNobodyOut) {
  LiveCluster c("strangers", json::object());
  const std::string status_token = c.add_status_token();
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  const std::string host = c.controller_host();
  const int port = c.controller_port();
  const long rss_before = rss_kib(c.controller_pid());
  ASSERT_GT(rss_before, 0);

  // (12) Garbage frames, then (10) the flood of partial frames, held open.
  for (const std::string& junk :
       {frame("", 0), frame("x", 0xffffffffu), std::string("\x00\x00\x00\x05{\xff\xfe}}", 9)}) {
    RawPeer g(host, port);
    ASSERT_TRUE(g.send_raw(junk));
    g.receive();
  }
  std::vector<std::unique_ptr<RawPeer>> held;
  for (int i = 0; i < 100; ++i)
    held.push_back(std::make_unique<RawPeer>(host, port));  // idle: 64 at most stay
  const std::string partial = frame(std::string(64 * 1024, 'a'), 1u << 20).substr(0, 4 + 64 * 1024);
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<RawPeer>(host, port));
    if (held.back()->ok()) held.back()->send_raw(partial);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long rss_flood = rss_kib(c.controller_pid());
  std::cout << "controller RSS: " << rss_before / 1024.0 << " MiB before the flood, "
            << rss_flood / 1024.0 << " MiB during it\n";
  EXPECT_LT(rss_flood - rss_before, 32 * 1024) << "KiB: " << rss_before << " -> " << rss_flood;
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-during-flood.txt"), 0)
      << slurp(c.dir() + "/status-during-flood.txt");

  // (14) Bad tokens, after more than 20 other refusals.
  for (int i = 0; i < 30; ++i) {
    RawPeer p(host, port);
    p.send(faultline::live::PeerHandshake("client", "").hello(2));
    ASSERT_FALSE(p.receive_type("challenge").is_null());
    p.send(json{{"type", "auth"}, {"proof", std::string(64, 'f')}});  // a proof without the token
    EXPECT_TRUE(p.receive_type("welcome").is_null());
    EXPECT_EQ(p.refusal(), "bad token");
  }
  // (15) Read-only sessions held open by a colleague's script: the operator still gets in.
  std::vector<std::unique_ptr<RawPeer>> readers;
  for (int i = 0; i < 24; ++i) {
    readers.push_back(std::make_unique<RawPeer>(host, port));
    EXPECT_FALSE(readers.back()->authenticate(status_token, "client-read").is_null()) << i;
  }
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-readers.txt"), 0)
      << slurp(c.dir() + "/status-readers.txt");
  // Issue 52: a read-only token holder churning sessions, each asking for what it may not
  // (refused) and left open (closed to make room), wrote ~240 KB/s of notes; bounded now.
  for (int i = 0; i < 300; ++i) {
    readers.push_back(std::make_unique<RawPeer>(host, port));
    ASSERT_FALSE(readers.back()->authenticate(status_token, "client-read").is_null()) << i;
    ASSERT_TRUE(readers.back()->send(json{{"type", "stop"}, {"req", 1}}));
    ASSERT_EQ(readers.back()->receive_type("done").value("ok", true), false) << i;
    if (readers.size() > 20) readers.erase(readers.begin());
  }
  held.clear();
  readers.clear();
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null()) << "no training after the flood";
  c.stop_run();

  int garbage = 0, bad_tokens = 0, evicted = 0, readers_closed = 0;
  std::size_t session_bytes = 0;
  for (const auto& r : c.records()) {
    const std::string t = r.value("text", "");
    if (r.value("kind", "") != "note") continue;
    if (t.find("read-only session") != std::string::npos) session_bytes += r.dump().size();
    garbage += t.find("closed before its hello: frame length") != std::string::npos;
    bad_tokens += t.find("): bad token (") != std::string::npos;
    evicted += t.find("closed the unauthenticated connection from") != std::string::npos;
    readers_closed +=
        t.find("closed the least recently active read-only session") != std::string::npos;
  }
  EXPECT_GE(garbage, 2) << "bad lengths are noted with their reason";
  EXPECT_EQ(bad_tokens, 10) << "the first 10 of the minute, one by one";
  EXPECT_GE(evicted, 1);
  EXPECT_GE(readers_closed, 8);
  // 324 read-only sessions, 308 closed to make room, 300 refusals: 10 notes in the minute.
  EXPECT_LT(session_bytes, 4000u) << "bytes of notes about read-only sessions";
}

// Issue 52, broken item 3: 2,000 idle unauthenticated connections held open across a routine
// controller restart kept the agents out: the controller took 64 a second (none was pushed out
// before it was 1 s old), the agents' hellos waited in the listen backlog behind the rest past
// their handshake deadline, and both healthy job machines were evicted and their ranks
// relaunched. A connection still silent 0.1 s after it was accepted makes room now (agents and
// operators send their hello as they connect): the agents get in, the job is adopted, nobody
// is evicted, and the operator's status answers during the flood.
TEST(LiveE2E, IdleConnectionsHeldAcrossAControllerRestartKeepNoAgentOut) {
  LiveCluster c("idle-flood", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null());
  IdleFlood flood(c.controller_host(), c.controller_port(), 2000);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const long before = c.last_step();
  c.kill_controller(SIGTERM);
  c.start_controller(false);
  ASSERT_FALSE(c.wait_step(before + 20, 60).is_null()) << "no training after the restart";
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status-flood.txt"), 0)
      << slurp(c.dir() + "/status-flood.txt");
  std::cout << "idle connections dialled: " << flood.dials() << "\n";
  EXPECT_GT(flood.dials(), 2000) << "the flood was held across the restart";
  flood.stop();
  c.stop_run();
  int silent_closed = 0;
  for (const auto& r : c.records()) {
    EXPECT_FALSE(LiveCluster::is_action(r, "EvictMachines")) << r.dump();
    EXPECT_FALSE(LiveCluster::is_note(r, "agent of ") &&
                 r.value("text", "").find(" lost") != std::string::npos)
        << r.dump();
    silent_closed += LiveCluster::is_note(r, "closed the unauthenticated connection from") &&
                     r.value("text", "").find("(no hello)") != std::string::npos;
  }
  EXPECT_GE(silent_closed, 1);
}

// Occurrences of `what` in the file at `path`.
int count_in(const std::string& path, const std::string& what) {
  const std::string text = slurp(path);
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Issue 52: 2,000 idle connections held open and dialled again as soon as each is closed (a
// stranger's script) on the control port and on /metrics. The operator's status (0 of 5 within
// 2 s, the slowest 8.4 s, when a silent connection had a 0.1 s grace), a restarted agent's
// session (7.7 s), and Prometheus's scrapes (5 of 30 failed) must all get through, each within
// its bound. COST: ~11 s.
TEST(LiveE2E, TwoThousandIdleConnectionsLockOutNeitherTheOperatorNorAnAgentNorPrometheus) {
  if (!raise_nofile(2 * 2 * 2000 + 1000))
    GTEST_SKIP() << "needs a hard RLIMIT_NOFILE of at least 9000 (ulimit -Hn) to hold 2,000 "
                    "idle connections on each of two ports";
  LiveCluster c("idle-hold", json::object());
  const int metrics_port = metrics_e2e::free_port();
  c.edit_config(
      [&](json& cfg) { cfg["metrics_listen"] = "127.0.0.1:" + std::to_string(metrics_port); });
  c.start_controller();
  c.start_agents();
  const std::string s0_log = c.dir() + "/agent-s0.log";
  const auto until = [](const std::function<bool()>& ok, double s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!ok() && seconds_since(t0) < s)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ok();
  };
  ASSERT_TRUE(until([&] { return count_in(s0_log, "connected to the controller as s0") == 1; }, 30))
      << slurp(s0_log);
  IdleFlood control(c.controller_host(), c.controller_port(), 2000);
  IdleFlood metrics("127.0.0.1", metrics_port, 2000);
  // Held: every one of the 2,000 was dialled, and the servers have been closing and taking
  // them again (a second round of dials) on both ports.
  ASSERT_TRUE(until([&] { return control.dials() >= 4000 && metrics.dials() >= 4000; }, 20))
      << control.dials() << " and " << metrics.dials() << " dials";
  int status_ok = 0;
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = c.client_to({"status", c.config()}, c.dir() + "/status-held.txt") == 0;
    slowest = std::max(slowest, seconds_since(t0));
    status_ok += ok && seconds_since(t0) < 2;
  }
  EXPECT_EQ(status_ok, 5) << "slowest status " << slowest
                          << " s: " << slurp(c.dir() + "/status-held.txt");
  c.kill_machine("s0");
  c.restart_agent("s0");
  const auto restarted = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      until([&] { return count_in(s0_log, "connected to the controller as s0") == 2; }, 10));
  const double reconnect_s = seconds_since(restarted);
  EXPECT_LT(reconnect_s, 3) << "the restarted agent took " << reconnect_s << " s\n"
                            << slurp(s0_log);
  int scrapes_ok = 0;
  double slowest_scrape = 0;
  for (int i = 0; i < 30; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r = metrics_e2e::http(metrics_port, "GET /metrics HTTP/1.0\r\n\r\n");
    slowest_scrape = std::max(slowest_scrape, seconds_since(t0));
    scrapes_ok += r.rfind("HTTP/1.1 200 ", 0) == 0 && seconds_since(t0) < 2;
  }
  EXPECT_EQ(scrapes_ok, 30) << "slowest scrape " << slowest_scrape << " s";
  std::cout << "status: " << status_ok << " of 5, slowest " << slowest << " s; agent back in "
            << reconnect_s << " s; scrapes: " << scrapes_ok << " of 30, slowest " << slowest_scrape
            << " s; dials " << control.dials() << " (control) " << metrics.dials()
            << " (metrics)\n";
}

// Issue 52: at ~8,000 machines with 40-character names the status document passes the
// wire's 1 MiB frame limit, and the controller dropped the reply without a word (`live status`
// said only that the controller did not answer within 10 s). The document now comes in parts
// each under the limit: the text table and --json are whole, and a client that cannot take
// parts (an earlier release's, or a raw peer) is told in one line why it gets no status. The
// controller needs no agents to answer. COST: ~7 s.
TEST(LiveE2E, TheStatusOfEightThousandMachinesWithLongNamesComesWhole) {
  LiveCluster c("status-8000", json::object());
  std::set<std::string> names;
  c.edit_config([&](json& cfg) {
    for (int i = 0; i < 8000; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "rack%03d-node%04d-gpu-h200-eight-way-%04d", i / 32, i, i);
      names.insert(name);
      cfg["standby"].push_back(
          {{"name", name}, {"addr", "127.0.0.1"}, {"workdir", c.dir() + "/w"}});
    }
  });
  ASSERT_EQ(names.begin()->size(), 40u);
  c.start_controller();
  const auto t0 = std::chrono::steady_clock::now();
  int rc = -1;
  // The controller listens once it has read its config and journal.
  while ((rc = c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json")) != 0 &&
         seconds_since(t0) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(rc, 0) << slurp(c.dir() + "/status.json").substr(0, 2000);
  const std::string text = slurp(c.dir() + "/status.json");
  EXPECT_GT(text.size(), std::size_t{1} << 20) << "the document is larger than one frame";
  const json st = json::parse(text, nullptr, false);
  ASSERT_TRUE(st.is_object()) << text.substr(0, 2000);
  ASSERT_EQ(st["machines"].size(), 8005u);
  std::set<std::string> listed;
  for (const auto& m : st["machines"]) listed.insert(m.value("machine", ""));
  for (const auto& n : names) EXPECT_TRUE(listed.count(n)) << n << " missing";
  EXPECT_TRUE(st.contains("ettr_so_far") && st.contains("account") && st.contains("storage"));
  ASSERT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status.txt"), 0)
      << slurp(c.dir() + "/status.txt").substr(0, 2000);
  const std::string table = slurp(c.dir() + "/status.txt");
  int rows = 0;
  for (const auto& n : names) rows += table.find("\n" + n + " ") != std::string::npos;
  EXPECT_EQ(rows, 8000);
  // A client that does not ask for parts: one line saying why, never silence.
  RawPeer raw(c.controller_host(), c.controller_port());
  ASSERT_FALSE(raw.authenticate(c.token()).is_null()) << raw.refusal();
  raw.send(json{{"type", "status"}, {"req", 5}});
  const json done = raw.receive_type("done");
  ASSERT_FALSE(done.is_null()) << "no answer to a status request without parts";
  EXPECT_EQ(done.value("ok", true), false) << done.dump().substr(0, 300);
  EXPECT_NE(done.value("detail", "").find("frame limit"), std::string::npos) << done.dump();
}

}  // namespace
