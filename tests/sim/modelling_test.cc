// Every modelling assumption a choice (issue 36): each choice a scenario can switch,
// checked against something independent of the simulator: a closed form where one exists
// (Poisson counts on the compute clock, time to train with a fixed restart cost, the Erlang
// loss formula for a finite fleet, a two-state machine that a repair cures, compound
// Poisson waits for the repair-time distributions), an exact count otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sim/sim_json.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using nlohmann::json;

std::string write_scenario(const std::string& name, const json& doc) {
  const std::filesystem::path dir = scratch_dir("modelling");
  std::filesystem::create_directories(dir);
  const std::filesystem::path p = dir / (name + ".json");
  std::ofstream(p) << doc.dump(2);
  return p.string();
}

// A job of `machines` machines (8 GPUs each) with one crash category seen at once, restarted
// by the reschedule stack (evict what the crash names, a cold replacement, a restart from a
// checkpoint taken every millisecond: no work lost, nothing blocking).
json job(int machines, double rate, bool persistent) {
  return {{"description", "modelling test"},
          {"seed", 7},
          {"replicas", 20},
          {"cluster",
           {{"machines", machines},
            {"scheduler", {{"reschedule_base_s", 0}, {"reschedule_per_machine_s", 0}}},
            {"repair", {{"to_manual", 0}, {"auto_fail", 0}, {"retire_after", 0}}}}},
          {"job",
           {{"tp", 8},
            {"pp", 1},
            {"dp", machines},
            {"step_time_s", 1},
            {"init_s", 0},
            {"horizon_days", 30}}},
          {"faults",
           {{"categories", json::array({{{"name", "crash"},
                                         {"rate_per_machine_day", rate},
                                         {"scope", "machine"},
                                         {"symptom", "crash"},
                                         {"persistent", persistent}}})}}},
          {"policy",
           {{"stack", "reschedule"},
            {"params", {{"checkpoint_interval_s", 1e-3}, {"checkpoint_write_s", 0}}}}}};
}

double per_replica(const json& r, const char* what) {
  return r["incidents"]["by_category"]["crash"][what].get<double>();
}

// Mean and standard error of a replicas.csv column.
struct Column {
  double mean = 0, se = 0, var = 0;
  std::vector<double> xs;
};
Column column(const std::string& csv, const std::string& name) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  std::stringstream hs(line);
  for (std::string h; std::getline(hs, h, ',');) head.push_back(h);
  const auto at = std::find(head.begin(), head.end(), name) - head.begin();
  Column c;
  while (std::getline(in, line)) {
    std::stringstream ls(line);
    std::string cell;
    for (long i = 0; i <= at; ++i) std::getline(ls, cell, ',');
    c.xs.push_back(std::stod(cell));
  }
  for (double x : c.xs) c.mean += x / static_cast<double>(c.xs.size());
  for (double x : c.xs) c.var += (x - c.mean) * (x - c.mean) / static_cast<double>(c.xs.size() - 1);
  c.se = std::sqrt(c.var / static_cast<double>(c.xs.size()));
  return c;
}

json run_out(const std::string& scen, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {scen, "--jobs", "2", "--out", out};
  args.insert(args.end(), extra.begin(), extra.end());
  return sim_run_json(args);
}

// faults.clock "compute": faults arrive only while the job trains, so a job of W days of
// work on M machines sees Poisson(rate x M x W) faults however long its restarts take.
// On the wall clock the same job also meets the faults that land during its six-hour
// restarts (and each costs another restart): rate x M x (time to train).
TEST(FaultClock, OnTheComputeClockFaultsAreRateTimesMachinesTimesWork) {
  json doc = job(16, 0.02, false);
  doc["job"].erase("horizon_days");
  doc["job"]["work_days"] = 20;
  doc["job"]["init_s"] = 86400;
  doc["replicas"] = 400;
  doc["faults"]["clock"] = "compute";
  const json compute = sim_run_json({write_scenario("clock-compute", doc), "--jobs", "2"});
  doc["faults"]["clock"] = "wall";
  const json wall = sim_run_json({write_scenario("clock-wall", doc), "--jobs", "2"});
  const double expect = 0.02 * 16 * 20;  // 6.4 per replica
  const double sd = std::sqrt(expect / 400);
  EXPECT_NEAR(per_replica(compute, "injected_per_replica"), expect, 4 * sd);
  EXPECT_EQ(compute["fault_clock"], "compute");
  // The realized rate is the stated one on the compute clock.
  EXPECT_NEAR(
      compute["incidents"]["by_category"]["crash"]["realized_rate_per_machine_day"].get<double>(),
      0.02, 4 * sd / (16 * 20));
  // On the wall clock: rate x M x time to train, which is W + a day per fault and longer.
  const double t_wall = wall["time_to_train"]["mean"].get<double>();
  EXPECT_GT(t_wall, compute["time_to_train"]["mean"].get<double>());
  EXPECT_NEAR(per_replica(wall, "injected_per_replica"), 0.02 * 16 * t_wall,
              4 * std::sqrt(0.02 * 16 * t_wall / 400));
  EXPECT_GT(per_replica(wall, "injected_per_replica"),
            per_replica(compute, "injected_per_replica") + 2 * sd);
}

