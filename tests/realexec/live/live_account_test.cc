// The account of lost time end to end (issue 39): the controller's lost-time counters, scraped
// by the real Prometheus, survive a controller killed with SIGKILL and restarted mid-run: they
// continue from where they were (within one scrape interval) and never go back, so that
// Prometheus sees no counter reset. The same phases, with the simulator's names, are in
// `faultline live status --json`, in the journal and in the event log's "account" records.
#include <sys/socket.h>

#include <cstdlib>

#include "tests/realexec/live/live_cluster.h"
#include "tests/realexec/live/prometheus_support.h"
#include "traces/time_phases.h"

namespace {

using namespace faultline::live_e2e;
using namespace faultline::live_e2e::metrics_e2e;

// Every raw sample Prometheus holds of each lost phase's counter over the last 10 minutes:
// phase -> (scrape time, value), in time order.
std::map<std::string, std::vector<std::pair<double, double>>> scraped_lost(int prom_port) {
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (const auto& series : prom_query(prom_port, "faultline_lost_seconds_total[10m]")) {
    auto& v = out[series["metric"].value("phase", "?")];
    for (const auto& s : series["values"])
      v.emplace_back(s.at(0).get<double>(), std::stod(s.at(1).get<std::string>()));
  }
  return out;
}

// The sum over phases of the last sample at or before `t` (-1 when none).
double lost_sum_at(const std::map<std::string, std::vector<std::pair<double, double>>>& all,
                   double t, bool after = false) {
  double sum = 0;
  bool any = false;
  for (const auto& [phase, samples] : all) {
    const std::pair<double, double>* pick = nullptr;
    for (const auto& s : samples) {
      if (!after && s.first <= t) pick = &s;
      if (after && s.first > t && !pick) pick = &s;
    }
    if (pick) {
      sum += pick->second;
      any = true;
    }
  }
  return any ? sum : -1;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// A run with one killed rank (an incident, so that detection, diagnosis, failover and
// recompute all hold time), then its controller killed with SIGKILL and started again: the
// restarted controller adopts the job and its /metrics lost-time counters continue from the
// journal. Prometheus (Debian's binary, scraping every second) must see no reset of any of
// them, and the first value after the restart must continue the last one before it, grown by
// no more than the time between those two scrapes.
TEST(LiveAccount, LostTimeCountersContinueAcrossAControllerKilledWithSigkill) {
  const std::string prometheus = find_prometheus();
  if (prometheus.empty()) {
    if (std::getenv("CI")) FAIL() << "prometheus is not installed (apt-get install prometheus)";
    GTEST_SKIP() << "prometheus is not installed (apt-get install prometheus)";
  }
  LiveCluster c("account", json::object());
  const int metrics_port = free_port();
  const int prom_port = free_port();
  const std::string token = "account-e2e-token-" + std::to_string(getpid()) + "-0123456789";
  const std::string token_file = c.write_token("metrics-token", token);
  c.edit_config([&](json& cfg) {
    cfg["metrics_listen"] = "127.0.0.1:" + std::to_string(metrics_port);
    cfg["metrics_token_file"] = token_file;
  });
  Prometheus prom;
  prom.start(prometheus, c.dir(), metrics_port, token_file, prom_port);
  ASSERT_GT(prom.pid, 0);
  c.start_controller();
  c.start_agents();

  ASSERT_FALSE(c.wait_step(20, 60).is_null()) << "training did not reach step 20";
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const double t_fault = c.fault_time("kill");
  ASSERT_FALSE(c.wait_event_after("JobStarted", t_fault, 40).is_null())
      << "training did not resume after the kill";
  // The incident's close wrote an account record: cumulative, every lost phase, in the
  // simulator's names.
  const json record =
      c.wait_for([](const json& r) { return r.value("kind", "") == "account"; }, 10);
  ASSERT_FALSE(record.is_null()) << "no account record at the incident's close";
  for (std::size_t i = 1; i < faultline::kTimePhaseCount; ++i)
    EXPECT_TRUE(record["lost_s"].contains(faultline::kTimePhaseNames[i]))
        << faultline::kTimePhaseNames[i];
  EXPECT_GT(record["lost_s"]["failover"].get<double>(), 0) << record.dump();
  EXPECT_GT(
      record["lost_s"]["diagnosis"].get<double>() + record["lost_s"]["detection"].get<double>(), 0)
      << record.dump();

  // Let the job train a little, and Prometheus scrape it, then kill the controller.
  ASSERT_FALSE(c.wait_step(c.last_step() + 15, 30).is_null());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double t_kill = unix_now();
  c.kill_controller(SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double t_restart = unix_now();
  c.start_controller(false);
  ASSERT_FALSE(
      c.wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 20).is_null());
  ASSERT_FALSE(c.wait_step(c.last_step() + 15, 40).is_null()) << "no training after the restart";
  std::this_thread::sleep_for(std::chrono::seconds(4));  // a few scrapes of the new controller

  const auto scraped = scraped_lost(prom_port);
  ASSERT_EQ(scraped.size(), faultline::kTimePhaseCount - 1) << "one counter per lost phase";
  for (const auto& [phase, samples] : scraped) {
    for (std::size_t i = 1; i < samples.size(); ++i)
      EXPECT_GE(samples[i].second, samples[i - 1].second)
          << phase << " went back at " << samples[i].first << " (kill at " << t_kill << ")";
  }
  const json resets = prom_query(prom_port, "sum(resets(faultline_lost_seconds_total[10m]))");
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(std::stod(resets.at(0).at("value").at(1).get<std::string>()), 0)
      << "Prometheus saw a counter reset";
  // Continued from where it was: the first scrape of the new controller holds at least the
  // last one of the old, and at most the wall time between the two scrapes more (the sum of
  // the lost phases grows no faster than the clock) plus one scrape interval.
  const double before = lost_sum_at(scraped, t_kill);
  const double after = lost_sum_at(scraped, t_restart, true);
  ASSERT_GT(before, 0) << "nothing scraped before the kill";
  ASSERT_GE(after, 0) << "nothing scraped after the restart";
  double t_before = 0, t_after = 1e18;
  for (const auto& [phase, samples] : scraped)
    for (const auto& s : samples) {
      if (s.first <= t_kill) t_before = std::max(t_before, s.first);
      if (s.first > t_restart) t_after = std::min(t_after, s.first);
    }
  std::cerr << "lost seconds: " << before << " at the last scrape before the kill, " << after
            << " at the first after the restart (" << t_after - t_before << " s later)\n";
  EXPECT_GE(after, before);
  EXPECT_LE(after - before, t_after - t_before + 1.0);

  // The journal keeps the account, and the status shows it with the same names.
  const json journal = json::parse(slurp(c.dir() + "/state/journal.json"));
  ASSERT_TRUE(journal.contains("lost_s")) << journal.dump();
  EXPECT_GT(journal["lost_s"].value("failover", 0.0), 0);
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json status = json::parse(slurp(c.dir() + "/status.json"));
  ASSERT_TRUE(status.contains("account")) << status.dump();
  for (std::size_t i = 1; i < faultline::kTimePhaseCount; ++i)
    EXPECT_GE(status["account"]["lost_s"].value(faultline::kTimePhaseNames[i], -1.0),
              scraped.at(faultline::kTimePhaseNames[i]).front().second)
        << faultline::kTimePhaseNames[i];

  // A second incident, under the restarted controller, adds to the restored account (it
  // does not start from zero): its close's record holds more failover than the first one.
  ASSERT_EQ(c.inject("m2", "kill"), 0);
  const json second = c.wait_for(
      [&](const json& r) {
        return r.value("kind", "") == "account" && r["t_s"].get<double>() > record["t_s"];
      },
      40);
  ASSERT_FALSE(second.is_null()) << "no account record at the second incident's close";
  EXPECT_GT(second["lost_s"]["failover"].get<double>(), record["lost_s"]["failover"].get<double>())
      << second.dump();

  // At the end of the run, the final account comes just before the summary, and its phases
  // sum to elapsed - productive, but for the approximations docs/metrics.md names (steps
  // faster than the median, steps revalued as the median moves): never less, and not more
  // than 1 % of the elapsed time more.
  c.stop_run();
  const json summary =
      c.wait_for([](const json& r) { return r.value("kind", "") == "summary"; }, 20);
  ASSERT_FALSE(summary.is_null());
  json last, previous;  // the record before the summary
  for (const json& r : c.records()) {
    if (r.value("kind", "") == "summary") last = previous;
    previous = r;
  }
  ASSERT_EQ(last.value("kind", ""), "account") << last.dump();
  double lost = 0;
  for (const auto& [phase, v] : last["lost_s"].items()) lost += v.get<double>();
  const double unproductive = last["elapsed_s"].get<double>() - last["productive_s"].get<double>();
  std::cerr << "final account: lost " << lost << " s, elapsed - productive " << unproductive
            << " s\n";
  EXPECT_GE(lost, unproductive - 1e-6) << last.dump();
  EXPECT_LE(lost, unproductive + 0.01 * last["elapsed_s"].get<double>()) << last.dump();
  EXPECT_EQ(last["ettr"].get<double>(), summary["ettr"].get<double>());
}
