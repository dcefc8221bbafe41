// Live mode end to end as the operator observes it: Prometheus scrapes the controller's exact
// account, and probes across machines get their rendezvous relayed by the controller.
#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/prometheus_support.h"

namespace {

using namespace faultline::live_e2e;

}  // namespace

// The operator's view through Prometheus equals the controller's own account: a run with one
// killed rank trains a bounded number of steps and finishes, so its ETTR is final; Prometheus
// (Debian's binary, scraping every second with the bearer token) must then hold exactly the
// ETTR that `faultline live status` reports, and the incident counters must count the kill.
TEST(LiveE2E, PrometheusScrapesTheControllersExactEttrAndCountsTheKilledRank) {
  using namespace faultline::live_e2e::metrics_e2e;
  const std::string prometheus = find_prometheus();
  if (prometheus.empty()) {
    // CI installs it (.ci/install-deps): there, a missing binary is a failure, not a skip.
    if (std::getenv("CI")) FAIL() << "prometheus is not installed (apt-get install prometheus)";
    GTEST_SKIP() << "prometheus is not installed (apt-get install prometheus)";
  }
  const auto t0 = std::chrono::steady_clock::now();
  LiveCluster c("metrics", json::object());
  const int metrics_port = free_port();
  const int prom_port = free_port();
  const std::string token = "metrics-e2e-token-" + std::to_string(getpid()) + "-0123456789";
  const std::string token_file = c.write_token("metrics-token", token);
  c.edit_config([&](json& cfg) {
    cfg["metrics_listen"] = "127.0.0.1:" + std::to_string(metrics_port);
    cfg["metrics_token_file"] = token_file;
    cfg["metrics_linger_s"] = 30;
    auto& argv = cfg["job"]["versions"]["v1"];
    argv.push_back("--steps");
    argv.push_back("60");
  });
  Prometheus prom;
  prom.start(prometheus, c.dir(), metrics_port, token_file, prom_port);
  ASSERT_GT(prom.pid, 0);
  c.start_controller();
  c.start_agents();

  ASSERT_FALSE(c.wait_step(20, 60).is_null()) << "training did not reach step 20";
  // The endpoint itself (listening by now): without the token, nothing.
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(http(metrics_port, get + "\r\n").rfind("HTTP/1.1 401 ", 0), 0u);
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_FALSE(c.wait_event_after("JobStarted", t_fault, 40).is_null())
      << "training did not resume after the kill";

  // The job trains its 60 steps and finishes; the controller writes its summary and serves
  // the final values for metrics_linger_s. Wait until Prometheus has scraped them.
  json ended;
  for (int i = 0; i < 600 && (ended.empty() || sample_value(ended) != 1); ++i) {
    ended = prom_query(prom_port, "faultline_run_ended");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(ended.empty()) << "Prometheus never got a sample; its targets: "
                              << body_of(http(prom_port, "GET /api/v1/targets HTTP/1.0\r\n\r\n"));
  ASSERT_EQ(sample_value(ended), 1) << "the run did not end within 60 s";
  const json ettr = prom_query(prom_port, "faultline_ettr");
  ASSERT_EQ(ettr.size(), 1u);
  const double prom_ettr = sample_value(ettr);

  // The controller's own account, after the run ended (the accounting is final).
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json status = json::parse(slurp(c.dir() + "/status.json"));
  const double own_ettr = status.at("ettr_so_far").get<double>();
  std::cerr << std::setprecision(17) << "ETTR: Prometheus " << prom_ettr
            << ", faultline live status " << own_ettr << ", difference " << prom_ettr - own_ettr
            << "\n";
  EXPECT_GT(own_ettr, 0);
  EXPECT_NEAR(prom_ettr, own_ettr, 1e-9);
  EXPECT_EQ(prom_ettr, own_ettr)
      << "both print the shortest form that reads back as the same double";
  // And the summary record's ETTR (the event log) is the same number.
  const json summary =
      c.wait_for([](const json& r) { return r.value("kind", "") == "summary"; }, 5);
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["ettr"].get<double>(), own_ettr);

  // The kill is one rank_exit incident, recovered; every incident the controller counts
  // (the job's own finish included) is counted as opened.
  const json killed = prom_query(
      prom_port, "faultline_incidents_total{category=\"rank_exit\",resolution=\"recovered\"}");
  ASSERT_EQ(killed.size(), 1u) << prom_query(prom_port, "faultline_incidents_total").dump();
  EXPECT_GE(sample_value(killed), 1);
  std::cerr << "incidents: rank_exit recovered " << sample_value(killed)
            << ", opened (all categories) "
            << prom_query(prom_port, "sum(faultline_incidents_opened_total)").dump()
            << ", status incident_count " << status.at("incident_count") << "\n";
  const json opened = prom_query(prom_port, "sum(faultline_incidents_opened_total)");
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(sample_value(opened), status.at("incident_count").get<double>());
  const json recovered = prom_query(prom_port, "faultline_recovery_latency_seconds_count");
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(sample_value(recovered), sample_value(killed));
  // The same final values come straight from the endpoint.
  const std::string direct =
      body_of(http(metrics_port, get + "Authorization: Bearer " + token + "\r\n\r\n"));
  const std::size_t at = direct.find("\nfaultline_ettr ");
  ASSERT_NE(at, std::string::npos) << direct.substr(0, 600);
  EXPECT_EQ(std::strtod(direct.c_str() + at + 16, nullptr), own_ettr);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "metrics e2e took " << took_s << " s\n";
  EXPECT_LT(took_s, 90);
}

