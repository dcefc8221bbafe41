// Integration tests of the built faultline-probe program on a machine without a usable GPU: every
// probe must answer a JSON no_gpu verdict with exit code 3, quickly. CUDA_VISIBLE_DEVICES="" hides
// every GPU from the CUDA runtime (error 100), so these tests hold on GPU machines too; the
// NoGpuMachine suite runs without that override and skips where a GPU is present.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/probe_report.h"
#include "run_program.h"
#ifdef FAULTLINE_TESTS_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace faultline::kernels {
namespace {

using testing::probe_binary;
using testing::ProgramRun;
using testing::run_program;

const std::map<std::string, std::string> kHideGpus = {{"CUDA_VISIBLE_DEVICES", ""}};

nlohmann::json parse_output(const ProgramRun& run) {
  // Exactly one JSON document (one line) on stdout.
  EXPECT_FALSE(run.out.empty());
  EXPECT_EQ(run.out.find('\n'), run.out.size() - 1) << run.out;
  return nlohmann::json::parse(run.out);
}

void expect_no_gpu(const std::string& probe, const std::map<std::string, std::string>& env,
                   const std::string& label) {
  const ProgramRun run = run_program(probe_binary(), {probe}, env, 60);
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  const auto j = parse_output(run);
  EXPECT_EQ(j["probe"], probe);
  EXPECT_EQ(j["verdict"], "no_gpu");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_TRUE(j["device"].is_null());
  for (const char* key : {"metrics", "thresholds", "notes"}) EXPECT_TRUE(j.contains(key)) << key;
  // Timings are measured and reported, not asserted (CI machines vary).
  std::cout << "[timing] faultline-probe " << probe << " (" << label << "): " << run.elapsed_s
            << " s\n";
  ::testing::Test::RecordProperty("elapsed_s_" + probe, std::to_string(run.elapsed_s));
}

bool machine_has_gpu() {
#ifdef FAULTLINE_TESTS_HAVE_CUDA
  return !cuda_gpu_presence().no_gpu();
#else
  return false;
#endif
}

class EveryProbe : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryProbe, HiddenGpusMeanNoGpuVerdict) { expect_no_gpu(GetParam(), kHideGpus, "hidden"); }

TEST_P(EveryProbe, NoGpuMachineMeansNoGpuVerdict) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  expect_no_gpu(GetParam(), {}, "as is");
}

INSTANTIATE_TEST_SUITE_P(Probes, EveryProbe,
                         ::testing::Values("gemm", "hbm", "pcie", "p2p", "nccl", "env"));

// Options of work that would take long on a GPU do not delay the no_gpu answer. A rendezvous
// across processes is the exception: it runs without a GPU too (the tests below), so that a
// multi-machine probe's peers are not left waiting for a rank without one.
TEST(ProbeCli, ProbeOptionsDoNotDelayNoGpu) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"nccl", "--gpus", "8", "--iterations", "1000", "--deadline", "30"},
        std::vector<std::string>{"gemm", "--duration", "30", "--deadline", "30"}}) {
    const ProgramRun run = run_program(probe_binary(), args, kHideGpus, 60);
    EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
    EXPECT_EQ(parse_output(run)["verdict"], "no_gpu");
    EXPECT_LT(run.elapsed_s, 10.0) << args[0];
  }
}

TEST(ProbeCli, HelpListsEveryProbeAndExitsZero) {
  const ProgramRun run = run_program(probe_binary(), {"--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* probe : {"gemm", "hbm", "pcie", "p2p", "nccl", "env"}) {
    EXPECT_NE(run.out.find(std::string("  ") + probe), std::string::npos) << probe;
  }
  const ProgramRun gemm = run_program(probe_binary(), {"gemm", "--help"});
  EXPECT_EQ(gemm.exit_code, 0);
  for (const char* option : {"--paths", "--size", "--duration", "--baseline", "--no-baseline",
                             "--digest-size", "--tolerance-sigma", "--expect-digest", "--deadline",
                             "--inject", "--device", "--thresholds", "--seed"}) {
    EXPECT_NE(gemm.out.find(option), std::string::npos) << option;
  }
}

TEST(ProbeCli, UsageErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"burn"},
           {"gemm", "--bogus"},
           {"hbm", "--fraction", "2"},
           {"env", "--thresholds", "/nonexistent/thresholds.json"}}) {
    const ProgramRun run = run_program(probe_binary(), args, kHideGpus);
    EXPECT_EQ(run.exit_code, 2) << run.out;
    const auto j = parse_output(run);
    EXPECT_EQ(j["verdict"], "usage_error");
    EXPECT_FALSE(run.err.empty());
  }
}

