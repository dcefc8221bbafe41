#include "kernels/evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace faultline::kernels {
namespace {

const ThresholdTable& table() {
  static const ThresholdTable t = ThresholdTable::load(FAULTLINE_THRESHOLDS_FILE);
  return t;
}

ProbeOptions options_for(ProbeKind kind) {
  ProbeOptions o;
  o.probe = kind;
  return o;
}

ProbeReport evaluated(ProbeKind kind, std::map<std::string, double> metrics,
                      const std::string& device = "NVIDIA H100 80GB HBM3",
                      const ProbeOptions* options = nullptr) {
  ProbeReport r;
  r.probe = std::string(probe_name(kind));
  r.metrics = std::move(metrics);
  const ProbeOptions o = options != nullptr ? *options : options_for(kind);
  evaluate_report(r, table().lookup(device), o);
  return r;
}

const Check* find_check(const ProbeReport& r, const std::string& name) {
  auto it = std::find_if(r.checks.begin(), r.checks.end(),
                         [&](const Check& c) { return c.name == name; });
  return it == r.checks.end() ? nullptr : &*it;
}

bool has_note_containing(const ProbeReport& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(Evaluation, HbmBandwidthAgainstH100Spec) {
  // 3350 GB/s * 0.82 = 2747 GB/s (healthy H100 SXM are published at ~0.87 of spec).
  auto pass = evaluated(ProbeKind::kHbm, {{"hbm_bandwidth_gbps", 2800}, {"hbm_bit_errors", 0}});
  EXPECT_EQ(pass.verdict, Verdict::kPass);
  EXPECT_DOUBLE_EQ(pass.thresholds.at("hbm_bandwidth_gbps_min"), 2747);
  auto slow = evaluated(ProbeKind::kHbm, {{"hbm_bandwidth_gbps", 2700}, {"hbm_bit_errors", 0}});
  EXPECT_EQ(slow.verdict, Verdict::kFail);
  EXPECT_FALSE(find_check(slow, "hbm.bandwidth")->passed);
  EXPECT_TRUE(has_note_containing(slow, "hbm.bandwidth failed"));
}

TEST(Evaluation, HbmBandwidthAgainstH200Spec) {
  // 4800 GB/s * 0.85 = 4080 GB/s: an H100-class number fails on an H200.
  auto r = evaluated(ProbeKind::kHbm, {{"hbm_bandwidth_gbps", 4000}, {"hbm_bit_errors", 0}},
                     "NVIDIA H200");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_DOUBLE_EQ(r.thresholds.at("hbm_bandwidth_gbps_min"), 4080);
}

TEST(Evaluation, OneBitErrorFailsAnyGpu) {
  auto r =
      evaluated(ProbeKind::kHbm, {{"hbm_bandwidth_gbps", 5000}, {"hbm_bit_errors", 1}}, "Tesla T4");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_FALSE(find_check(r, "hbm.bit_errors")->passed);
}

TEST(Evaluation, UnknownModelChecksOnlyCorrectness) {
  auto r = evaluated(ProbeKind::kHbm, {{"hbm_bandwidth_gbps", 1}, {"hbm_bit_errors", 0}},
                     "Some Future GPU");
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(find_check(r, "hbm.bandwidth"), nullptr);
  EXPECT_TRUE(has_note_containing(r, "has no hbm_gbps"));
}

TEST(Evaluation, GemmBurnAgainstBaselineAndSpec) {
  std::map<std::string, double> healthy = {
      {"gemm_bf16_iterations", 1000},   {"gemm_bf16_tflops", 680},
      {"gemm_bf16_vs_baseline", 0.96},  {"gemm_bf16_mismatched_iterations", 0},
      {"gemm_bf16_digest_mismatch", 0}, {"gemm_tiled_iterations", 100},
      {"gemm_tiled_tflops", 80},        {"gemm_tiled_mismatched_iterations", 0},
      {"gemm_tiled_digest_mismatch", 0}};
  auto r = evaluated(ProbeKind::kGemm, healthy);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_DOUBLE_EQ(r.thresholds.at("gemm_bf16_vs_baseline_min"), 0.86);
  EXPECT_NEAR(r.thresholds.at("gemm_bf16_tflops_min"), 989 * 0.55, 1e-9);
  // The hand-written kernel has no spec and no baseline check.
  EXPECT_EQ(find_check(r, "gemm.tiled.tflops"), nullptr);
  EXPECT_EQ(find_check(r, "gemm.tiled.vs_baseline"), nullptr);
  EXPECT_NE(find_check(r, "gemm.tiled.checksum"), nullptr);

  auto slow = healthy;
  slow["gemm_bf16_vs_baseline"] = 0.85;
  EXPECT_EQ(evaluated(ProbeKind::kGemm, slow).verdict, Verdict::kFail);

  auto weak = healthy;
  weak["gemm_bf16_tflops"] = 500;
  EXPECT_EQ(evaluated(ProbeKind::kGemm, weak).verdict, Verdict::kFail);

  auto corrupt = healthy;
  corrupt["gemm_tiled_mismatched_iterations"] = 1;
  auto c = evaluated(ProbeKind::kGemm, corrupt);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_FALSE(find_check(c, "gemm.tiled.checksum")->passed);

  auto digest = healthy;
  digest["gemm_bf16_digest_mismatch"] = 1;
  EXPECT_EQ(evaluated(ProbeKind::kGemm, digest).verdict, Verdict::kFail);
}

// Healthy H200, 1 s burns: bf16 246 TFLOP/s and 0.35 of plain cuBLAS at n=2048, 537 and 0.75 at
// 4096, 661 and 0.94 at 16384. The limits (0.55 of the 989 TFLOP/s spec, 0.90 of the baseline)
// hold only at the size they were set for; smaller runs are judged on correctness alone.
TEST(Evaluation, GemmThroughputIsJudgedOnlyAtTheCalibratedSize) {
  std::map<std::string, double> small = {
      {"gemm_bf16_iterations", 1000},   {"gemm_bf16_tflops", 246},
      {"gemm_bf16_vs_baseline", 0.35},  {"gemm_bf16_mismatched_iterations", 0},
      {"gemm_bf16_digest_mismatch", 0}, {"gemm_bf16_size", 2048}};
  auto r = evaluated(ProbeKind::kGemm, small);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(find_check(r, "gemm.bf16.tflops"), nullptr);
  EXPECT_EQ(find_check(r, "gemm.bf16.vs_baseline"), nullptr);
  EXPECT_TRUE(has_note_containing(r, "gemm.bf16 throughput not judged: size 2048"));

  auto corrupt_small = small;
  corrupt_small["gemm_bf16_mismatched_iterations"] = 1;
  EXPECT_EQ(evaluated(ProbeKind::kGemm, corrupt_small).verdict, Verdict::kFail);

  auto big = small;
  big["gemm_bf16_size"] = 16384;
  auto b = evaluated(ProbeKind::kGemm, big);
  EXPECT_EQ(b.verdict, Verdict::kFail);
  ASSERT_NE(find_check(b, "gemm.bf16.tflops"), nullptr);
  EXPECT_FALSE(find_check(b, "gemm.bf16.tflops")->passed);
  ASSERT_NE(find_check(b, "gemm.bf16.vs_baseline"), nullptr);
  EXPECT_FALSE(find_check(b, "gemm.bf16.vs_baseline")->passed);
}

// Measured on an H100 SXM (kernels/VALIDATION.md): at n = 16384 a healthy 1 s burn reached only
// 0.896 of the same-run cuBLAS loop (fp16), within 4 points of the 0.86 limit, while every 5 s
// burn reached >= 0.926. The live agent's stop-time gpu_diag burns for a tenth of its deadline, 0.2
// s to 5 s, so judging short burns against the baseline would evict healthy GPUs.
TEST(Evaluation, GemmThroughputIsJudgedOnlyForBurnsAsLongAsTheCalibratedOnes) {
  const std::map<std::string, double> healthy_1s = {
      {"gemm_fp16_iterations", 400},    {"gemm_fp16_tflops", 630.3},
      {"gemm_fp16_vs_baseline", 0.85},  {"gemm_fp16_mismatched_iterations", 0},
      {"gemm_fp16_digest_mismatch", 0}, {"gemm_fp16_size", 16384}};
  ProbeOptions o = options_for(ProbeKind::kGemm);
  o.gemm.duration_s = 1;
  auto r = evaluated(ProbeKind::kGemm, healthy_1s, "NVIDIA H100 80GB HBM3", &o);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(find_check(r, "gemm.fp16.vs_baseline"), nullptr);
  ASSERT_NE(find_check(r, "gemm.fp16.tflops"),
            nullptr);  // 1 s burns clear the spec limit by 8+ points
  EXPECT_TRUE(has_note_containing(r, "gemm.fp16 vs_baseline not judged: a 1 s burn"));

  o.gemm.duration_s = 0.2;  // shorter than anything measured: neither throughput limit applies
  r = evaluated(ProbeKind::kGemm, healthy_1s, "NVIDIA H100 80GB HBM3", &o);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(find_check(r, "gemm.fp16.tflops"), nullptr);
  EXPECT_EQ(find_check(r, "gemm.fp16.vs_baseline"), nullptr);
  EXPECT_TRUE(has_note_containing(r, "gemm.fp16 throughput not judged: a 0.2 s burn"));
  auto corrupt = healthy_1s;
  corrupt["gemm_fp16_mismatched_iterations"] = 1;  // correctness is judged at any length
  EXPECT_EQ(evaluated(ProbeKind::kGemm, corrupt, "NVIDIA H100 80GB HBM3", &o).verdict,
            Verdict::kFail);

  o.gemm.duration_s = 5;  // the default: both limits apply
  r = evaluated(ProbeKind::kGemm, healthy_1s, "NVIDIA H100 80GB HBM3", &o);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  ASSERT_NE(find_check(r, "gemm.fp16.vs_baseline"), nullptr);
  EXPECT_FALSE(find_check(r, "gemm.fp16.vs_baseline")->passed);
}

TEST(Evaluation, NoBaselineMeansNoBaselineCheck) {
  ProbeOptions o = options_for(ProbeKind::kGemm);
  o.gemm.baseline = false;
  auto r = evaluated(ProbeKind::kGemm,
                     {{"gemm_fp16_iterations", 10},
                      {"gemm_fp16_tflops", 700},
                      {"gemm_fp16_mismatched_iterations", 0}},
                     "NVIDIA H100 80GB HBM3", &o);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(find_check(r, "gemm.fp16.vs_baseline"), nullptr);
}

TEST(Evaluation, PcieBothDirections) {
  // 64 GB/s * 0.6 = 38.4 GB/s.
  auto r = evaluated(ProbeKind::kPcie,
                     {{"pcie_h2d_gbps", 52}, {"pcie_d2h_gbps", 30}, {"pcie_data_errors", 0}});
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(find_check(r, "pcie.h2d")->passed);
  EXPECT_FALSE(find_check(r, "pcie.d2h")->passed);
  EXPECT_DOUBLE_EQ(r.thresholds.at("pcie_d2h_gbps_min"), 38.4);
}

TEST(Evaluation, P2pNeedsNvlinkSpecForBandwidth) {
  auto r = evaluated(
      ProbeKind::kP2p,
      {{"p2p_min_gbps", 20}, {"p2p_data_errors", 0}, {"p2p_pairs_without_peer_access", 2}},
      "NVIDIA H100 PCIe");
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_TRUE(has_note_containing(r, "nvlink_gbps"));
  auto sxm = evaluated(
      ProbeKind::kP2p,
      {{"p2p_min_gbps", 380}, {"p2p_data_errors", 0}, {"p2p_pairs_without_peer_access", 1}});
  EXPECT_EQ(sxm.verdict, Verdict::kFail);  // an NVLink pair without peer access
  EXPECT_FALSE(find_check(sxm, "p2p.peer_access")->passed);
  EXPECT_TRUE(find_check(sxm, "p2p.bandwidth")->passed);  // 380 >= 450 * 0.7
}

TEST(Evaluation, SkipIsKeptWhenNothingFailed) {
  ProbeReport r;
  r.probe = "p2p";
  r.verdict = Verdict::kSkip;
  r.metrics["p2p_gpus"] = 1;
  evaluate_report(r, table().lookup("NVIDIA H100 80GB HBM3"), options_for(ProbeKind::kP2p));
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(exit_code_for(r.verdict), 0);
}

TEST(Evaluation, NcclBusBandwidthLimit) {
  const auto& h100 = table().lookup("NVIDIA H100 80GB HBM3");
  ProbeOptions o = options_for(ProbeKind::kNccl);
  EXPECT_DOUBLE_EQ(nccl_busbw_limit(h100, o, 8, true), 450 * 0.7);
  EXPECT_DOUBLE_EQ(nccl_busbw_limit(h100, o, 2, true), 0);    // spec is for a full node
  EXPECT_DOUBLE_EQ(nccl_busbw_limit(h100, o, 16, false), 0);  // across machines: needs --min-busbw
  o.nccl.min_busbw_gbps = 40;
  EXPECT_DOUBLE_EQ(nccl_busbw_limit(h100, o, 16, false), 40);

  auto r = evaluated(ProbeKind::kNccl, {{"nccl_ranks", 8},
                                        {"nccl_local_mode", 1},
                                        {"nccl_data_errors", 0},
                                        {"nccl_all_reduce_busbw_gbps", 420},
                                        {"nccl_all_gather_busbw_gbps", 300},
                                        {"nccl_all_to_all_busbw_gbps", 350}});
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_FALSE(find_check(r, "nccl.all_gather.busbw")->passed);
  EXPECT_TRUE(find_check(r, "nccl.all_reduce.busbw")->passed);

  auto unchecked = evaluated(ProbeKind::kNccl, {{"nccl_ranks", 2},
                                                {"nccl_local_mode", 0},
                                                {"nccl_data_errors", 0},
                                                {"nccl_all_reduce_busbw_gbps", 1}});
  EXPECT_EQ(unchecked.verdict, Verdict::kPass);
  EXPECT_TRUE(has_note_containing(unchecked, "--min-busbw"));
  auto corrupt = evaluated(ProbeKind::kNccl, {{"nccl_ranks", 2}, {"nccl_data_errors", 3}});
  EXPECT_EQ(corrupt.verdict, Verdict::kFail);
}

TEST(Evaluation, EnvHealth) {
  std::map<std::string, double> healthy = {{"env_ecc_uncorrected_volatile", 0},
                                           {"env_retired_pages_pending", 0},
                                           {"env_remapped_rows_pending", 0},
                                           {"env_remapped_rows_failure", 0},
                                           {"env_temperature_c", 45}};
  EXPECT_EQ(evaluated(ProbeKind::kEnv, healthy).verdict, Verdict::kPass);
  for (const auto& [metric, bad] :
       std::map<std::string, double>{{"env_ecc_uncorrected_volatile", 2},
                                     {"env_retired_pages_pending", 1},
                                     {"env_remapped_rows_pending", 1},
                                     {"env_remapped_rows_failure", 1},
                                     {"env_temperature_c", 91}}) {
    auto m = healthy;
    m[metric] = bad;
    EXPECT_EQ(evaluated(ProbeKind::kEnv, m).verdict, Verdict::kFail) << metric;
  }
  // NVML absent: nothing to check, not an error.
  EXPECT_EQ(evaluated(ProbeKind::kEnv, {{"env_nvml_available", 0}}).verdict, Verdict::kPass);
}

TEST(Evaluation, DecidedVerdictsAreNotReEvaluated) {
  ProbeReport r;
  r.probe = "hbm";
  r.verdict = Verdict::kNoGpu;
  r.metrics["hbm_bit_errors"] = 5;
  evaluate_report(r, table().lookup(""), options_for(ProbeKind::kHbm));
  EXPECT_EQ(r.verdict, Verdict::kNoGpu);
  EXPECT_TRUE(r.checks.empty());
}

}  // namespace
}  // namespace faultline::kernels