// --- Probes across machines (PROTOCOL.md): inter_all_gather with probe_bin ------------------

// Starts the run with `probe_bin` (GPUs hidden: namespace hosts would share this host's, and
// NCCL refuses two ranks on one GPU; the GPU run across real machines is the GPU
// validation's), trains, kills a rank on m1, and waits for byterobust's stop-time
// inter_all_gather on m1 and m2: its action in *action, its outcome in *outcome.
static void kill_and_wait_for_relayed_probe(LiveCluster& c, const std::string& probe_bin,
                                            json* action, json* outcome) {
  c.edit_config([&](json& j) {
    j["probe_bin"] = probe_bin;
    j["job"]["env"]["CUDA_VISIBLE_DEVICES"] = "";
  });
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_GE(t_fault, 0);
  *action = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "RunProbe") && r["t_s"] >= t_fault &&
               r["action"].value("test", "") == "inter-all-gather";
      },
      30);
  ASSERT_FALSE(action->is_null()) << "no inter_all_gather after the kill";
  const long id = action->value("id", -1L);
  *outcome = c.wait_for(
      [&](const json& r) { return r.value("kind", "") == "outcome" && r.value("id", -2L) == id; },
      30);
  ASSERT_FALSE(outcome->is_null()) << "the inter_all_gather probe did not end";
}

// The NCCL unique id of faultline-probe's all-gather across machines travels from rank 0's agent
// through the controller to the other agents, over the authenticated channel. This host has no
// GPU: each probe still does its part of the rendezvous (rank 0 publishes random bytes of the id's
// size) and reports no_gpu, and the training job's CPU all-gather tests the data path.
TEST(LiveE2E, ProbesAcrossMachinesGetTheirRendezvousRelayedByTheController) {
  LiveCluster c("rdv", json{{"probe_deadline_s", 8}});
  json action, outcome;
  kill_and_wait_for_relayed_probe(c, PROBE_BIN, &action, &outcome);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(action["action"]["machines"], json::array({1, 2}));
  const std::string detail = outcome.value("detail", "");
  EXPECT_NE(detail.find("inter_all_gather: all passed"), std::string::npos) << detail;
  EXPECT_NE(detail.find("rendezvous relayed by the controller: every machine joined (m1, m2)"),
            std::string::npos)
      << detail;
  const long id = action.value("id", -1L);
  const json result = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "ProbeResult") && r["event"].value("action", -1L) == id;
      },
      5);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["event"]["failed"], json::array());
  std::cerr << "relayed inter_all_gather took " << outcome.value("duration_s", -1.0)
            << " s: " << detail << "\n";
  // The rendezvous files are the agents' own and gone after the probe.
  for (const char* m : {"m1", "m2"}) {
    std::error_code ec;
    int left = 0;
    for (const auto& e : fs::directory_iterator(c.dir() + "/" + m + "/rendezvous", ec))
      left += e.is_regular_file();
    EXPECT_FALSE(ec) << m << ": " << ec.message();
    EXPECT_EQ(left, 0) << m;
  }
  c.stop_run();
}

// A machine whose probe never joins the rendezvous (a hung process on m2, rank 1) is named alone,
// within the probe's deadline: m1 joined and only waited for it.
TEST(LiveE2E, AProbeThatNeverJoinsTheRendezvousNamesItsMachineWithinTheDeadline) {
  LiveCluster c("rdv-hang", json{{"probe_deadline_s", 5}});
  const std::string wrapper = c.dir() + "/probe-wrapper.sh";
  std::ofstream(wrapper)
      << "#!/bin/sh\n"
      << "if [ \"$FAULTLINE_MACHINE\" = m2 ] && [ \"$1\" = nccl ]; then exec sleep 600; fi\n"
      << "exec " << PROBE_BIN << " \"$@\"\n";
  chmod(wrapper.c_str(), 0755);
  json action, outcome;
  kill_and_wait_for_relayed_probe(c, wrapper, &action, &outcome);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string detail = outcome.value("detail", "");
  EXPECT_NE(detail.find("inter_all_gather: failed on m2;"), std::string::npos) << detail;
  EXPECT_NE(detail.find("rendezvous: m2 did not join"), std::string::npos) << detail;
  const double took = outcome["t_s"].get<double>() - action["t_s"].get<double>();
  EXPECT_GE(took, 4.0) << "the probe's deadline ended it";
  EXPECT_LT(took, 5.0 + 1.5) << "within the deadline (5 s), not the controller's request timeout";
  const long id = action.value("id", -1L);
  const json result = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_event(r, "ProbeResult") && r["event"].value("action", -1L) == id;
      },
      5);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["event"]["failed"], json::array({2}));
  EXPECT_TRUE(result["event"].value("timed_out", false));
  // The named machine is the one the policy takes out.
  const json evict = c.wait_for(
      [&](const json& r) {
        return LiveCluster::is_action(r, "EvictMachines") &&
               r["t_s"] >= outcome["t_s"].get<double>();
      },
      10);
  ASSERT_FALSE(evict.is_null());
  EXPECT_EQ(evict["action"]["machines"], json::array({2}));
  std::cerr << "inter_all_gather with m2 missing took " << took << " s: " << detail << "\n";
  c.stop_run();
}
