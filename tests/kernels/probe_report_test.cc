#include "kernels/probe_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace faultline::kernels {
namespace {

TEST(ProbeReport, ExitCodeIsTheVerdict) {
  EXPECT_EQ(exit_code_for(Verdict::kPass), 0);
  EXPECT_EQ(exit_code_for(Verdict::kSkip), 0);
  EXPECT_EQ(exit_code_for(Verdict::kFail), 1);
  EXPECT_EQ(exit_code_for(Verdict::kUsageError), 2);
  EXPECT_EQ(exit_code_for(Verdict::kNoGpu), 3);
  EXPECT_EQ(exit_code_for(Verdict::kDeadlineExceeded), 4);
  // An unsettled report must never look like success.
  EXPECT_EQ(exit_code_for(Verdict::kPending), 1);
}

TEST(ProbeReport, NamesRoundTrip) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kSkip, Verdict::kNoGpu,
                    Verdict::kDeadlineExceeded, Verdict::kUsageError}) {
    EXPECT_EQ(parse_verdict(verdict_name(v)), v);
  }
  EXPECT_EQ(verdict_name(Verdict::kNoGpu), "no_gpu");
  EXPECT_EQ(verdict_name(Verdict::kDeadlineExceeded), "deadline_exceeded");
  for (ProbeKind k : kAllProbes) EXPECT_EQ(parse_probe_kind(probe_name(k)), k);
  EXPECT_FALSE(parse_probe_kind("gpu-burn").has_value());
}

TEST(ProbeReport, SettlesPendingFromChecks) {
  ProbeReport r;
  r.metrics["x"] = 5;
  ASSERT_TRUE(add_check(r, "x.min", "x", Comparison::kAtLeast, 4, "x_min"));
  settle_verdict(r);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(r.thresholds.at("x_min"), 4);

  ProbeReport f;
  f.metrics["x"] = 5;
  f.metrics["errors"] = 1;
  add_check(f, "x.min", "x", Comparison::kAtLeast, 4, "x_min");
  add_check(f, "errors", "errors", Comparison::kAtMost, 0, "errors_max");
  settle_verdict(f);
  EXPECT_EQ(f.verdict, Verdict::kFail);
  EXPECT_TRUE(f.checks[0].passed);
  EXPECT_FALSE(f.checks[1].passed);
}

TEST(ProbeReport, BoundaryValuesPass) {
  ProbeReport r;
  r.metrics["bw"] = 2847.5;
  r.metrics["errors"] = 0;
  add_check(r, "bw", "bw", Comparison::kAtLeast, 2847.5, "bw_min");
  add_check(r, "errors", "errors", Comparison::kAtMost, 0, "errors_max");
  settle_verdict(r);
  EXPECT_EQ(r.verdict, Verdict::kPass);
}

TEST(ProbeReport, MissingMetricAddsNoCheck) {
  ProbeReport r;
  EXPECT_FALSE(add_check(r, "x", "x", Comparison::kAtLeast, 1, "x_min"));
  EXPECT_TRUE(r.checks.empty());
  EXPECT_TRUE(r.thresholds.empty());
}

TEST(ProbeReport, NaNNeverPasses) {
  ProbeReport r;
  r.metrics["x"] = std::numeric_limits<double>::quiet_NaN();
  add_check(r, "x.min", "x", Comparison::kAtLeast, 0, "x_min");
  add_check(r, "x.max", "x", Comparison::kAtMost, 1e9, "x_max");
  settle_verdict(r);
  EXPECT_FALSE(r.checks[0].passed);
  EXPECT_FALSE(r.checks[1].passed);
  EXPECT_EQ(r.verdict, Verdict::kFail);
}

TEST(ProbeReport, DecidedVerdictsAreKept) {
  for (Verdict v :
       {Verdict::kNoGpu, Verdict::kDeadlineExceeded, Verdict::kUsageError, Verdict::kFail}) {
    ProbeReport r;
    r.verdict = v;
    settle_verdict(r);
    EXPECT_EQ(r.verdict, v);
  }
  ProbeReport skip;
  skip.verdict = Verdict::kSkip;
  settle_verdict(skip);
  EXPECT_EQ(skip.verdict, Verdict::kSkip);
  skip.metrics["errors"] = 3;
  add_check(skip, "errors", "errors", Comparison::kAtMost, 0, "errors_max");
  settle_verdict(skip);
  EXPECT_EQ(skip.verdict, Verdict::kFail);
}

