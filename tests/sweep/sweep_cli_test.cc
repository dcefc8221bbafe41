// `faultline sim sweep` end to end: each simulation runs in a child process (one SimGrid
// engine per process). `sim tune`, `analyze check` and `analyze localize`: tune_cli_test.cc;
// `report`: report_cli_test.cc; their helpers: sweep_cli_support.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/support/cli.h"
#include "tests/sweep/sweep_cli_support.h"

namespace faultline::testing {
namespace {

using namespace sweep_cli;

// The tidy CSV: one row per point, the swept keys, replicas, then mean/lo/hi of every
// metric; the first axis varies slowest; the CI brackets the mean.
TEST(SimSweep, CsvHasOneRowPerPointWithParametersThenMeanAndCi) {
  TempDir dir("sweep-shape");
  CliResult r = run_cli(
      sweep_args(kDaly, dir.str(),
                 {"--replicas", "20", "--jobs", "2", "--format", "csv", "--set",
                  "job.horizon_days=30", "--grid", "policy.params.checkpoint_interval_s=1800,3600",
                  "--grid", "cluster.scheduler.requeue_base_s=300,600,900"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, slurp(dir.path() / "sweep.csv"));
  const auto rows = read_csv(r.out);
  ASSERT_EQ(rows.size(), 7u);
  const auto& h = rows[0];
  EXPECT_EQ(h[0], "policy.params.checkpoint_interval_s");
  EXPECT_EQ(h[1], "cluster.scheduler.requeue_base_s");
  EXPECT_EQ(h[2], "replicas");
  EXPECT_EQ(h[3], "ettr_mean");
  EXPECT_EQ(h[4], "ettr_lo");
  EXPECT_EQ(h[5], "ettr_hi");
  for (const char* m : {"productive_s",
                        "detection_s",
                        "diagnosis_s",
                        "failover_s",
                        "restore_s",
                        "recompute_s",
                        "checkpoint_s",
                        "degraded_s",
                        "warmup_s",
                        "waiting_for_machines_s",
                        "missing_replicas_s",
                        "unproductive_s",
                        "incidents",
                        "faults_injected",
                        "evictions_true",
                        "evictions_false",
                        "checkpoints",
                        "gpu_hours_lost",
                        "evictions_false_positive",
                        "standby_exhaustions",
                        "remote_checkpoint_fallbacks"})
    for (const char* f : {"_mean", "_lo", "_hi"}) column(h, std::string(m) + f);
  EXPECT_EQ(h.size(), 2 + 1 + 22 * 3u);
  const std::vector<std::pair<std::string, std::string>> order = {{"1800", "300"}, {"1800", "600"},
                                                                  {"1800", "900"}, {"3600", "300"},
                                                                  {"3600", "600"}, {"3600", "900"}};
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), h.size());
    EXPECT_EQ(row[0], order[i].first);
    EXPECT_EQ(row[1], order[i].second);
    EXPECT_EQ(row[2], "20");
    const double mean = std::stod(row[3]), lo = std::stod(row[4]), hi = std::stod(row[5]);
    EXPECT_LT(lo, mean);
    EXPECT_LT(mean, hi);
    EXPECT_GT(mean, 0.5);
  }
  // A longer restart costs ETTR at every interval (same fault histories at every point).
  EXPECT_GT(std::stod(rows[1][3]), std::stod(rows[2][3]));
  EXPECT_GT(std::stod(rows[2][3]), std::stod(rows[3][3]));
  // The JSON has the same points, in the same order.
  const json j = json::parse(slurp(dir.path() / "sweep.json"));
  ASSERT_EQ(j["points"].size(), 6u);
  EXPECT_EQ(j["points"][3]["params"]["policy.params.checkpoint_interval_s"], 3600);
  EXPECT_EQ(j["points"][3]["metrics"]["ettr"]["mean"].get<double>(), std::stod(rows[4][3]));
}

// Common random numbers: two points that differ only in a parameter with no effect
// (the requeue stack never reschedules: --allow-unused, as such a sweep is refused
// otherwise) give identical results, and fault arrivals do not depend on the checkpoint
// interval.
TEST(SimSweep, CommonRandomNumbersAcrossPoints) {
  TempDir dir("sweep-crn");
  CliResult r =
      run_cli(sweep_args(kDense, dir.str(),
                         {"--replicas", "12", "--jobs", "2", "--format", "csv", "--grid",
                          "cluster.scheduler.reschedule_base_s=120,999", "--grid",
                          "policy.params.checkpoint_interval_s=600,1800", "--allow-unused"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_csv(r.out);
  ASSERT_EQ(rows.size(), 5u);
  // Rows 1,2 (reschedule 120) and 3,4 (reschedule 999): everything but the key equal.
  for (int i : {1, 2})
    for (size_t c = 1; c < rows[0].size(); ++c) EXPECT_EQ(rows[i][c], rows[i + 2][c]) << rows[0][c];
  const size_t inj = column(rows[0], "faults_injected_mean");
  EXPECT_EQ(rows[1][inj], rows[2][inj]);
  EXPECT_NE(rows[1][column(rows[0], "ettr_mean")], rows[2][column(rows[0], "ettr_mean")]);
}

// A sweep point is exactly `sim run` with the same --set: same seeds, same replicas.
TEST(SimSweep, PointEqualsSimRunWithTheSameSets) {
  TempDir dir("sweep-vs-run");
  CliResult s = run_cli(sweep_args(kDense, dir.str(),
                                   {"--replicas", "9", "--jobs", "2", "--format", "json", "--grid",
                                    "policy.params.checkpoint_interval_s=900"}));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  CliResult run =
      run_cli({"sim", "run", kDense, "--replicas", "9", "--jobs", "2", "--format", "json", "--set",
               "policy.stack=requeue", "--set", "policy.params.checkpoint_interval_s=900"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json a = json::parse(run.out);
  a.erase("wall_s");
  const json sw = json::parse(s.out);
  json b = json::parse(slurp(dir.path() / sw["points"][0]["result"].get<std::string>()));
  for (const char* k : {"sweep_point", "metrics", "per_replica"}) b.erase(k);
  EXPECT_EQ(a.dump(), b.dump());
}

// The same CSV whatever --jobs (work items split differently) and whether some
// replicas were computed earlier by a --work run (how MPI ranks contribute).
TEST(SimSweep, ResultIndependentOfJobsAndOfHowReplicasWereSplit) {
  TempDir a("sweep-jobs1"), b("sweep-jobs3"), c("sweep-partial");
  const std::vector<std::string> grid{"--replicas", "10",
                                      "--format",   "csv",
                                      "--grid",     "policy.params.checkpoint_interval_s=600,1800"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> v = grid;
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  };
  CliResult r1 = run_cli(sweep_args(kDense, a.str(), with({"--jobs", "1"})));
  CliResult r3 = run_cli(sweep_args(kDense, b.str(), with({"--jobs", "3"})));
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_EQ(r1.out, r3.out);
  // Replicas 3..6 of point 1 first, alone, then the rest.
  CliResult w = run_cli(sweep_args(kDense, c.str(), with({"--work", "1:3:7"})));
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_TRUE(w.out.empty());
  CliResult plan = run_cli(sweep_args(kDense, c.str(), with({"--plan"})));
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const json p = json::parse(plan.out);
  EXPECT_EQ(p["points"][1]["pending"], json::parse("[[0,3],[7,10]]"));
  EXPECT_EQ(p["points"][0]["pending"], json::parse("[[0,10]]"));
  CliResult rc = run_cli(sweep_args(kDense, c.str(), with({"--jobs", "2"})));
  ASSERT_EQ(rc.exit_code, 0) << rc.err;
  EXPECT_EQ(r1.out, rc.out);
}

// Resume: a rerun with the same --out does not recompute finished points (a doctored
// stored result shows through), computes only what is new, and a deleted point is
// computed again.
TEST(SimSweep, ResumeSkipsPointsAlreadyDone) {
  TempDir dir("sweep-resume");
  const std::vector<std::string> base{"--replicas", "15",  "--jobs", "2",
                                      "--format",   "csv", "--set",  "job.horizon_days=20"};
  auto args = [&](const std::string& values) {
    std::vector<std::string> v = base;
    v.push_back("--grid");
    v.push_back("policy.params.checkpoint_interval_s=" + values);
    return sweep_args(kDaly, dir.str(), v);
  };
  CliResult first = run_cli(args("1200,2400"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const json sweep = json::parse(slurp(dir.path() / "sweep.json"));
  const fs::path p0 = dir.path() / sweep["points"][0]["result"].get<std::string>();
  const fs::path p1 = dir.path() / sweep["points"][1]["result"].get<std::string>();
  json doctored = json::parse(slurp(p0));
  doctored["metrics"]["ettr"]["mean"] = 0.125;
  std::ofstream(p0) << doctored.dump();
  fs::remove(p1);
  CliResult second = run_cli(args("1200,2400,3600"));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto r1 = read_csv(first.out), r2 = read_csv(second.out);
  ASSERT_EQ(r2.size(), 4u);
  EXPECT_EQ(r2[1][column(r2[0], "ettr_mean")], "0.125");  // not recomputed
  EXPECT_EQ(r2[2], r1[2]);                                // recomputed, identical
  EXPECT_TRUE(fs::exists(p1));
  EXPECT_EQ(r2[3][0], "3600");
}

// A point's chunks left by an interrupted sweep are read back on resume: one from an earlier
// build (chunk format 1) or cut short is refused in one line naming the file, not read.
TEST(SimSweep, AChunkItCannotReadIsRefusedNamingTheFile) {
  TempDir dir("sweep-chunk");
  const auto args =
      sweep_args(kDaly, dir.str(),
                 {"--replicas", "6", "--jobs", "2", "--format", "csv", "--set",
                  "job.horizon_days=20", "--grid", "policy.params.checkpoint_interval_s=1200"});
  CliResult first = run_cli(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const json sweep = json::parse(slurp(dir.path() / "sweep.json"));
  const fs::path result = dir.path() / sweep["points"][0]["result"].get<std::string>();
  const fs::path chunk = result.parent_path() / "chunk-0-6.bin";
  // One record: replica 0, three bytes that are no result.
  const std::string record("\0\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0abc", 19);
  for (const auto& [magic, expected] :
       {std::pair<std::string, std::string>{"FLCHUNK1",
                                            "a chunk of format 1, this build reads format 3"},
        {"FLCHUNK2", "a chunk of format 2, this build reads format 3"},
        {"FLCHUNK3", "replica 0: replica result: truncated or not written by this build"}}) {
    fs::remove(result);
    std::ofstream(chunk, std::ios::binary) << magic << record;
    CliResult r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << magic;
    EXPECT_NE(r.err.find(chunk.string() + ": " + expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(SimSweep, BadInputIsAUsageErrorNamingThePoint) {
  TempDir dir("sweep-bad");
  for (std::vector<std::string> extra :
       std::vector<std::vector<std::string>>{{"--grid", "job.pp"},
                                             {"--grid", "job.pp=1,,2"},
                                             {"--zip", "job.pp=1,2", "--zip", "job.dp=1"},
                                             {"--grid", "job.pp=1", "--grid", "job.pp=2"},
                                             {"--bogus"},
                                             {"--jobs", "0"}}) {
    CliResult r = run_cli(sweep_args(kDaly, dir.str(), extra));
    EXPECT_EQ(r.exit_code, 2) << extra[0] << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  CliResult r = run_cli(sweep_args(kDaly, dir.str(), {"--grid", "job.horizon_days=30,-1"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("sweep point job.horizon_days=-1"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"sim", "sweep", "--help"}).exit_code, 0);
}

// A sweep over a parameter the stack does not read with its module choices (the default
// stack checkpoints every step to a peer: no interval) is refused, naming the parameter, the
// stack and when it would be read; with --allow-unused it runs, every point says so, and the
// rows are identical (what the refusal spares a researcher).
TEST(SimSweep, AParameterTheStackDoesNotReadIsRefusedUnlessAllowed) {
  TempDir dir("sweep-unread");
  const std::vector<std::string> grid = {
      "--grid",     "policy.params.checkpoint_interval_s=600,1800",
      "--replicas", "4",
      "--set",      "job.horizon_days=10"};
  std::vector<std::string> a{"sim", "sweep", kDense, "--out", dir.str(), "--quiet"};
  a.insert(a.end(), grid.begin(), grid.end());
  CliResult r = run_cli(a);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* want : {"checkpoint_interval_s", "stack 'byterobust' does not read it",
                           "checkpoint=memory or checkpoint=remote",
                           "this scenario has checkpoint=peer", "--allow-unused"})
    EXPECT_NE(r.err.find(want), std::string::npos) << want << ": " << r.err;
  // The same through sim run, and through the tune command.
  CliResult run =
      run_cli({"sim", "run", kDense, "--set", "policy.params.checkpoint_interval_s=600"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  CliResult tune =
      run_cli({"sim", "tune", kDense, "--param", "policy.params.checkpoint_interval_s=300:3600",
               "--replicas", "2", "--quiet"});
  EXPECT_NE(tune.exit_code, 0);
  EXPECT_NE(tune.err.find("does not read it"), std::string::npos) << tune.err;

  a.push_back("--allow-unused");
  r = run_cli(a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(slurp(dir.path() / "sweep.json"));
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][0]["metrics"]["ettr"]["mean"], j["points"][1]["metrics"]["ettr"]["mean"]);
  for (const auto& p : j["points"]) {
    const json point = json::parse(slurp(dir.path() / p["result"].get<std::string>()));
    EXPECT_EQ(point["unread_params"], json({"checkpoint_interval_s"}));
  }
  // Read when the module that reads it is chosen: then the rows differ.
  a.insert(a.end(), {"--set", "policy.params.checkpoint=remote"});
  TempDir dir2("sweep-read");
  a[4] = dir2.str();
  r = run_cli(a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json k = json::parse(slurp(dir2.path() / "sweep.json"));
  EXPECT_NE(k["points"][0]["metrics"]["ettr"]["mean"], k["points"][1]["metrics"]["ettr"]["mean"]);
  EXPECT_FALSE(json::parse(slurp(dir2.path() / k["points"][0]["result"].get<std::string>()))
                   .contains("unread_params"));
}

// --baseline: every point's paired differences to the baseline point, checked against two
// independent computations: sim compare --variant of the same two points (its own
// vs_baseline: the same replicas and seeds) and the test's own, from the points' per-replica
// ETTR (mean of the differences, Student t with 11 degrees of freedom: 2.201).
TEST(SimSweep, BaselineGivesEveryPointThePairedDifferenceCompareGives) {
  TempDir dir("sweep-baseline");
  CliResult s = run_cli(sweep_args(kDense, dir.str(),
                                   {"--replicas", "12", "--jobs", "2", "--format", "json", "--grid",
                                    "policy.params.checkpoint_interval_s=600,1800,3600",
                                    "--baseline", "checkpoint_interval_s=1800"}));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const json sw = json::parse(s.out);
  ASSERT_EQ(sw["baseline"]["index"], 1);
  EXPECT_EQ(sw["baseline"]["params"]["policy.params.checkpoint_interval_s"], 1800);
  ASSERT_EQ(sw["points"].size(), 3u);
  EXPECT_FALSE(sw["points"][1].contains("vs_baseline"));  // as compare: none on the baseline
  const json& v = sw["points"][0]["vs_baseline"];

  CliResult c = run_cli({"sim", "compare", kDense, "--replicas", "12", "--jobs", "2", "--quiet",
                         "--format", "json", "--set", "policy.stack=requeue", "--set",
                         "policy.params.checkpoint_interval_s=1800", "--variant",
                         "c600:policy.params.checkpoint_interval_s=600"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const json cmp = json::parse(c.out);
  ASSERT_EQ(cmp["stacks"].size(), 2u);
  const json& cv = cmp["stacks"][1]["vs_baseline"];
  EXPECT_EQ(sw["points"][0]["ettr"]["mean"], cmp["stacks"][1]["ettr"]["mean"]);
  EXPECT_EQ(sw["points"][1]["ettr"]["mean"], cmp["stacks"][0]["ettr"]["mean"]);
  for (const char* k : {"mean", "wins", "ties", "losses"})
    EXPECT_DOUBLE_EQ(v[k].get<double>(), cv[k].get<double>()) << k;
  for (int e : {0, 1}) {
    EXPECT_DOUBLE_EQ(v["ci95"][e].get<double>(), cv["ci95"][e].get<double>());
    EXPECT_DOUBLE_EQ(v["unpaired_ci95"][e].get<double>(), cv["unpaired_ci95"][e].get<double>());
  }
  EXPECT_NE(v["mean"].get<double>(), 0.0);
  // The rest of what compare shows of a stack, per point, equal to compare's figures.
  for (const char* k :
       {"ettr", "resolved_by_per_replica", "evictions", "max_fruitless_rounds",
        "standby_exhaustions_per_replica", "remote_checkpoint_fallbacks_per_replica"})
    EXPECT_EQ(sw["points"][0][k], cmp["stacks"][1][k]) << k;

  // The test's own paired CI from result.json's per-replica values.
  auto ettr = [&](int i) {
    const json r = json::parse(slurp(dir.path() / sw["points"][i]["result"].get<std::string>()));
    return r["per_replica"]["ettr"].get<std::vector<double>>();
  };
  const auto a = ettr(0), b = ettr(1);
  ASSERT_EQ(a.size(), 12u);
  double sum = 0, ss = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] - b[i];
  const double mean = sum / 12;
  for (size_t i = 0; i < a.size(); ++i) ss += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
  const double half = 2.201 * std::sqrt(ss / 11) / std::sqrt(12.0);
  EXPECT_NEAR(v["mean"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(v["ci95"][0].get<double>(), mean - half, 1e-9);
  EXPECT_NEAR(v["ci95"][1].get<double>(), mean + half, 1e-9);
  EXPECT_NEAR(v["metrics"]["ettr"]["mean"].get<double>(), mean, 1e-12);

  // sweep.csv: the same figures; the baseline's own row is all ties, its differences 0.
  const auto rows = read_csv(slurp(dir.path() / "sweep.csv"));
  ASSERT_EQ(rows.size(), 4u);
  const auto& h = rows[0];
  EXPECT_EQ(std::stod(rows[1][column(h, "ettr_diff_mean")]), v["mean"].get<double>());
  EXPECT_EQ(std::stod(rows[1][column(h, "ettr_diff_lo")]), v["ci95"][0].get<double>());
  EXPECT_EQ(std::stod(rows[1][column(h, "wins")]), v["wins"].get<double>());
  EXPECT_EQ(std::stod(rows[2][column(h, "ettr_diff_mean")]), 0.0);
  EXPECT_EQ(std::stod(rows[2][column(h, "ties")]), 1.0);
  column(h, "unproductive_s_diff_hi");
  // The table marks the baseline and gives the others' won/tied/lost.
  CliResult t = run_cli(
      sweep_args(kDense, dir.str(),
                 {"--replicas", "12", "--grid", "policy.params.checkpoint_interval_s=600,1800,3600",
                  "--baseline", "policy.params.checkpoint_interval_s=1800.0"}));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("won/tied/lost"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("baseline"), std::string::npos) << t.out;
}

// --baseline names a point of the grid, or the sweep stops before it runs: a usage error in
// one line naming the swept fields.
TEST(SimSweep, ABaselineThatIsNoPointOfTheGridIsRefused) {
  TempDir dir("sweep-baseline-bad");
  for (const char* b :
       {"checkpoint_interval_s=999", "nosuch=1", "checkpoint_interval_s", "requeue_base_s=300"}) {
    CliResult r = run_cli(
        sweep_args(kDaly, dir.str(),
                   {"--replicas", "2", "--grid", "policy.params.checkpoint_interval_s=1800,3600",
                    "--grid", "cluster.scheduler.requeue_base_s=300,600", "--baseline", b}));
    EXPECT_EQ(r.exit_code, 2) << b << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--baseline " + std::string(b) + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("swept: policy.params.checkpoint_interval_s, "
                         "cluster.scheduler.requeue_base_s"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "sweep.csv")) << b;
  }
}

// Progress: with --progress and stderr not a terminal, lines of points and replicas done on
// stderr, never on stdout; --quiet wins; without either nothing (stderr is no terminal here).
TEST(SimSweep, ProgressGoesToStderrOnlyWhenAsked) {
  TempDir a("sweep-progress"), b("sweep-progress-quiet"), c("sweep-progress-none");
  const std::vector<std::string> grid{"--replicas", "6",
                                      "--format",   "csv",
                                      "--grid",     "policy.params.checkpoint_interval_s=600,1800"};
  auto run = [&](const TempDir& d, std::vector<std::string> extra) {
    std::vector<std::string> v{
        "sim", "sweep", kDense, "--out", d.str(), "--set", "policy.stack=requeue"};
    v.insert(v.end(), grid.begin(), grid.end());
    v.insert(v.end(), extra.begin(), extra.end());
    return run_cli(v);
  };
  CliResult p = run(a, {"--progress"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("2/2 points, 12/12 replicas"), std::string::npos) << p.err;
  EXPECT_EQ(p.out.find("replicas "), std::string::npos);
  EXPECT_EQ(p.out, slurp(a.path() / "sweep.csv"));
  CliResult q = run(b, {"--progress", "--quiet"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.err, "");
  CliResult n = run(c, {});
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(n.err, "");
  EXPECT_EQ(n.out, p.out);
}

// mpirun -n 2 gives the same bytes as the one-machine run (CSV on stdout and in DIR,
// and the JSON). Three points of 15 replicas: the ranks split inside a point.
TEST(SimSweepMpi, TwoRanksGiveByteIdenticalCsv) {
  const std::string mpiexec = FAULTLINE_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "MPI was not found by CMake";
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  TempDir one("sweep-one"), two("sweep-mpi");
  const std::vector<std::string> grid{
      "--replicas", "15",     "--format",
      "csv",        "--grid", "policy.params.checkpoint_interval_s=300,900,2700"};
  std::vector<std::string> local = sweep_args(kDense, one.str(), grid);
  local.insert(local.end(), {"--jobs", "2"});
  CliResult a = run_cli(local);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::vector<std::string> mpi{mpiexec, "--allow-run-as-root", "--oversubscribe", "-n",
                               "2",     faultline_binary()};
  for (const auto& s : sweep_args(kDense, two.str(), grid)) mpi.push_back(s);
  mpi.push_back("--mpi");
  CliResult b = run_program(mpi);
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(slurp(one.path() / "sweep.csv"), slurp(two.path() / "sweep.csv"));
  EXPECT_EQ(slurp(one.path() / "sweep.json"), slurp(two.path() / "sweep.json"));
  EXPECT_EQ(read_csv(a.out).size(), 4u);
}

}  // namespace
}  // namespace faultline::testing