// job.work_days: with a fixed start cost c (the first start and one restart per fault) and
// faults on the compute clock, the time to train is W + (N + 1) c with N ~ Poisson(rate M W):
// its mean W + (rate M W + 1) c and its variance rate M W c^2 (in days). With instant
// restarts it is the work itself.
TEST(WorkDays, TimeToTrainIsTheWorkPlusOneRestartPerFault) {
  json doc = job(16, 0.05, false);
  doc["job"].erase("horizon_days");
  doc["job"]["work_days"] = 10;
  doc["faults"]["clock"] = "compute";
  doc["replicas"] = 200;
  const double c_days = 0.25;  // six hours
  doc["job"]["init_s"] = c_days * 86400;
  const std::string out = scratch_dir("modelling-ttt").string();
  const json r = run_out(write_scenario("ttt", doc), out);
  const double n = 0.05 * 16 * 10;  // 8 faults per replica
  const auto& t = r["time_to_train"];
  const double sd = std::sqrt(n * c_days * c_days / 200);
  EXPECT_NEAR(t["mean"].get<double>(), 10 + (n + 1) * c_days, 4 * sd);
  EXPECT_EQ(t["finished"].get<int>(), 200);
  EXPECT_EQ(t["censored"].get<int>(), 0);
  EXPECT_LE(t["p50"].get<double>(), t["p90"].get<double>());
  EXPECT_LE(t["p90"].get<double>(), t["p99"].get<double>());
  // The bootstrap CIs (sim/metrics.h): the mean's agrees with the Student t interval of the
  // same replicas (within a fifth of its half-width), and the median's holds the true median
  // of W + (N + 1) c: N's median is 8 (P(N <= 7) = 0.45, P(N <= 8) = 0.59), so 12.25 days.
  const double half = (t["ci95"][1].get<double>() - t["ci95"][0].get<double>()) / 2;
  EXPECT_NEAR(t["mean_ci95_bootstrap"][0].get<double>(), t["ci95"][0].get<double>(), 0.2 * half);
  EXPECT_NEAR(t["mean_ci95_bootstrap"][1].get<double>(), t["ci95"][1].get<double>(), 0.2 * half);
  EXPECT_LE(t["p50_ci95"][0].get<double>(), 10 + 9 * c_days);
  EXPECT_GE(t["p50_ci95"][1].get<double>(), 10 + 9 * c_days);
  for (const char* q : {"p50", "p90", "p99"}) {
    const std::string ci = std::string(q) + "_ci95";
    EXPECT_LE(t[ci][0].get<double>(), t[q].get<double>()) << q;
    EXPECT_GE(t[ci][1].get<double>(), t[q].get<double>()) << q;
  }
  EXPECT_EQ(t["bootstrap"]["resamples"].get<int>(), 2000);
  const Column ttt = column(out + "/replicas.csv", "time_to_train_days");
  EXPECT_NEAR(ttt.var, n * c_days * c_days, 0.3 * n * c_days * c_days);
  // ETTR on a job of fixed work: the work over the time to train.
  EXPECT_NEAR(r["ettr"]["mean"].get<double>(), 10 / (10 + (n + 1) * c_days), 0.02);

  doc["job"]["init_s"] = 0;
  doc["replicas"] = 10;
  const json instant = sim_run_json({write_scenario("ttt-instant", doc), "--jobs", "2"});
  EXPECT_GE(instant["time_to_train"]["min"].get<double>(), 10.0);
  EXPECT_LT(instant["time_to_train"]["max"].get<double>(),
            10.0 + 1e-3);  // a fault costs under a step
}

// A cap below what the work needs stops replicas: they are censored, never a time to train.
TEST(WorkDays, AReplicaTheCapStopsIsCensoredNotATimeToTrain) {
  json doc = job(16, 0.05, false);
  doc["job"]["work_days"] = 10;
  doc["job"]["horizon_days"] = 11;  // the work needs 10 + 9 x 0.25 = 12.25 days on average
  doc["job"]["init_s"] = 0.25 * 86400;
  doc["faults"]["clock"] = "compute";
  const std::string out = scratch_dir("modelling-cap").string();
  const json r = run_out(write_scenario("cap", doc), out);
  const auto& t = r["time_to_train"];
  EXPECT_GT(t["censored"].get<int>(), 0);
  EXPECT_EQ(t["finished"].get<int>() + t["censored"].get<int>(), 20);
  EXPECT_TRUE(t["p90"].is_null());          // beyond the cap: unknown
  EXPECT_TRUE(t["p90_ci95"][1].is_null());  // and so is its interval's upper end
  EXPECT_TRUE(t["p99_ci95"][1].is_null());
  if (!t["max"].is_null()) {
    EXPECT_LE(t["max"].get<double>(), 11.0);
  }
  std::ifstream in(out + "/replicas.csv");
  std::string line, head;
  std::getline(in, head);
  int censored = 0;
  while (std::getline(in, line))
    if (line.back() == '1') {
      ++censored;
      EXPECT_NE(line.find(",,1"), std::string::npos)
          << "a censored replica has no time to train: " << line;
    }
  EXPECT_EQ(censored, t["censored"].get<int>());
}