TEST(ProbeReport, JsonHasTheDocumentedShape) {
  ProbeReport r;
  r.probe = "hbm";
  r.device = DeviceDescription{};
  r.device->index = 0;
  r.device->name = "NVIDIA H100 80GB HBM3";
  r.device->cc_major = 9;
  r.metrics["hbm_bandwidth_gbps"] = 3000;
  r.notes.push_back("a note");
  add_check(r, "hbm.bandwidth", "hbm_bandwidth_gbps", Comparison::kAtLeast, 2847.5,
            "hbm_bandwidth_gbps_min");
  settle_verdict(r);
  const auto j = nlohmann::json::parse(render_report(r, false));
  for (const char* key : {"probe", "device", "metrics", "thresholds", "verdict", "notes", "checks",
                          "exit_code", "elapsed_s", "schema"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["probe"], "hbm");
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["device"]["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["device"]["compute_capability"], "9.0");
  EXPECT_DOUBLE_EQ(j["metrics"]["hbm_bandwidth_gbps"].get<double>(), 3000);
  EXPECT_DOUBLE_EQ(j["thresholds"]["hbm_bandwidth_gbps_min"].get<double>(), 2847.5);
  EXPECT_EQ(j["checks"][0]["op"], ">=");
  EXPECT_TRUE(j["checks"][0]["passed"].get<bool>());
  EXPECT_EQ(j["notes"][0], "a note");
  EXPECT_FALSE(j.contains("partial"));
  // The rendering is a single line (one document per probe on stdout).
  EXPECT_EQ(render_report(r, false).find('\n'), std::string::npos);
}

TEST(ProbeReport, NoGpuReportHasNullDevice) {
  ProbeReport r;
  r.probe = "gemm";
  r.verdict = Verdict::kNoGpu;
  const auto j = nlohmann::json::parse(render_report(r, false));
  EXPECT_TRUE(j["device"].is_null());
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_TRUE(j["metrics"].is_object());
}

TEST(ProbeReport, NonFiniteMetricsBecomeNull) {
  ProbeReport r;
  r.probe = "gemm";
  r.metrics["inf"] = std::numeric_limits<double>::infinity();
  const auto j = nlohmann::json::parse(render_report(r, false));
  EXPECT_TRUE(j["metrics"]["inf"].is_null());
  const ProbeReport back = report_from_json(j);
  EXPECT_TRUE(std::isnan(back.metrics.at("inf")));
}

TEST(ProbeReport, RoundTripsThroughJson) {
  ProbeReport r;
  r.probe = "nccl";
  r.verdict = Verdict::kDeadlineExceeded;
  r.device = DeviceDescription{};
  r.device->name = "NVIDIA H200";
  r.device->cc_major = 9;
  r.device->memory_bytes = 150000000000ull;
  r.metrics["nccl_ranks"] = 16;
  r.thresholds["t"] = 1.5;
  r.checks.push_back({"c", "nccl_ranks", Comparison::kAtMost, 20, 16, true});
  r.notes = {"one", "two"};
  r.details["stage"] = "rendezvous";
  r.elapsed_s = 1.25;
  r.deadline_s = 30;
  r.inject = "hang";
  r.partial = true;
  const ProbeReport back = report_from_json(nlohmann::json::parse(render_report(r, true)));
  EXPECT_EQ(back.probe, "nccl");
  EXPECT_EQ(back.verdict, Verdict::kDeadlineExceeded);
  ASSERT_TRUE(back.device.has_value());
  EXPECT_EQ(back.device->name, "NVIDIA H200");
  EXPECT_EQ(back.device->cc_major, 9);
  EXPECT_EQ(back.device->memory_bytes, 150000000000ull);
  EXPECT_EQ(back.metrics, r.metrics);
  EXPECT_EQ(back.thresholds, r.thresholds);
  ASSERT_EQ(back.checks.size(), 1u);
  EXPECT_EQ(back.checks[0].op, Comparison::kAtMost);
  EXPECT_EQ(back.notes, r.notes);
  EXPECT_EQ(back.details["stage"], "rendezvous");
  EXPECT_DOUBLE_EQ(back.elapsed_s, 1.25);
  EXPECT_EQ(back.inject, "hang");
  EXPECT_TRUE(back.partial);
}

TEST(ProbeReport, RejectsDocumentsOfTheWrongShape) {
  EXPECT_THROW(report_from_json(nlohmann::json::array()), std::runtime_error);
  EXPECT_THROW(report_from_json(nlohmann::json{{"probe", "gemm"}}), std::runtime_error);
  auto doc = nlohmann::json::parse(render_report(make_usage_error_report("gemm", "x"), false));
  doc["verdict"] = "mostly_fine";
  EXPECT_THROW(report_from_json(doc), std::runtime_error);
}

}  // namespace
}  // namespace faultline::kernels