TEST(ProbeCli, BrokenThresholdsFileIsAUsageError) {
  const std::string path = ::testing::TempDir() + "/faultline_bad_thresholds.json";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"description\": \"x\", \"surprise\": 1}", f);
  std::fclose(f);
  const ProgramRun run = run_program(probe_binary(), {"hbm", "--thresholds", path}, kHideGpus);
  std::remove(path.c_str());
  EXPECT_EQ(run.exit_code, 2);
  const auto j = parse_output(run);
  EXPECT_NE(j["notes"][0].get<std::string>().find("surprise"), std::string::npos);
}

TEST(ProbeCli, HangIsCaughtByTheDeadline) {
  for (const bool watchdog : {true, false}) {
    std::vector<std::string> args = {"hbm", "--inject", "hang", "--deadline", "1"};
    if (!watchdog) args.push_back("--no-watchdog");
    const ProgramRun run = run_program(probe_binary(), args, {}, 30);
    ASSERT_FALSE(run.timed_out);
    EXPECT_EQ(run.exit_code, 4) << run.out << run.err;
    const auto j = parse_output(run);
    EXPECT_EQ(j["verdict"], "deadline_exceeded");
    EXPECT_EQ(j["exit_code"], 4);
    std::cout << "[timing] hang with --deadline 1 (" << (watchdog ? "watchdog" : "alarm")
              << "): " << run.elapsed_s << " s\n";
  }
}

// Without a GPU, a multi-machine nccl probe still takes its part in the rendezvous (live mode
// relays the id between machines and must be testable on CPU-only hosts): every rank gets the
// blob, then reports no_gpu with details.rendezvous "ok".
TEST(ProbeCli, WithoutAGpuTheNcclRendezvousStillRunsAcrossProcesses) {
  const std::string path = ::testing::TempDir() + "/faultline_rdv_" + std::to_string(::getpid());
  std::remove(path.c_str());
  auto rank = [&](int r) {
    return run_program(probe_binary(),
                       {"nccl", "--rendezvous", "file:" + path, "--rank", std::to_string(r),
                        "--nranks", "3", "--deadline", "20"},
                       kHideGpus, 60);
  };
  // The receivers start first and wait for rank 0's file.
  auto r1 = std::async(std::launch::async, rank, 1);
  auto r2 = std::async(std::launch::async, rank, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ProgramRun r0 = rank(0);
  for (const ProgramRun& run : {r0, r1.get(), r2.get()}) {
    ASSERT_FALSE(run.timed_out);
    EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
    const auto j = parse_output(run);
    EXPECT_EQ(j["verdict"], "no_gpu");
    EXPECT_EQ(j["details"].value("rendezvous", ""), "ok") << run.out;
    EXPECT_EQ(j["metrics"].value("rendezvous_ok", -1.0), 1.0);
    EXPECT_EQ(j["metrics"].value("nccl_ranks", -1.0), 3.0);
  }
  std::remove(path.c_str());
}

// A rank whose rank 0 never publishes ends within its deadline, saying the rendezvous timed out.
TEST(ProbeCli, WithoutAGpuAMissingRankZeroTimesOutWithinTheDeadline) {
  const std::string path =
      ::testing::TempDir() + "/faultline_rdv_missing_" + std::to_string(::getpid());
  std::remove(path.c_str());
  const ProgramRun run = run_program(
      probe_binary(),
      {"nccl", "--rendezvous", "file:" + path, "--rank", "1", "--nranks", "2", "--deadline", "1.5"},
      kHideGpus, 30);
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 4) << run.out << run.err;
  const auto j = parse_output(run);
  EXPECT_LT(j["elapsed_s"].get<double>(), 1.5) << "within its deadline";
  EXPECT_LT(run.elapsed_s, 1.5 + 2.0) << "plus the program's start and exit";
  EXPECT_EQ(j["verdict"], "deadline_exceeded");
  EXPECT_EQ(j["details"].value("rendezvous", ""), "timed_out");
  EXPECT_EQ(j["metrics"].value("rendezvous_ok", -1.0), 0.0);
  EXPECT_NE(j["notes"].dump().find("waiting for rank 0"), std::string::npos) << j["notes"];
}

}  // namespace
}  // namespace faultline::kernels