// A finite fleet: the job's M machines and S spares, failures on the compute clock at rate
// lambda per machine, each failed machine repaired in an exponential time of mean r, every
// restart instant. With k machines in repair the job runs while k <= S and waits for a
// repaired machine at k = S + 1: a birth-death chain whose stationary law is Poisson(a)
// truncated to 0..S+1, a = M lambda r. The share of time the job waits is Erlang's loss
// formula B(S + 1, a), and it never has more than M + S machines.
TEST(FiniteFleet, TheJobWaitsForMachinesAsErlangsLossFormulaSays) {
  const int m = 16, spares = 2;
  const double lambda = 0.125, r_days = 1, a = m * lambda * r_days;  // a = 2
  json doc = job(m, lambda, true);
  doc["job"]["horizon_days"] = 200;
  doc["faults"]["clock"] = "compute";
  doc["cluster"]["repair"]["auto_h"] = r_days * 24;
  doc["cluster"]["repair"]["repair_time"] = "exponential";
  doc["cluster"]["repair"]["fleet"] = "finite";
  doc["cluster"]["repair"]["spare_machines"] = spares;
  doc["replicas"] = 40;
  const json r = sim_run_json({write_scenario("finite", doc), "--jobs", "2"});
  double term = 1, sum = 1;
  for (int k = 1; k <= spares + 1; ++k) sum += term *= a / k;
  const double erlang_b = term / sum;  // B(3, 2) = 0.2105
  const double waiting = r["breakdown_share"]["waiting_for_machines"].get<double>();
  EXPECT_NEAR(waiting, erlang_b, 0.02)
      << "Erlang B(" << spares + 1 << ", " << a << ") = " << erlang_b;
  EXPECT_EQ(r["fleet"]["kind"], "finite");
  EXPECT_LE(r["fleet"]["machines_used_max"].get<int>(), m + spares);
  EXPECT_EQ(r["fleet"]["machines_beyond_fleet_per_replica"].get<double>(), 0.0);
  // The timeline carries the waits: its last point is the replica's whole wait.
  {
    json one = doc;
    one["replicas"] = 1;
    const std::string out = scratch_dir("finite-timeline").string();
    const json r1 = run_out(write_scenario("finite-one", one), out,
                            {"--timeline", "--timeline-step-s", "86400"});
    const Column w = column(out + "/timeline.csv", "waiting_for_machines_h");
    EXPECT_NEAR(w.xs.back(), r1["breakdown_s"]["waiting_for_machines"].get<double>() / 3600, 1e-6);
    EXPECT_GT(w.xs.back(), 24.0);
    for (std::size_t i = 1; i < w.xs.size(); ++i) EXPECT_GE(w.xs[i], w.xs[i - 1]);
  }

  // The same run on an endless fleet never waits: it takes machines beyond the fleet, and says so.
  doc["cluster"]["repair"].erase("fleet");
  const json endless = sim_run_json({write_scenario("endless", doc), "--jobs", "2"});
  EXPECT_EQ(endless["breakdown_s"]["waiting_for_machines"].get<double>(), 0.0);
  EXPECT_GT(endless["fleet"]["machines_beyond_fleet_per_replica"].get<double>(), 1.0);
  EXPECT_GT(endless["fleet"]["machines_used_max"].get<int>(), m + spares);

  // Preemptible machines shorten the waits and are counted; the fleet stays finite.
  doc["cluster"]["repair"]["fleet"] = "finite";
  doc["cluster"]["repair"]["preemptible_machines"] = 3;
  doc["cluster"]["repair"]["preempt_s"] = 600;
  const json pre = sim_run_json({write_scenario("preempt", doc), "--jobs", "2"});
  EXPECT_GT(pre["fleet"]["preemptions_per_replica"].get<double>(), 0.0);
  EXPECT_LE(pre["fleet"]["machines_used_max"].get<int>(), m + spares + 3);
  EXPECT_LT(pre["breakdown_share"]["waiting_for_machines"].get<double>(), 0.5 * waiting);
}

// Bad machines cured by repair: one machine, bad with probability f, fails at g when good
// and b = k g when bad (g = rate / (1 - f + f k)); a failure sends it to repair, which
// cures a bad one with probability c; the job waits (compute clock: no faults meanwhile).
// Over W days of work the expected faults are
//   g W + f (b - g) (1 - exp(-b c W)) / (b c),
// against g W + f (b - g) W when bad machines stay bad.
TEST(BadMachines, ARepairThatCuresBadMachinesGivesTheTwoStateClosedForm) {
  const double f = 0.5, k = 10, rate = 0.3, w = 20, cure = 0.5;
  json doc = job(1, rate, true);
  doc["job"].erase("horizon_days");
  doc["job"]["work_days"] = w;
  doc["faults"]["clock"] = "compute";
  auto& rp = doc["cluster"]["repair"];
  rp["fleet"] = "finite";
  rp["spare_machines"] = 0;
  rp["auto_h"] = 1;
  rp["bad_fraction"] = f;
  rp["bad_rate_factor"] = k;
  rp["cure_bad"] = cure;
  doc["replicas"] = 400;
  const json r = sim_run_json({write_scenario("cure", doc), "--jobs", "2"});
  const double g = rate / (1 - f + f * k), b = k * g;
  const double expect = g * w + f * (b - g) * (1 - std::exp(-b * cure * w)) / (b * cure);
  const double sd = std::sqrt((expect + f * (1 - f) * std::pow((b - g) * w, 2) * 0.05) / 400);
  EXPECT_NEAR(per_replica(r, "injected_per_replica"), expect, 4 * sd + 0.02 * expect)
      << "closed form " << expect;
  // Never cured: bad machines keep failing at b.
  rp.erase("cure_bad");
  const json never = sim_run_json({write_scenario("nocure", doc), "--jobs", "2"});
  const double stay = g * w + f * (b - g) * w;
  EXPECT_NEAR(per_replica(never, "injected_per_replica"), stay, 0.05 * stay);
}

