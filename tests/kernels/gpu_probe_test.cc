// GPU tests (label gpu): run each probe of the built faultline-probe for real. They skip when the
// CUDA runtime answers error 35 (insufficient driver) or 100 (no device), or when the program was
// built without CUDA. What they hold the probes to:
//   - the GEMM burn, checksums included, reaches >= 90% of the plain cuBLAS TFLOP/s measured in
//     the same run;
//   - HBM bandwidth reaches >= 85% of the model's spec;
//   - every injected bit flip is caught, in every probe that moves data;
//   - 20 healthy runs raise no false alarm.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "run_program.h"
#ifdef FAULTLINE_TESTS_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace faultline::kernels {
namespace {

using testing::probe_binary;
using testing::ProgramRun;
using testing::run_program;

#ifdef FAULTLINE_TESTS_HAVE_CUDA
#define SKIP_WITHOUT_GPU()                                        \
  do {                                                            \
    const GpuPresence presence = cuda_gpu_presence();             \
    if (is_no_gpu_error(presence.error) || presence.count == 0) { \
      GTEST_SKIP() << "no GPU: " << presence.description;         \
    }                                                             \
  } while (0)
int gpu_count() { return cuda_gpu_presence().count; }
#else
#define SKIP_WITHOUT_GPU() GTEST_SKIP() << "faultline-probe was built without CUDA"
int gpu_count() { return 0; }
#endif

struct Probe {
  ProgramRun run;
  nlohmann::json report;
};

Probe probe(std::vector<std::string> args, double timeout_s = 600) {
  Probe p;
  p.run = run_program(probe_binary(), args, {}, timeout_s);
  EXPECT_FALSE(p.run.timed_out);
  try {
    p.report = nlohmann::json::parse(p.run.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "no JSON report: " << e.what() << "\nstdout: " << p.run.out
                  << "\nstderr: " << p.run.err;
  }
  if (p.report.is_object()) {
    EXPECT_EQ(p.report["exit_code"].get<int>(), p.run.exit_code);
  }
  return p;
}

double metric(const Probe& p, const std::string& name) {
  const auto& m = p.report["metrics"];
  if (!m.contains(name) || m[name].is_null()) {
    ADD_FAILURE() << "metric " << name << " missing in " << p.run.out;
    return -1;
  }
  return m[name].get<double>();
}

std::string verdict(const Probe& p) {
  return p.report.is_object() ? p.report["verdict"].get<std::string>() : "none";
}

#ifdef FAULTLINE_TESTS_HAVE_CUDA
// cuBLAS is opened by the GEMM probe when it runs, not at start-up (loading it costs every
// process linking the probes about half a second): this program links them and ran none.
TEST(ProbeLibraries, CublasIsNotLoadedUntilAGemmProbeRuns) {
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps) << "cannot read /proc/self/maps";
  std::string line;
  while (std::getline(maps, line)) {
    EXPECT_EQ(line.find("libcublas"), std::string::npos) << line;
  }
}
#endif

TEST(GpuGemm, BurnKeepsUpWithTheSameRunBaseline) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"gemm", "--paths", "bf16,fp16,tf32", "--duration", "10"});
  EXPECT_EQ(verdict(p), "pass") << p.run.out;
  for (const char* path : {"bf16", "fp16", "tf32"}) {
    const std::string prefix = std::string("gemm_") + path + "_";
    const double ratio = metric(p, prefix + "vs_baseline");
    EXPECT_GE(ratio, 0.90) << path;
    EXPECT_EQ(metric(p, prefix + "mismatched_iterations"), 0) << path;
    EXPECT_EQ(metric(p, prefix + "digest_mismatch"), 0) << path;
    std::cout << "[gemm] " << path << ": " << metric(p, prefix + "tflops") << " TFLOP/s burn, "
              << metric(p, prefix + "baseline_tflops") << " baseline, ratio " << ratio
              << ", max |err|/tol " << metric(p, prefix + "max_error_to_tolerance") << "\n";
  }
}

TEST(GpuGemm, TiledKernelIsCorrect) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"gemm", "--paths", "tiled", "--duration", "3", "--size", "4096"});
  EXPECT_EQ(verdict(p), "pass") << p.run.out;
  EXPECT_EQ(metric(p, "gemm_tiled_mismatched_iterations"), 0);
  EXPECT_EQ(metric(p, "gemm_tiled_digest_mismatch"), 0);
  EXPECT_GT(metric(p, "gemm_tiled_tflops"), 0);
}

TEST(GpuGemm, DigestIsTheSameOnEveryPath) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"gemm", "--duration", "0.5", "--size", "1024", "--no-baseline"});
  ASSERT_TRUE(p.report["details"].contains("digests"));
  const auto reference = p.report["details"]["digest_reference"];
  for (const auto& [path, digest] : p.report["details"]["digests"].items()) {
    EXPECT_EQ(digest, reference) << path;
  }
  // The digest a GPU produced must be accepted as the expectation on (any) healthy GPU.
  const Probe again = probe({"gemm", "--duration", "0.5", "--size", "1024", "--no-baseline",
                             "--expect-digest", reference.get<std::string>()});
  EXPECT_EQ(verdict(again), "pass") << again.run.out;
}

