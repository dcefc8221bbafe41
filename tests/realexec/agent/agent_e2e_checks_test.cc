// The agent end to end: inspection alerts, probes, replays, shutdown and machine_down, and the
// relayed rendezvous of probes across machines.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/realexec/agent/agent_e2e_fixture.h"

namespace faultline::live {
namespace {

using namespace agent_e2e;

TEST_F(AgentE2E, InspectionAlerts) {
  start();
  json d = controller_->request(
      {{"type", "inspect"}, {"kinds", {{"nic", 0.1}, {"gpu", 0.1}, {"host", 0.1}, {"switch", 1}}}});
  EXPECT_EQ(d["ok"], true);
  EXPECT_EQ(d["active"], json::array({"gpu", "host", "nic"}));
  EXPECT_EQ(d["ignored"], json::array({"switch"}));
  wait([] { return false; }, 0.3);
  EXPECT_TRUE(controller_->of_type("alert").empty());  // NIC up, quiet kernel log
  set_operstate("down");
  ASSERT_TRUE(wait([&] { return controller_->of_type("alert").size() >= 2; }));
  EXPECT_EQ(controller_->of_type("alert")[0]["kind"], "nic");
  EXPECT_EQ(controller_->of_type("alert")[0]["detail"], "nic eth0 is down (operstate down)");
  set_operstate("up");
  wait([] { return false; }, 0.2);
  controller_->messages.clear();
  {
    std::ofstream k(dir_ + "/kmsg", std::ios::app);
    k << "4,10,100,-;NVRM: Xid (PCI:0000:af:00): 79, another machine's GPU\n";
    k << "4,11,101,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n";
    k << "2,12,102,-;mce: [Hardware Error]: Machine check events logged\n";
  }
  ASSERT_TRUE(wait([&] { return controller_->of_type("alert").size() >= 2; }));
  wait([] { return false; }, 0.3);
  auto alerts = controller_->of_type("alert");
  ASSERT_EQ(alerts.size(), 2u);
  for (const auto& a : alerts) {
    if (a["kind"] == "gpu") {
      EXPECT_NE(a["detail"].get<std::string>().find("fallen off the bus"), std::string::npos);
    } else {
      EXPECT_EQ(a["kind"], "host");
      EXPECT_NE(a["detail"].get<std::string>().find("Machine check"), std::string::npos);
    }
  }
  // An empty set stops inspection.
  EXPECT_EQ(controller_->request({{"type", "inspect"}, {"kinds", json::object()}})["ok"], true);
  set_operstate("down");
  controller_->messages.clear();
  wait([] { return false; }, 0.3);
  EXPECT_TRUE(controller_->of_type("alert").empty());
}

TEST_F(AgentE2E, UnreadableKernelLogIsSaidOnce) {
  fs::remove(dir_ + "/kmsg");
  start();
  json d = controller_->request({{"type", "inspect"}, {"kinds", {{"gpu", 1}}}});
  EXPECT_EQ(d["ok"], true);
  EXPECT_NE(d["detail"].get<std::string>().find("kernel log unavailable"), std::string::npos);
  controller_->request({{"type", "inspect"}, {"kinds", {{"gpu", 1}}}});
  int said = 0;
  for (const auto& l : logs_) said += l.find("kernel log unavailable") != std::string::npos;
  EXPECT_EQ(said, 1);
}

TEST_F(AgentE2E, Probes) {
  start();
  json b = controller_->request(
      {{"type", "probe"}, {"test", "bitwise"}, {"deadline_ms", 10000}, {"seed", 42}, {"steps", 3}});
  EXPECT_EQ(b["ok"], true) << b.dump();
  EXPECT_EQ(b["test"], "bitwise");
  EXPECT_EQ(b["hash"], "h-42-3");
  EXPECT_EQ(b["timed_out"], false);
  EXPECT_EQ(b["result"]["fault_file"], config_.machines[0].workdir + "/faults");
  json s = controller_->request(
      {{"type", "probe"}, {"test", "stress"}, {"deadline_ms", 10000}, {"seed", 1}, {"steps", 3}});
  EXPECT_EQ(s["hash"], "h-1-30");
  json g = controller_->request({{"type", "probe"}, {"test", "gpu_diag"}, {"deadline_ms", 10000}});
  EXPECT_EQ(g["ok"], true) << g.dump();
  EXPECT_EQ(g["detail"], "no_gpu");
  EXPECT_EQ(g["verdict"], "no_gpu");
  json a = controller_->request(
      {{"type", "probe"}, {"test", "intra_all_to_all"}, {"deadline_ms", 10000}});
  EXPECT_EQ(a["detail"], "no_gpu");
  json ag = controller_->request({{"type", "probe"},
                                  {"test", "inter_all_gather"},
                                  {"deadline_ms", 10000},
                                  {"rank", 1},
                                  {"world_size", 2},
                                  {"master_addr", "127.0.0.1"},
                                  {"master_port", 29600}});
  EXPECT_EQ(ag["ok"], true) << ag.dump();
  EXPECT_EQ(ag["result"]["kind"], "allgather");
  EXPECT_EQ(ag["collective_s"], 0.25) << "the all-gather's own time, lifted into the reply";
  config_.job.env["FAULTLINE_TEST_HANG"] = "1";
  json t = controller_->request({{"type", "probe"},
                                 {"test", "inter_all_gather"},
                                 {"deadline_ms", 300},
                                 {"rank", 0},
                                 {"world_size", 2},
                                 {"master_addr", "127.0.0.1"},
                                 {"master_port", 29600}});
  EXPECT_EQ(t["ok"], false);
  EXPECT_EQ(t["timed_out"], true);
  EXPECT_LT(t["duration_s"].get<double>(), 5.0);
  config_.probe_bin = "";
  json n = controller_->request({{"type", "probe"}, {"test", "gpu_diag"}, {"deadline_ms", 1000}});
  EXPECT_EQ(n["ok"], true);
  EXPECT_EQ(n["detail"], "no probe program");
}

TEST_F(AgentE2E, Replay) {
  start();
  json base = {{"type", "replay"},           {"steps", 20},          {"world_size", 2},
               {"master_addr", "127.0.0.1"}, {"master_port", 29700}, {"deadline_ms", 10000}};
  json r0 = base;
  r0["rank"] = 0;
  json d0 = controller_->request(r0);
  EXPECT_EQ(d0["ok"], true) << d0.dump();
  EXPECT_EQ(d0["hash"], "r-20");
  EXPECT_EQ(d0["from_step"], 40);
  json r1 = base;
  r1["rank"] = 1;
  json d1 = controller_->request(r1);
  EXPECT_EQ(d1["ok"], true);
  EXPECT_FALSE(d1.contains("hash"));
}

TEST_F(AgentE2E, ShutdownKillsRanksRepliesAndExitsZero) {
  start();
  launch("sleep", {{0, 0}});
  pid_t pid = agent_->rank_pids().at(0);
  // The agent stops the reactor it shares with the fake controller when it finishes, so
  // wait for that first, then let the controller read what was sent.
  controller_->send_raw({{"type", "shutdown"}, {"req", 77}});
  ASSERT_TRUE(wait([&] { return agent_->finished(); }));
  EXPECT_EQ(agent_->exit_code(), 0);
  ASSERT_TRUE(wait([&] {
    return controller_->index_of([](const json& m) {
      return m["type"] == "done" && m["req"] == 77;
    }) != std::string::npos;
  }));
  EXPECT_TRUE(wait([&] { return !controller_->closed.empty(); }));  // the agent hung up
  EXPECT_EQ(controller_->of_type("exit").size(), 1u);
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST_F(AgentE2E, MachineDownKillsEverythingAndExits137) {
  start();
  launch("sleep", {{0, 0}, {1, 1}});
  auto pids = agent_->rank_pids();
  controller_->send_raw({{"type", "inject"}, {"fault", "machine_down"}, {"req", 99}});
  ASSERT_TRUE(wait([&] { return agent_->finished(); }));
  EXPECT_EQ(agent_->exit_code(), 137);
  wait([] { return false; }, 0.2);
  EXPECT_EQ(controller_->index_of([](const json& m) { return m["req"] == 99; }),
            std::string::npos);  // no reply: the machine is gone
  // The ranks die at once (the reactor's child watch reaps them).
  EXPECT_TRUE(wait([&] {
    for (auto [rank, pid] : pids) {
      if (::kill(pid, 0) == 0) return false;
    }
    return true;
  }));
}

// inter_all_gather with a relayed rendezvous (PROTOCOL.md, "Probes across machines"), with the
// real faultline-probe and GPUs hidden: rank 0's agent sends its probe's blob before its reply;
// another rank's probe takes the controller's relay; a relay that fits no running probe of this
// connection, a second one, or one for rank 0 is refused with an error and writes nothing.
TEST_F(AgentE2E, RelayedRendezvousBlobsGoOutOnceAndOnlyFittingRelaysAreTaken) {
  config_.probe_bin = FAULTLINE_PROBE_BIN;
  config_.job.env["CUDA_VISIBLE_DEVICES"] = "";  // no GPU: the probe does its rendezvous alone
  start();
  auto reason = [&](json m) {
    json r = controller_->request(std::move(m));
    EXPECT_EQ(r["type"], "error") << r.dump();
    return r.value("reason", "");
  };
  auto probe = [](std::int64_t req, int rank) {
    return json{{"type", "probe"},
                {"req", req},
                {"test", "inter_all_gather"},
                {"deadline_ms", 10000},
                {"rank", rank},
                {"world_size", 2},
                {"master_addr", "127.0.0.1"},
                {"master_port", 29600},
                {"rendezvous", true}};
  };
  auto reply_to = [&](std::int64_t req) {
    json reply;
    wait(
        [&] {
          for (const auto& x : controller_->messages)
            if ((x["type"] == "done" || x["type"] == "error") && x.value("req", json()) == req)
              reply = x;
          return !reply.is_null();
        },
        20);
    return reply;
  };
  // A rendezvous file as the probe writes it: magic, 2 ranks, 128 bytes.
  const std::string blob =
      "464c525630303031"
      "02000000"
      "80000000" +
      std::string(256, 'a');
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}}),
            "rendezvous: probe_req: no inter_all_gather probe with a relayed rendezvous runs for "
            "request 500");
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", "ABC"}}),
            "rendezvous: blob: expected an even number (2 to 2048) of lowercase hex digits");

  // Rank 1: the relay reaches its probe, once.
  controller_->send_raw(probe(500, 1));
  const json first =
      controller_->request({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}});
  EXPECT_EQ(first["type"], "done") << first.dump();
  EXPECT_EQ(first["ok"], true);
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 500}, {"blob", blob}}),
            "rendezvous: probe_req: request 500 already has its blob");
  const json r1 = reply_to(500);
  ASSERT_FALSE(r1.is_null());
  EXPECT_EQ(r1["ok"], true) << r1.dump();
  EXPECT_EQ(r1["rendezvous"], "ok") << r1.dump();
  EXPECT_EQ(r1["verdict"], "no_gpu");
  EXPECT_EQ(r1["result"]["kind"], "allgather") << "the CPU all-gather ran for the data path";

  // Rank 0: its probe's blob goes to the controller once, before the reply; a relay to it is
  // refused. The relay goes right behind the probe on the same connection, so the agent reads
  // it while the probe runs: without a GPU rank 0's probe publishes and ends within a fraction
  // of a second (sooner since it no longer loads cuBLAS), and a relay sent after the blob was
  // seen sometimes found no probe running.
  controller_->send_raw(probe(600, 0));
  EXPECT_EQ(reason({{"type", "rendezvous"}, {"probe_req", 600}, {"blob", blob}}),
            "rendezvous: probe_req: request 600 is rank 0, which publishes the blob");
  ASSERT_TRUE(wait([&] { return !controller_->of_type("rendezvous").empty(); }));
  const json r0 = reply_to(600);
  ASSERT_FALSE(r0.is_null());
  EXPECT_EQ(r0["ok"], true) << r0.dump();
  EXPECT_EQ(r0["rendezvous"], "ok");
  const auto published = controller_->of_type("rendezvous");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0]["probe_req"], 600);
  const std::string sent = published[0].value("blob", "");
  EXPECT_EQ(sent.size(), 2u * (16 + 128)) << sent;
  EXPECT_EQ(sent.substr(0, 32),
            "464c525630303031"
            "02000000"
            "80000000");
  EXPECT_LT(
      controller_->index_of([](const json& m) { return m["type"] == "rendezvous"; }),
      controller_->index_of([](const json& m) { return m["type"] == "done" && m["req"] == 600; }));
  // The relays were checked where the probes ran and the files are gone.
  EXPECT_TRUE(fs::is_empty(config_.machines[0].workdir + "/rendezvous"));

  // Rank 1 whose rank 0 never publishes: timed out within its deadline, saying so.
  json lonely = probe(700, 1);
  lonely["deadline_ms"] = 5000;  // the probe's own is 4.5 s: room for its ~0.5 s of loading
  controller_->send_raw(lonely);
  const json r2 = reply_to(700);
  ASSERT_FALSE(r2.is_null());
  EXPECT_EQ(r2["ok"], false) << r2.dump();
  EXPECT_EQ(r2["timed_out"], true);
  EXPECT_EQ(r2["rendezvous"], "timed_out");
  EXPECT_LT(r2["report"]["elapsed_s"].get<double>(), 4.5) << "the probe ended within its deadline";
  EXPECT_LT(r2["duration_s"].get<double>(), 5.0 + 0.5)
      << "killed at the agent's deadline at the latest";
}

}  // namespace
}  // namespace faultline::live