// Bad machines that appear over time (turn_bad_per_machine_day a, hardware ageing): M good
// machines that the job keeps (transient crashes, requeued in place with every machine kept)
// fail at g while good and k g once bad, each turning bad after an Exp(a) time. Over H days
// the expected faults are M [g H + (k - 1) g (H - (1 - exp(-a H)) / a)].
TEST(BadMachines, MachinesThatTurnBadOverTimeFailAsTheAgeingClosedFormSays) {
  const int m = 64;
  const double g = 0.02, k = 10, a = 0.05, h = 30;
  json doc = job(m, g, false);
  doc["policy"] = {{"stack", "requeue"},
                   {"params", {{"checkpoint_interval_s", 1e-3}, {"checkpoint_write_s", 0}}}};
  doc["cluster"]["scheduler"] = {{"requeue_base_s", 0}, {"requeue_per_machine_s", 0}};
  doc["job"]["horizon_days"] = h;
  doc["cluster"]["repair"]["turn_bad_per_machine_day"] = a;
  doc["cluster"]["repair"]["bad_rate_factor"] = k;
  doc["replicas"] = 40;
  const json r = sim_run_json({write_scenario("ageing", doc), "--jobs", "2"});
  const double expect = m * (g * h + (k - 1) * g * (h - (1 - std::exp(-a * h)) / a));  // 205
  EXPECT_NEAR(per_replica(r, "injected_per_replica"), expect, 4 * std::sqrt(2 * expect / 40))
      << "closed form " << expect;
  EXPECT_GT(per_replica(r, "realized_rate_per_machine_day"),
            2 * g);  // the stated rate is the good machines'
  EXPECT_TRUE(r["incidents"]["by_category"]["crash"]["rate_gap_flagged"].get<bool>());
}

// The repair-time distribution keeps its mean and sets the spread. A job of two machines on a
// finite fleet of two waits for every repair of mean r, so time to train = W + the sum of N
// repairs, N ~ Poisson(2 rate W): Var = 2 rate W E[R^2], i.e. 2 rate W r^2 fixed, twice that
// exponential, exp(sigma^2) times that lognormal (compound Poisson). (Two machines: the
// replaced one restores from the other's in-memory copy, so no work is lost.)
TEST(RepairTimes, FixedExponentialAndLognormalRepairsGiveTheCompoundPoissonSpread) {
  const double rate = 0.25, w = 10, r_days = 0.5, sigma = 0.8;
  json doc = job(2, rate, true);
  doc["job"].erase("horizon_days");
  doc["job"]["work_days"] = w;
  doc["faults"]["clock"] = "compute";
  doc["cluster"]["repair"]["fleet"] = "finite";
  doc["cluster"]["repair"]["spare_machines"] = 0;
  doc["cluster"]["repair"]["auto_h"] = r_days * 24;
  doc["replicas"] = 1000;
  const double n = 2 * rate * w;
  struct Case {
    const char* dist;
    double second_moment;  // E[R^2] / r^2
  } cases[] = {{"fixed", 1}, {"exponential", 2}, {"lognormal", std::exp(sigma * sigma)}};
  for (const Case& c : cases) {
    doc["cluster"]["repair"]["repair_time"] = c.dist;
    if (std::string(c.dist) == "lognormal") doc["cluster"]["repair"]["repair_sigma"] = sigma;
    const std::string out =
        (std::filesystem::temp_directory_path() / (std::string("faultline-rt-") + c.dist)).string();
    const json r = run_out(write_scenario(std::string("rt-") + c.dist, doc), out);
    const Column t = column(out + "/replicas.csv", "time_to_train_days");
    EXPECT_NEAR(t.mean, w + n * r_days, 4 * std::sqrt(n * c.second_moment * r_days * r_days / 1000))
        << c.dist;
    const double var = n * c.second_moment * r_days * r_days;
    EXPECT_NEAR(t.var, var, 0.25 * var) << c.dist;
  }
}