TEST(GpuHbm, BandwidthReachesEightyFivePercentOfSpec) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"hbm", "--fraction", "0.5"});
  EXPECT_EQ(metric(p, "hbm_bit_errors"), 0);
  const auto& thresholds = p.report["thresholds"];
  if (!thresholds.contains("hbm_bandwidth_gbps_min")) {
    GTEST_SKIP() << "no HBM spec for " << p.report["device"]["name"];
  }
  const double bandwidth = metric(p, "hbm_bandwidth_gbps");
  const double limit = thresholds["hbm_bandwidth_gbps_min"].get<double>();
  std::cout << "[hbm] copy " << metric(p, "hbm_copy_gbps") << ", triad "
            << metric(p, "hbm_triad_gbps") << ", read " << metric(p, "hbm_read_gbps")
            << " GB/s; limit " << limit << "\n";
  EXPECT_GE(bandwidth, limit);
  EXPECT_EQ(verdict(p), "pass") << p.run.out;
}

void expect_every_flip_caught(const Probe& p) {
  EXPECT_EQ(verdict(p), "fail") << p.run.out;
  EXPECT_EQ(p.run.exit_code, 1);
  const double injected = metric(p, "injected_faults");
  EXPECT_GT(injected, 0);
  EXPECT_EQ(metric(p, "detected_injected_faults"), injected) << p.run.out;
}

TEST(GpuInjection, BitFlipsAreCaughtEveryTime) {
  SKIP_WITHOUT_GPU();
  expect_every_flip_caught(
      probe({"gemm", "--inject", "bitflip", "--duration", "2", "--size", "4096"}));
  expect_every_flip_caught(probe({"hbm", "--inject", "bitflip", "--fraction", "0.2"}));
  expect_every_flip_caught(probe({"pcie", "--inject", "bitflip"}));
  if (gpu_count() >= 2) {
    expect_every_flip_caught(probe({"p2p", "--inject", "bitflip"}));
    expect_every_flip_caught(probe({"nccl", "--inject", "bitflip", "--gpus", "2"}));
  }
}

TEST(GpuInjection, ThrottleIsCaught) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"gemm", "--inject", "throttle", "--paths", "bf16", "--duration", "5"});
  EXPECT_EQ(verdict(p), "fail") << p.run.out;
  EXPECT_LT(metric(p, "gemm_bf16_vs_baseline"), 0.9);
  // A 5 s burn at the default size is judged by both throughput limits.
  EXPECT_NE(p.run.out.find("\"gemm.bf16.vs_baseline\""), std::string::npos) << p.run.out;
  EXPECT_NE(p.run.out.find("\"gemm.bf16.tflops\""), std::string::npos) << p.run.out;
}

TEST(GpuInjection, TwentyHealthyRunsRaiseNoFalseAlarm) {
  SKIP_WITHOUT_GPU();
  double worst_margin = 0;
  for (int run = 0; run < 20; ++run) {
    const Probe p = probe({"gemm", "--duration", "1", "--size", "4096", "--seed",
                           std::to_string(1000 + run), "--no-baseline"});
    EXPECT_EQ(verdict(p), "pass") << "run " << run << ": " << p.run.out;
    for (const char* path : {"bf16", "fp16", "tf32", "tiled"}) {
      EXPECT_EQ(metric(p, std::string("gemm_") + path + "_mismatched_iterations"), 0);
      worst_margin = std::max(worst_margin,
                              metric(p, std::string("gemm_") + path + "_max_error_to_tolerance"));
    }
  }
  std::cout << "[gemm] worst healthy |err|/tolerance over 20 runs: " << worst_margin << "\n";
  for (int run = 0; run < 20; ++run) {
    const Probe p = probe({"hbm", "--fraction", "0.1", "--tests", "random", "--iterations", "3",
                           "--seed", std::to_string(2000 + run)});
    EXPECT_EQ(metric(p, "hbm_bit_errors"), 0) << "run " << run;
  }
}

TEST(GpuProbes, EveryProbeRuns) {
  SKIP_WITHOUT_GPU();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pcie"}, {"p2p"}, {"nccl"}, {"env"}}) {
    const Probe p = probe(args);
    const std::string v = verdict(p);
    EXPECT_TRUE(v == "pass" || v == "skip") << args[0] << ": " << p.run.out;
    EXPECT_FALSE(p.report["device"].is_null()) << args[0];
  }
}

// A GPU kernel that never finishes (the probe blocks inside the driver) is killed at the
// deadline; the GPU is usable again right after, by a fresh probe.
TEST(GpuInjection, AKernelThatNeverFinishesIsKilledAtTheDeadline) {
  SKIP_WITHOUT_GPU();
  const Probe p = probe({"gemm", "--inject", "hang-kernel", "--deadline", "8"}, 60);
  EXPECT_EQ(verdict(p), "deadline_exceeded") << p.run.out;
  EXPECT_EQ(p.run.exit_code, 4);
  EXPECT_LT(p.run.elapsed_s, 20);
  const Probe after = probe({"gemm", "--duration", "1", "--size", "4096", "--no-baseline"});
  EXPECT_EQ(verdict(after), "pass") << after.run.out;
}

TEST(GpuNccl, MissingRankBecomesDeadlineVerdict) {
  SKIP_WITHOUT_GPU();
  const std::string path = ::testing::TempDir() + "/faultline_nccl_missing_rank.id";
  std::remove(path.c_str());
  const Probe p = probe(
      {"nccl", "--rendezvous", "file:" + path, "--rank", "1", "--nranks", "2", "--deadline", "5"},
      60);
  EXPECT_EQ(verdict(p), "deadline_exceeded") << p.run.out;
  EXPECT_EQ(p.run.exit_code, 4);
  EXPECT_LT(p.run.elapsed_s, 15);
}

}  // namespace
}  // namespace faultline::kernels
