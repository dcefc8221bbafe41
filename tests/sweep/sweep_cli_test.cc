// `faultline sim sweep`, `sim tune`, `analyze check` and `report` end to end: each
// simulation runs in a child process (one SimGrid engine per process).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// CSV without quoted fields (what these tests produce) as rows of fields.
std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& line : split(text, '\n'))
    if (!line.empty()) rows.push_back(split(line, ','));
  return rows;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("faultline-test-" + name)) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Runs any program; captures stdout and stderr.
CliResult run_program(const std::vector<std::string>& argv) {
  char out_tmpl[] = "/tmp/faultline-prog-outXXXXXX";
  char err_tmpl[] = "/tmp/faultline-prog-errXXXXXX";
  const int out_fd = mkstemp(out_tmpl);
  const int err_fd = mkstemp(err_tmpl);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_tmpl);
  r.err = slurp(err_tmpl);
  close(out_fd);
  close(err_fd);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return r;
}

const std::string kDaly = scenarios_dir() + "/daly-check.json";
const std::string kDense = scenarios_dir() + "/byterobust-dense-9600.json";

std::vector<std::string> sweep_args(const std::string& scenario, const std::string& out,
                                    std::vector<std::string> extra) {
  std::vector<std::string> a{"sim", "sweep", scenario, "--out", out, "--quiet"};
  // The dense scenario runs byterobust; these sweeps vary the requeue stack's interval.
  if (scenario == kDense) a.insert(a.end(), {"--set", "policy.stack=requeue"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

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

// analyze check: Daly's closed form agrees with the simulation under its assumptions,
// and Meta's approximation's error is reported.
TEST(AnalyzeCheck, DalyAgreesWithTheSimulation) {
  CliResult r =
      run_cli({"analyze", "check", kDaly, "--replicas", "600", "--jobs", "2", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NEAR(j["daly"]["ettr"].get<double>(), 0.770912459055713, 1e-12);
  EXPECT_LT(std::fabs(j["daly"]["z"].get<double>()), 4.0) << r.out;
  EXPECT_NEAR(j["meta"]["ettr"].get<double>(), (1 - (600 + 1800) / 14400.0) / (1 + 300 / 3600.0),
              1e-12);
  EXPECT_LT(std::fabs(j["meta"]["relative_error"].get<double>()), 0.02);
  EXPECT_EQ(j["inputs"]["mtbf_s"].get<double>(), 14400);
  CliResult table = run_cli({"analyze", "check", kDaly, "--replicas", "50", "--jobs", "2"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Daly closed form"), std::string::npos);
  EXPECT_NE(table.out.find("Meta approximation"), std::string::npos);
  // Outside the model's assumptions: refused, naming what is off.
  CliResult bad = run_cli({"analyze", "check", kDense});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("job.image_bytes must be 0"), std::string::npos) << bad.err;
}

// analyze localize runs every localization module's own code. One faulty machine:
// dual-phase replay in exactly two phases with no healthy machine evicted, and
// bisection's mean rounds over every position equal the halving tree's mean leaf depth,
// d + 2 (N - 2^d) / N with d = floor(log2 N). Two faulty: the healthy machines replay
// evicts match an enumeration of every pair from Alg. 1's definition (groups x / m and
// x mod n, a candidate where a failing pair of groups meets).
TEST(AnalyzeLocalize, ReplayAndBisectionRoundsMatchIndependentCounts) {
  for (auto [machines, pp] : {std::pair{1200, 8}, std::pair{24, 4}}) {
    CliResult r =
        run_cli({"analyze", "localize", "--machines", std::to_string(machines), "--pp",
                 std::to_string(pp), "--faulty", "1,2", "--trials", "4000", "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const int m = j["replay"]["m"], n = j["replay"]["n"];
    ASSERT_EQ(m * n, machines);
    ASSERT_LE(m, n);
    const auto& one = j["cases"][0];
    EXPECT_EQ(one["sets"].get<int>(), machines);
    EXPECT_EQ(one["replay"]["rounds_max"].get<double>(), 2);
    EXPECT_EQ(one["replay"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(one["replay"]["healthy_evicted_max"].get<double>(), 0);
    const int d = static_cast<int>(std::floor(std::log2(machines)));
    const double mean_depth = d + 2.0 * (machines - (1 << d)) / machines;
    EXPECT_NEAR(one["bisection"]["rounds_mean"].get<double>(), mean_depth, 1e-9);
    EXPECT_EQ(one["bisection"]["found_all_share"].get<double>(), 1);
    EXPECT_NEAR(one["bisection"]["hours_mean"].get<double>(), mean_depth, 1e-9);  // 3600 s rounds
    // Two faulty: expected extra candidates over all pairs.
    std::vector<std::vector<char>> meet(machines / m, std::vector<char>(n, 0));
    for (int x = 0; x < machines; ++x) meet[x / m][x % n] = 1;
    double extra = 0, pairs = 0;
    for (int a = 0; a < machines; ++a)
      for (int b = a + 1; b < machines; ++b) {
        std::vector<int> hs{a / m}, vs{a % n};
        if (b / m != a / m) hs.push_back(b / m);
        if (b % n != a % n) vs.push_back(b % n);
        int c = 0;
        for (int h : hs)
          for (int v : vs) c += meet[h][v];
        extra += c - 2;
        ++pairs;
      }
    const auto& two = j["cases"][1];
    EXPECT_EQ(two["replay"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(two["bisection"]["found_all_share"].get<double>(), 1);
    // 4,000 random pairs; the extra count is 0 or 2: standard error <= 1 / sqrt(4000).
    EXPECT_NEAR(two["replay"]["healthy_evicted_mean"].get<double>(), extra / pairs,
                4 / std::sqrt(4000.0))
        << machines;
    EXPECT_LE(two["replay"]["healthy_evicted_max"].get<double>(), 2);
    EXPECT_LE(two["bisection"]["rounds_max"].get<double>(), d + 1);
    // The stress baseline: one round, a test per machine, exact.
    EXPECT_EQ(j["localizers"], json::array({"replay", "bisection", "stress", "pairwise"}));
    // Pairwise: two rounds; each suspect gets a partner of its own in round 2, so no
    // healthy machine is evicted, even when both faulty ones share a round-1 pair.
    EXPECT_EQ(two["pairwise"]["found_all_share"].get<double>(), 1);
    EXPECT_EQ(two["pairwise"]["rounds_max"].get<double>(), 2);
    EXPECT_EQ(two["pairwise"]["healthy_evicted_max"].get<double>(), 0);
    EXPECT_EQ(two["stress"]["rounds_max"].get<double>(), 1);
    EXPECT_EQ(two["stress"]["group_tests_mean"].get<double>(), machines);
    EXPECT_EQ(two["stress"]["healthy_evicted_max"].get<double>(), 0);
  }
  CliResult bad = run_cli({"analyze", "localize", "--machines", "1200", "--pp", "7"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--pp: expected an integer dividing --machines (1200)"), std::string::npos)
      << bad.err;
}

// sim tune finds Daly's optimum on the Daly scenario and the smallest value within X.
TEST(SimTune, FindsTheBestCheckpointIntervalAndTheSmallestWithin) {
  TempDir dir("tune");
  CliResult r = run_cli({"sim",
                         "tune",
                         kDaly,
                         "--param",
                         "policy.params.checkpoint_interval_s=600:6000",
                         "--replicas",
                         "120",
                         "--jobs",
                         "2",
                         "--points",
                         "5",
                         "--rounds",
                         "2",
                         "--within",
                         "0.01",
                         "--set",
                         "job.horizon_days=120",
                         "--format",
                         "json",
                         "--quiet",
                         "--out",
                         dir.str()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const double best = j["best"]["value"];
  // Daly's optimum is 2743 s and the curve is flat around it.
  EXPECT_NEAR(best, 2743, 700) << r.out;
  EXPECT_LE(j["indistinguishable_range"][0].get<double>(), best);
  EXPECT_GE(j["indistinguishable_range"][1].get<double>(), best);
  const double bound = j["best"]["mean"].get<double>() * 0.99;
  const double w = j["within"]["value"];
  EXPECT_LT(w, best);
  EXPECT_GE(j["within"]["mean"].get<double>(), bound);
  for (const auto& c : j["candidates"])
    if (c["value"].get<double>() < w) {
      EXPECT_LT(c["mean"].get<double>(), bound) << c.dump();
    }
  EXPECT_GE(j["candidates"].size(), 7u);
  // --out also keeps the tuning trace: every candidate with its round, the best per round.
  const json t = json::parse(slurp(dir.path() / "tune.json"));
  EXPECT_EQ(t["candidates"], j["candidates"]);
  ASSERT_EQ(t["rounds"].size(), 3u) << t.dump();
  EXPECT_EQ(t["rounds"][0]["values"].size(), 5u);
  size_t first_round = 0;
  for (const auto& c : t["candidates"]) first_round += c["round"].get<int>() == 0;
  EXPECT_EQ(first_round, 5u);
  EXPECT_EQ(t["rounds"].back()["best"]["value"], j["best"]["value"]);
}

// The paired 95% CI of a[i] - b[i] holds 0 (Student t; the tests below run 12 replicas).
bool paired_ci_holds_zero(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double mean = 0, ss = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += (a[i] - b[i]) / n;
  for (size_t i = 0; i < a.size(); ++i) ss += std::pow(a[i] - b[i] - mean, 2);
  EXPECT_EQ(a.size(), 12u);
  const double half = 2.201 * std::sqrt(ss / (n - 1)) / std::sqrt(n);  // t(0.975, 11)
  return mean - half <= 0 && mean + half >= 0;
}

// A parameter value as a --grid or --zip writes it: a whole number without a fraction.
std::string value_text(const json& v) {
  if (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))
    return std::to_string(static_cast<long long>(v.get<double>()));
  return v.dump();
}

// Per-replica ETTR and cost of every point of a sweep.json, by "standby_pool/interval".
std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> sweep_points(
    const fs::path& dir) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> out;
  const json sweep = json::parse(slurp(dir / "sweep.json"));
  for (const auto& p : sweep["points"]) {
    const json r = json::parse(slurp(dir / p["result"].get<std::string>()));
    const std::string key = value_text(p["params"]["policy.params.standby_pool"]) + "/" +
                            value_text(p["params"]["policy.params.checkpoint_interval_s"]);
    out[key] = {r["per_replica"]["ettr"].get<std::vector<double>>(),
                r["per_replica"]["cost"].get<std::vector<double>>()};
  }
  return out;
}

double mean_of(const std::vector<double>& xs) {
  double s = 0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

// Issue 53's done-when, small: standbys x checkpoint interval on the dense job for ETTR and
// cost. Every point of an exhaustive grid, simulated by sim sweep on the same seeds, is
// covered by a point of the front tune returns: on each objective the front point is better
// by mean, or their paired difference is not significant. With the coarse grid alone
// (--rounds 0) some grid point is not (the refinement is what finds the front).
TEST(SimTune, TheParetoFrontCoversAnExhaustiveGridOnTheSameSeeds) {
  TempDir dir("tune-pareto");
  const std::vector<std::string> common{"--replicas",
                                        "12",
                                        "--jobs",
                                        "2",
                                        "--quiet",
                                        "--out",
                                        dir.str(),
                                        "--set",
                                        "policy.params.checkpoint=memory",
                                        "--set",
                                        "costs.gpu_hour=2",
                                        "--set",
                                        "costs.spare_machine_hour=16",
                                        "--set",
                                        "job.horizon_days=30"};
  auto tune = [&](const std::string& rounds, const std::vector<std::string>& more = {}) {
    std::vector<std::string> a{"sim",
                               "tune",
                               kDense,
                               "--param",
                               "policy.params.standby_pool=0:16",
                               "--param",
                               "policy.params.checkpoint_interval_s=300:4800:log",
                               "--objective",
                               "ettr,cost",
                               "--points",
                               "5",
                               "--rounds",
                               rounds,
                               "--format",
                               "json"};
    a.insert(a.end(), common.begin(), common.end());
    a.insert(a.end(), more.begin(), more.end());
    CliResult r = run_cli(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json::object();
  };
  const json full = tune("3"), coarse = tune("0");
  ASSERT_TRUE(full.contains("front")) << full.dump();
  ASSERT_FALSE(full["front"].empty());
  EXPECT_EQ(full["objectives"][1]["goal"], "min");
  EXPECT_EQ(coarse["search"]["evaluations"], 25);
  // A budget cuts the refinement (the points come from the store: same inputs, same ids).
  const json cut = tune("3", {"--budget", "30"});
  EXPECT_EQ(cut["search"]["evaluations"], 30);
  EXPECT_EQ(cut["search"]["stopped_by"], "budget");
  // One objective over two parameters: the best point (the largest mean), no front.
  const json one = tune("0", {"--objective", "ettr"});
  EXPECT_FALSE(one.contains("front"));
  double best = 0;
  for (const auto& c : one["candidates"])
    best = std::max(best, c["objectives"]["ettr"]["mean"].get<double>());
  EXPECT_EQ(one["best"]["objectives"]["ettr"]["mean"].get<double>(), best);
  // The exhaustive grid, and the front points (a --zip sweep), from sim sweep.
  std::string standbys, intervals;
  for (int k = 0; k <= 16; ++k) standbys += (k ? "," : "") + std::to_string(k);
  std::vector<std::string> a{"sim",
                             "sweep",
                             kDense,
                             "--grid",
                             "policy.params.standby_pool=" + standbys,
                             "--grid",
                             "policy.params.checkpoint_interval_s=300,1200,4800"};
  a.insert(a.end(), common.begin(), common.end());
  CliResult grid = run_cli(a);
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  const auto grid_points = sweep_points(dir.path());
  ASSERT_EQ(grid_points.size(), 17u * 3);
  auto front_of = [&](const json& t) {
    std::string s_list, i_list;
    for (const auto& f : t["front"]) {
      s_list += (s_list.empty() ? "" : ",") + value_text(f["params"]["policy.params.standby_pool"]);
      i_list += (i_list.empty() ? "" : ",") +
                value_text(f["params"]["policy.params.checkpoint_interval_s"]);
    }
    std::vector<std::string> z{"sim",
                               "sweep",
                               kDense,
                               "--zip",
                               "policy.params.standby_pool=" + s_list,
                               "--zip",
                               "policy.params.checkpoint_interval_s=" + i_list};
    z.insert(z.end(), common.begin(), common.end());
    CliResult r = run_cli(z);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return sweep_points(dir.path());
  };
  auto uncovered = [&](const json& t) {
    const auto front = front_of(t);
    EXPECT_EQ(front.size(), t["front"].size());
    // The front's own figures are those of sim sweep on the same points.
    for (const auto& f : t["front"]) {
      const std::string key = value_text(f["params"]["policy.params.standby_pool"]) + "/" +
                              value_text(f["params"]["policy.params.checkpoint_interval_s"]);
      EXPECT_NEAR(f["objectives"]["ettr"]["mean"].get<double>(), mean_of(front.at(key).first),
                  1e-12);
      EXPECT_NEAR(f["objectives"]["cost"]["mean"].get<double>(), mean_of(front.at(key).second),
                  1e-6);
    }
    std::vector<std::string> out;
    for (const auto& [gk, g] : grid_points) {
      bool covered = false;
      for (const auto& [fk, f] : front) {
        const bool ettr =
            mean_of(f.first) >= mean_of(g.first) || paired_ci_holds_zero(f.first, g.first);
        const bool cost =
            mean_of(f.second) <= mean_of(g.second) || paired_ci_holds_zero(f.second, g.second);
        covered = covered || (ettr && cost);
      }
      if (!covered) out.push_back(gk);
    }
    return out;
  };
  const auto missed = uncovered(full);
  EXPECT_TRUE(missed.empty()) << missed.size() << " grid points not covered, the first "
                              << (missed.empty() ? "" : missed[0]);
  EXPECT_FALSE(uncovered(coarse).empty()) << "the coarse grid alone covers the exhaustive grid";
}

// Bad input to sim tune is one line naming the flag and what it expects, exit 2.
TEST(SimTune, BadInputIsOneLine) {
  const std::string p = "policy.params.standby_pool";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--param", p}, "--param: expected KEY=LO:HI[:log]"},
      {{"--param", p + "=16:0"}, "expected numbers LO < HI"},
      {{"--param", "policy.params.checkpoint_interval_s=0:3600:log"}, "a log scale needs LO > 0"},
      {{"--param", p + "=0:16:ln"}, "expected KEY=LO:HI or KEY=LO:HI:log"},
      {{"--param", p + "=0:16", "--param", p + "=0:8"}, "is given twice"},
      {{"--param", p + "=0:16", "--objective", "ettr,costs"}, "unknown metric 'costs'"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost,incidents"}, "at most two objectives"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost", "--goal", "max"},
       "--goal: expected 2 goal(s)"},
      {{"--param", p + "=0:16", "--param", "policy.params.mfu_rounds=1:9", "--within", "0.01"},
       "--within: only with one --param and one --objective"},
      {{"--param", p + "=0:16", "--param", "policy.params.mfu_rounds=1:9", "--budget", "10"},
       "--budget 10: the coarse grid alone has 25 candidates"},
      {{"--param", p + "=0:16", "--objective", "ettr,cost"}, "has no costs"},
      // A module choice takes names: an index range would tune the registration order.
      {{"--param", "policy.params.recovery=0:2"},
       "--param policy.params.recovery: expected a numeric parameter, got a module choice"},
  };
  for (const auto& [extra, want] : cases) {
    std::vector<std::string> a{"sim", "tune", kDense, "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    CliResult r = run_cli(a);
    EXPECT_EQ(r.exit_code, 2) << want;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(Report, RendersAPageWithEmbeddedFigures) {
  TempDir run("report-run"), sweep("report-sweep");
  CliResult a = run_cli({"sim", "run", kDense, "--replicas", "3", "--jobs", "2", "--quiet", "--out",
                         run.str(), "--timeline", "--incidents", "--decisions"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  CliResult b =
      run_cli(sweep_args(kDaly, sweep.str(),
                         {"--replicas", "8", "--jobs", "2", "--set", "job.horizon_days=20",
                          "--grid", "policy.params.checkpoint_interval_s=1200,2400", "--grid",
                          "cluster.scheduler.requeue_base_s=300,600"}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const fs::path html = run.path() / "report.html";
  CliResult r = run_cli({"report", run.str(), sweep.str(), "-o", html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = slurp(html);
  size_t images = 0;
  for (size_t at = 0; (at = page.find("src=\"data:image/png;base64,", at)) != std::string::npos;
       ++at)
    ++images;
  // Timeline, breakdown, sweep (two curves, heatmap, breakdown), incidents, shares.
  EXPECT_GE(images, 8u) << r.err;
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
  for (const char* title : {"Cumulative ETTR since job start", "1-hour sliding-window ETTR",
                            "Unproductive time per replica by phase", "Incidents of replica 0",
                            "Share by resolution mechanism", "Mean ETTR (%) over"})
    EXPECT_NE(page.find(title), std::string::npos) << title;
  CliResult bad = run_cli({"report", "/nonexistent", "-o", html.string()});
  EXPECT_EQ(bad.exit_code, 2);
}

// A compare and a tune directory: the headline table first (stack, ETTR [CI], paired
// difference [CI]), the cross-stack figures, the tuning trace; a directory of no kind is
// refused in one line naming it, and a broken input gives no Python traceback.
TEST(Report, TakesCompareAndTuneDirectories) {
  TempDir cmp("report-compare"), tune("report-tune");
  CliResult c =
      run_cli({"sim", "compare", kDense, "--stacks", "byterobust,requeue,reschedule", "--baseline",
               "byterobust", "--replicas", "4", "--jobs", "2", "--quiet", "--out", cmp.str()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  CliResult t =
      run_cli({"sim", "tune", kDaly, "--param", "policy.params.checkpoint_interval_s=600:6000",
               "--replicas", "6", "--jobs", "2", "--points", "4", "--rounds", "1", "--set",
               "job.horizon_days=10", "--quiet", "--out", tune.str()});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const fs::path html = cmp.path() / "report.html";
  CliResult r = run_cli({"report", cmp.str(), tune.str(), "-o", html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = slurp(html);
  const size_t headline = page.find("id=\"headline\"");
  ASSERT_NE(headline, std::string::npos);
  EXPECT_LT(headline, page.find("<figure"));
  for (const char* s :
       {"paired difference vs byterobust, pp [95% CI]", "replicas won / tied / lost",
        "<td>requeue</td>", "<td>reschedule</td>", "byterobust (baseline)",
        "ETTR distribution over replicas, per stack", "Paired ETTR difference vs byterobust",
        "Unproductive time per replica by phase, per stack",
        "Resolution time by fault category, per stack",
        "Tuning policy.params.checkpoint_interval_s", "Every evaluated candidate, by round",
        "Best value after each round"})
    EXPECT_NE(page.find(s), std::string::npos) << s;
  size_t figures = 0, captions = 0;
  for (size_t at = 0; (at = page.find("<img alt=", at)) != std::string::npos; ++at) ++figures;
  for (size_t at = 0; (at = page.find("<figcaption>", at)) != std::string::npos; ++at) ++captions;
  EXPECT_EQ(figures, 5u);
  EXPECT_EQ(captions, figures);

  CliResult none = run_cli({"report", tune.str() + "/points", "-o", html.string()});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find(tune.str() + "/points: not a result directory"), std::string::npos)
      << none.err;
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
  {
    std::ofstream f(cmp.path() / "compare.json", std::ios::trunc);
    f << "{\"stacks\": [";
  }
  CliResult broken = run_cli({"report", cmp.str(), "-o", html.string()});
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.err.find("compare.json: not valid JSON"), std::string::npos) << broken.err;
  EXPECT_EQ(broken.err.find("Traceback"), std::string::npos) << broken.err;
  EXPECT_EQ(std::count(broken.err.begin(), broken.err.end(), '\n'), 1) << broken.err;
}

// A one-axis sweep has no other swept parameters: its caption must not speak of them
// (it read "one line per setting of the other swept parameters ... points where - makes
// no difference").
TEST(Report, OneAxisSweepCaptionNamesNoOtherParameters) {
  TempDir sweep("report-sweep-1d");
  CliResult b =
      run_cli(sweep_args(kDaly, sweep.str(),
                         {"--replicas", "4", "--jobs", "2", "--set", "job.horizon_days=10",
                          "--grid", "policy.params.checkpoint_interval_s=1200,2400,3600"}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const fs::path html = sweep.path() / "report.html";
  CliResult r = run_cli({"report", sweep.str(), "-o", html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = slurp(html);
  EXPECT_EQ(page.find("where - makes"), std::string::npos);
  EXPECT_EQ(page.find("other swept parameters"), std::string::npos);
  EXPECT_NE(page.find("mean ETTR against policy.params.checkpoint_interval_s"), std::string::npos);
}

}  // namespace
}  // namespace faultline::testing