// standby_refill "repaired": machines back from repair refill the warm pool, and only the
// scheduler's host selection (when the pool runs dry) draws it full from the free pool.
// With repairs that never return, S standbys serve S failures and the (S+1)-th goes to the
// scheduler, which fills the pool again: exactly floor(N / (S + 1)) exhaustions for N
// failures. Refilled from the free pool after every use (the default), it never runs dry.
TEST(StandbyRefill, RefilledOnlyByRepairsThePoolRunsDryEveryPoolPlusOneFailures) {
  json doc = job(32, 0.05, true);
  doc["policy"] = {{"stack", "byterobust"},
                   {"params", {{"standby_pool", 3}, {"inspect_gpu_s", 0.1}}}};
  doc["faults"]["categories"][0]["alert"] = "gpu";
  doc["cluster"]["repair"]["auto_h"] = 1e5;
  doc["cluster"]["scheduler"]["standby_refill"] = "repaired";
  doc["diagnosis"] = {{"gpu_diag_s", 0}, {"standby_wake_s", 0}, {"false_positive_rate", 0}};
  doc["job"]["horizon_days"] = 60;
  const std::string out = scratch_dir("refill").string();
  const json r = run_out(write_scenario("refill", doc), out);
  const Column inc = column(out + "/replicas.csv", "incidents");
  double expect = 0;
  for (double x : inc.xs) expect += std::floor(x / 4) / static_cast<double>(inc.xs.size());
  EXPECT_NEAR(r["standby_exhaustions_per_replica"].get<double>(), expect, 1e-9);
  EXPECT_GT(expect, 1);
  doc["cluster"]["scheduler"].erase("standby_refill");
  const json pool = sim_run_json({write_scenario("refill-pool", doc), "--jobs", "2"});
  EXPECT_LT(pool["standby_exhaustions_per_replica"].get<double>(), 0.2 * expect);
}

// host_selection "fewest_failures": while never-used spares remain, a machine that failed
// is never handed out again, so a failed repair (its fault kept, the health check blind)
// never recurs in the job. Drawn at random, such machines come back and recur.
TEST(HostSelection, FewestFailuresFirstNeverHandsBackAFailedMachineWhileSparesRemain) {
  json doc = job(32, 0.05, true);
  doc["cluster"]["repair"]["auto_fail"] = 1;
  doc["cluster"]["repair"]["retire_after"] = 100;
  doc["cluster"]["repair"]["auto_h"] = 1;
  doc["cluster"]["repair"]["spare_machines"] = 200;
  doc["cluster"]["scheduler"]["health_check_recall"] = 0;
  const json random = sim_run_json({write_scenario("hs-random", doc), "--jobs", "2"});
  doc["cluster"]["scheduler"]["host_selection"] = "fewest_failures";
  const json fewest = sim_run_json({write_scenario("hs-fewest", doc), "--jobs", "2"});
  EXPECT_GT(per_replica(random, "recurred_per_replica"), 1.0);
  EXPECT_EQ(per_replica(fewest, "recurred_per_replica"), 0.0);
  EXPECT_LT(fewest["fleet"]["machines_used_max"].get<int>(), 32 + 200 + 1);
}

// misattribution "random": a crash log that does not name the culprit names a random other
// machine of the job instead of its pipeline neighbour (with pp 1, the next slot). At each
// replica's first incident every machine is still the one placed at the start (machine i
// in slot i), so the machine the stack evicted on a wrong log is the next slot's for the
// neighbour rule, and one of the 31 others, at random, for the random rule.
TEST(Attribution, ARandomMisattributionBlamesAnyMachineNotTheNeighbour) {
  auto next_slot_share = [](const std::string& misattribution) {
    json doc = job(32, 0.05, true);
    doc["faults"]["categories"][0]["attribution"] = 0.5;
    doc["faults"]["categories"][0]["misattribution"] = misattribution;
    doc["replicas"] = 200;
    doc["job"]["horizon_days"] = 5;
    const std::string out =
        (std::filesystem::temp_directory_path() / ("faultline-attr-" + misattribution)).string();
    run_out(write_scenario("attr-" + misattribution, doc), out, {"--incidents"});
    std::ifstream in(out + "/incidents.csv");
    std::string line;
    std::getline(in, line);
    std::string last_replica;
    int wrong = 0, next = 0;
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::stringstream ls(line);
      for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
      if (cells.size() < 9 || cells[0] == last_replica) continue;  // each replica's first incident
      last_replica = cells[0];
      const int slot = std::stoi(cells[6]), culprit = std::stoi(cells[7]);
      EXPECT_EQ(slot, culprit) << line;
      std::stringstream ev(cells[8]);
      int first = -1;
      ev >> first;
      if (first < 0 || first == culprit) continue;
      ++wrong;
      next += first == (slot + 1) % 32;
    }
    EXPECT_GT(wrong, 40) << misattribution;
    return wrong ? static_cast<double>(next) / wrong : 0.0;
  };
  EXPECT_GT(next_slot_share("pipeline_neighbour"), 0.99);
  EXPECT_LT(next_slot_share("random"), 0.15);  // 1/31 expected
}

