// `faultline report` end to end: pages rendered from runs, sweeps, compare and tune
// directories.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/cli.h"
#include "tests/sweep/sweep_cli_support.h"

namespace faultline::testing {
namespace {

using namespace sweep_cli;

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