// The rate a scenario states is the rate the job sees by default: a 2,048-machine, 54-day
// job whose rate is its published interruption count (419) over machine-days sees 419 of
// them per replica. With bad machines turned on (rates their fleet mean at the start), the
// job sees fewer, and the result says so.
TEST(StatedRates, ThePublishedCountIsTheCountTheJobSeesWithTheShippedDefaults) {
  const int replicas = 20;
  json doc = job(2048, 419.0 / (2048 * 54), true);
  doc["faults"]["categories"][0]["alert"] = "gpu";
  doc["policy"] = {{"stack", "byterobust"}};
  doc["job"] = {{"tp", 8},           {"pp", 8},      {"dp", 256},
                {"step_time_s", 10}, {"init_s", 60}, {"horizon_days", 54}};
  doc["cluster"].erase("repair");
  doc["cluster"].erase("scheduler");
  doc["replicas"] = replicas;
  const json r = sim_run_json({write_scenario("stated-419", doc), "--jobs", "2"});
  EXPECT_NEAR(r["incidents"]["per_replica"].get<double>(), 419, 3 * std::sqrt(419.0 / replicas));
  EXPECT_FALSE(r["incidents"]["by_category"]["crash"]["rate_gap_flagged"].get<bool>());
  doc["cluster"]["repair"] = {{"bad_fraction", 0.15}};
  const json bad = sim_run_json({write_scenario("stated-419-bad", doc), "--jobs", "2"});
  const auto& c = bad["incidents"]["by_category"]["crash"];
  EXPECT_LT(c["realized_rate_per_machine_day"].get<double>(),
            0.99 * c["rate_per_machine_day"].get<double>());
}

// sim compare --variant: a variant runs the scenario's own stack with its overrides, paired
// with the scenario as shipped. Against sim run of the same overrides, replica by replica:
// the variant's ETTRs are that run's, a variant that changes nothing ties every replica, and
// a job of fixed work gets the paired difference of its time to train.
TEST(SimCompareVariant, AVariantIsTheScenarioWithItsOverridesPairedReplicaByReplica) {
  json doc = job(16, 0.05, false);
  doc["job"].erase("horizon_days");
  doc["job"]["work_days"] = 5;
  doc["job"]["init_s"] = 86400;  // day-long restarts: on the wall clock they meet faults too
  doc["faults"]["clock"] = "compute";
  doc["replicas"] = 10;
  const std::string scen = write_scenario("variant", doc);
  const auto dir = scratch_dir("variant");
  std::filesystem::remove_all(dir);
  CliResult r = run_cli({"sim", "compare", scen, "--variant", "wall:faults.clock=wall", "--variant",
                         "same:faults.rate_scale=1", "--jobs", "2", "--quiet", "--format", "json",
                         "--out", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["stacks"].size(), 3u);
  EXPECT_EQ(j["baseline"], "reschedule");  // the scenario's own stack
  EXPECT_EQ(j["stacks"][1]["label"], "wall");
  EXPECT_EQ(j["stacks"][2]["vs_baseline"]["ties"].get<double>(), 1.0);
  EXPECT_GT(j["stacks"][1]["vs_baseline"]["time_to_train_days"]["mean"].get<double>(), 0.0);
  EXPECT_LT(j["stacks"][1]["vs_baseline"]["mean"].get<double>(), 0.0);
  const json wall = run_out(scen, (dir / "run-wall").string(), {"--set", "faults.clock=wall"});
  EXPECT_EQ(column((dir / "wall" / "replicas.csv").string(), "ettr").xs,
            column((dir / "run-wall" / "replicas.csv").string(), "ettr").xs);
  CliResult bad = run_cli({"sim", "compare", scen, "--variant", "nolabel"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--variant: expected LABEL:PATH=VALUE"), std::string::npos) << bad.err;
  CliResult twice = run_cli({"sim", "compare", scen, "--variant", "reschedule:faults.clock=wall"});
  EXPECT_EQ(twice.exit_code, 2);
}

// AIReSim's published default (arXiv 2603.07041, Table 1) as a faultline scenario: its ETR
// (62.3%), failures per replication (11,146) and the time to train its ETR implies.
TEST(AireSim, ThePublishedDefaultIsReproduced) {
  const json r =
      sim_run_json({scenarios_dir() + "/airesim-default.json", "--replicas", "6", "--jobs", "2"});
  EXPECT_NEAR(r["ettr"]["mean"].get<double>(), 0.623, 0.01);
  EXPECT_NEAR(r["incidents"]["faults_injected_per_replica"].get<double>(), 11146, 0.02 * 11146);
  EXPECT_NEAR(r["time_to_train"]["mean"].get<double>(), 256 / 0.623, 0.02 * 256 / 0.623);
  EXPECT_EQ(r["time_to_train"]["censored"].get<int>(), 0);
  EXPECT_LE(r["fleet"]["machines_used_max"].get<int>(), 4160 + 200);
}

// Migration before a predicted failure (TrainMover): one persistent GPU crash category on 32
// machines under the byterobust stack, every cost of a recovery near zero (instant standby
// wake, tests and restarts), so that the job runs whenever a warning comes. A warning 600 s
// ahead covers the copy (none: no checkpoint bytes) and the standbys' wake.
json warned_job(double probability, double rate, double false_rate, const char* recovery) {
  json doc = job(32, rate, true);
  auto& c = doc["faults"]["categories"][0];
  c["alert"] = "gpu";
  c["warning"] = {
      {"lead_time_s", 600}, {"probability", probability}, {"false_per_machine_day", false_rate}};
  // Written for the stack that migrates (the warnings are its), run under both.
  doc["policy"] = {{"stack", "byterobust"},
                   {"compared_with", json::array({"byterobust+recovery=migrate"})},
                   {"params",
                    {{"recovery", recovery},
                     {"standby_pool", 3},
                     {"inspect_gpu_s", 0.1},
                     {"checkpoint", "remote"},
                     {"checkpoint_interval_s", 1e-3},
                     {"remote_checkpoint_write_s", 0}}}};
  doc["diagnosis"] = {{"gpu_diag_s", 0}, {"standby_wake_s", 0}};
  doc["replicas"] = 40;
  return doc;
}
double migration(const json& r, const char* what) {
  return r.contains("migration") ? r["migration"][what].get<double>() : 0.0;
}

// Warned with probability 1: under `migrate` every fault finds its machine gone (left_job),
// none interrupts the job, and the job loses exactly one pause (20 s, degraded) per
// migration; `standby` ignores the warnings and takes every fault as an interruption.
TEST(Migration, EveryWarnedFaultIsAvoidedForOnePauseAndStandbyTakesEachOne) {
  const json mig =
      sim_run_json({write_scenario("mig-all", warned_job(1, 0.02, 0, "migrate")), "--jobs", "2"});
  const json sb = sim_run_json(
      {write_scenario("mig-standby", warned_job(1, 0.02, 0, "standby")), "--jobs", "2"});
  const auto& cm = mig["incidents"]["by_category"]["crash"];
  const auto& cs = sb["incidents"]["by_category"]["crash"];
  const double faults = 0.02 * 32 * 30;  // 19.2 per replica
  EXPECT_NEAR(cs["injected_per_replica"].get<double>(), faults, 4 * std::sqrt(faults / 40));
  EXPECT_EQ(cm["incidents_per_replica"].get<double>(), 0);
  EXPECT_NEAR(cm["outcomes"]["left_job"].get<double>(), cm["injected_per_replica"].get<double>(),
              1e-9);
  EXPECT_NEAR(cs["outcomes"]["interrupted"].get<double>(), cs["injected_per_replica"].get<double>(),
              0.1);
  // The same faults: the warned ones strike lead_time_s later, a few beyond the horizon.
  EXPECT_NEAR(cm["injected_per_replica"].get<double>(), cs["injected_per_replica"].get<double>(),
              0.1);
  EXPECT_NEAR(migration(mig, "migrations_per_replica"), cm["injected_per_replica"].get<double>(),
              0.1);
  EXPECT_EQ(migration(mig, "needless_migrations_per_replica"), 0);
  EXPECT_EQ(migration(sb, "migrations_per_replica"), 0);
  EXPECT_NEAR(mig["breakdown_s"]["degraded"].get<double>(),
              20 * migration(mig, "migrations_per_replica"), 20.0 / 40);
  EXPECT_GT(cs["incidents_per_replica"].get<double>(), 0.8 * faults);
  // Recoveries cost nothing here, so standby's interruptions lose no time and migrate's ETTR
  // loss against it is the pauses alone: faults x pause.
  EXPECT_NEAR(sb["ettr"]["mean"].get<double>() - mig["ettr"]["mean"].get<double>(),
              20 * migration(mig, "migrations_per_replica") / (30 * 86400.0), 1e-6);
}

// Warned with probability p: the unwarned faults still interrupt, (1 - p) x faults within
// a binomial confidence interval, and the warned ones leave with their machines.
TEST(Migration, WithProbabilityPTheUnwarnedShareStillInterrupts) {
  const double p = 0.4;
  const json mig =
      sim_run_json({write_scenario("mig-p", warned_job(p, 0.04, 0, "migrate")), "--jobs", "2"});
  const auto& c = mig["incidents"]["by_category"]["crash"];
  const double n = c["injected_per_replica"].get<double>() * 40;  // faults in all replicas
  ASSERT_GT(n, 1000);
  const double interrupted = c["outcomes"]["interrupted"].get<double>() * 40;
  EXPECT_NEAR(interrupted, (1 - p) * n, 4 * std::sqrt(n * p * (1 - p)));
  EXPECT_NEAR(c["outcomes"]["left_job"].get<double>() * 40, p * n, 4 * std::sqrt(n * p * (1 - p)));
  EXPECT_NEAR(migration(mig, "warnings_per_replica") * 40, p * n, 4 * std::sqrt(n * p * (1 - p)));
}

// False warnings only (a category that never fails): each migrates a healthy machine, a
// false eviction and a needless migration, and costs exactly one pause; the stream is the
// same whatever the stack does, at false_per_machine_day x machines x days.
TEST(Migration, FalseWarningsCostExactlyOnePauseEach) {
  const json mig =
      sim_run_json({write_scenario("mig-false", warned_job(0, 0, 0.05, "migrate")), "--jobs", "2"});
  const json sb = sim_run_json(
      {write_scenario("mig-false-sb", warned_job(0, 0, 0.05, "standby")), "--jobs", "2"});
  const double want = 0.05 * 32 * 30;  // 48 per replica
  const double warned = migration(mig, "false_warnings_per_replica");
  EXPECT_NEAR(warned, want, 4 * std::sqrt(want / 40));
  EXPECT_EQ(warned, migration(sb, "false_warnings_per_replica"));  // the stack's choice aside
  EXPECT_EQ(migration(mig, "warnings_per_replica"), warned);
  EXPECT_EQ(migration(mig, "needless_migrations_per_replica"), warned);
  EXPECT_EQ(mig["evictions"]["false_per_replica"].get<double>(), warned);
  EXPECT_NEAR(mig["breakdown_s"]["degraded"].get<double>(), 20 * warned, 20.0 / 40);
  EXPECT_EQ(mig["incidents"]["per_replica"].get<double>(), 0);
  // Against the stack that ignores them: the ETTR lost is the pauses.
  EXPECT_NEAR(sb["ettr"]["mean"].get<double>() - mig["ettr"]["mean"].get<double>(),
              20 * warned / (30 * 86400.0), 1e-6);
}

// Code updates (symptom "manual") under byterobust: a job of 16 machines that meets only
// them, `updates_per_day` of them, for a day.
json updating_job(double updates_per_day) {
  json doc = job(16, 0, false);
  doc["replicas"] = 2;
  doc["job"]["horizon_days"] = 1;
  doc["faults"]["categories"] = json::array({{{"name", "code_update"},
                                              {"class", "manual"},
                                              {"rate_per_job_day", updates_per_day},
                                              {"scope", "job"},
                                              {"symptom", "manual"}}});
  doc["policy"] = {{"stack", "byterobust"}, {"params", json::object()}};
  return doc;
}

// The versions a decision log's update requests name, by replica, in order.
std::map<int, std::vector<int>> requested_versions(const std::string& decisions_log) {
  std::map<int, std::vector<int>> out;
  std::ifstream in(decisions_log);
  const std::regex re(R"(^replica (\d+) .* event code update requested v(\d+))");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, re)) out[std::stoi(m[1])].push_back(std::stoi(m[2]));
  return out;
}

// The simulator's code updates count by one: v1, v2, v3 in every replica. They counted
// v1, v3, v5: a request and the hot update that applied it each took a version.
TEST(CodeUpdates, VersionsCountByOne) {
  const auto out = scratch_dir("code-update-versions");
  std::filesystem::remove_all(out);
  sim_run_json({write_scenario("code-updates", updating_job(12)), "--jobs", "1", "--out",
                out.string(), "--decisions"});
  const auto versions = requested_versions((out / "decisions.log").string());
  ASSERT_EQ(versions.size(), 2u);
  for (const auto& [replica, vs] : versions) {
    SCOPED_TRACE("replica " + std::to_string(replica));
    ASSERT_GE(vs.size(), 3u);
    for (std::size_t i = 0; i < vs.size(); ++i) EXPECT_EQ(vs[i], static_cast<int>(i) + 1);
  }
  std::filesystem::remove_all(out);
}

// A share `non_urgent` of the updates is not urgent, drawn per update and the same for the
// same seed: a job of 20 replicas meets 240 updates, about that share of them not urgent.
TEST(CodeUpdates, ANonUrgentShareIsDrawnPerUpdate) {
  json doc = updating_job(12);
  doc["replicas"] = 20;
  doc["faults"]["categories"][0]["non_urgent"] = 0.25;
  const auto out = scratch_dir("code-update-urgency");
  std::filesystem::remove_all(out);
  const std::string scen = write_scenario("code-updates-urgency", doc);
  sim_run_json({scen, "--jobs", "2", "--out", out.string(), "--decisions"});
  std::ifstream in(out / "decisions.log");
  double requests = 0, urgent = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("event code update requested") == std::string::npos) continue;
    ++requests;
    urgent += line.find("(urgent)") != std::string::npos;
  }
  ASSERT_GT(requests, 150);
  const double p = 0.25;
  EXPECT_NEAR((requests - urgent) / requests, p, 4 * std::sqrt(p * (1 - p) / requests));
  const json again = sim_run_json({scen, "--jobs", "1"});
  EXPECT_EQ(again["ettr"], sim_run_json({scen, "--jobs", "2"})["ettr"]);
  std::filesystem::remove_all(out);
}

// With non-urgent updates, byterobust's defer_non_urgent and deferral_window_h change the
// result: a day of updates held for 24 h costs no restart, held for 1 h or applied at once
// it does. With urgent ones only (the default) neither parameter changes anything.
TEST(CodeUpdates, DeferralParametersChangeTheResultOnlyWithNonUrgentUpdates) {
  auto ettr = [](double non_urgent, const std::vector<std::string>& sets) {
    json doc = updating_job(12);
    doc["faults"]["categories"][0]["non_urgent"] = non_urgent;
    std::vector<std::string> args = {write_scenario("code-updates-deferral", doc), "--jobs", "1"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", "policy.params." + s});
    return sim_run_json(args)["ettr"]["mean"].get<double>();
  };
  const double held = ettr(1, {});  // never forced within the day
  EXPECT_LT(ettr(1, {"deferral_window_h=1"}), held);
  EXPECT_LT(ettr(1, {"defer_non_urgent=0"}), held);
  const double urgent = ettr(0, {});
  EXPECT_LT(urgent, held);
  EXPECT_EQ(ettr(0, {"defer_non_urgent=0"}), urgent);
  EXPECT_EQ(ettr(0, {"deferral_window_h=1"}), urgent);
}

}  // namespace
}  // namespace faultline::testing
