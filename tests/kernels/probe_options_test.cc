#include "kernels/probe_options.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "kernels/probe_main.h"

namespace faultline::kernels {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ParseResult parse(std::vector<std::string_view> args, std::map<std::string, std::string> env = {}) {
  return parse_probe_args(args, fake_env(std::move(env)));
}

TEST(ProbeOptions, DefaultsPerProbe) {
  for (ProbeKind k : kAllProbes) {
    const auto r = parse({probe_name(k)});
    ASSERT_EQ(r.kind, ParseResult::Kind::kRun) << r.text;
    EXPECT_EQ(r.options.probe, k);
    EXPECT_EQ(r.options.common.device, 0);
    EXPECT_DOUBLE_EQ(r.options.common.deadline_s, 300);
    EXPECT_EQ(r.options.common.inject, Injection::kNone);
    EXPECT_TRUE(r.options.common.watchdog);
  }
  const auto g = parse({"gemm"});
  EXPECT_EQ(g.options.gemm.paths.size(), 4u);
  EXPECT_TRUE(g.options.gemm.baseline);
  EXPECT_EQ(g.options.gemm.size, 16384);
}

TEST(ProbeOptions, ParsesEveryKindOfValue) {
  const auto r = parse({"gemm",
                        "--paths",
                        "bf16,tiled",
                        "--size=4096",
                        "--duration",
                        "2.5",
                        "--no-baseline",
                        "--digest-size",
                        "0",
                        "--inject",
                        "bitflip",
                        "--deadline",
                        "30",
                        "--seed",
                        "7",
                        "--device",
                        "1",
                        "--tolerance-sigma",
                        "12",
                        "--expect-digest",
                        "0xDEADbeef",
                        "--pretty",
                        "--no-watchdog"});
  ASSERT_EQ(r.kind, ParseResult::Kind::kRun) << r.text;
  const auto& o = r.options;
  EXPECT_EQ(o.gemm.paths, (std::vector<GemmPath>{GemmPath::kBf16, GemmPath::kTiled}));
  EXPECT_EQ(o.gemm.size, 4096);
  EXPECT_DOUBLE_EQ(o.gemm.duration_s, 2.5);
  EXPECT_FALSE(o.gemm.baseline);
  EXPECT_EQ(o.gemm.digest_size, 0);
  EXPECT_EQ(o.common.inject, Injection::kBitflip);
  EXPECT_DOUBLE_EQ(o.common.deadline_s, 30);
  EXPECT_EQ(o.common.seed, 7u);
  EXPECT_EQ(o.common.device, 1);
  EXPECT_EQ(o.gemm.expect_digest, "DEADbeef");
  EXPECT_TRUE(o.common.pretty);
  EXPECT_FALSE(o.common.watchdog);

  const auto h = parse({"hbm", "--fraction", "0.5", "--tests", "random,walking_ones", "--passes",
                        "2", "--bandwidth-bytes", "64M", "--iterations", "3"});
  ASSERT_EQ(h.kind, ParseResult::Kind::kRun) << h.text;
  EXPECT_DOUBLE_EQ(h.options.hbm.fraction, 0.5);
  EXPECT_EQ(h.options.hbm.tests, (std::vector<HbmTest>{HbmTest::kRandom, HbmTest::kWalkingOnes}));
  EXPECT_EQ(h.options.hbm.passes, 2);
  EXPECT_EQ(h.options.hbm.bandwidth_bytes, 64u << 20);
  EXPECT_EQ(h.options.hbm.iterations, 3);

  const auto p = parse({"p2p", "--bytes", "1G", "--iterations", "4"});
  ASSERT_EQ(p.kind, ParseResult::Kind::kRun);
  EXPECT_EQ(p.options.p2p.bytes, 1ull << 30);
  EXPECT_EQ(p.options.p2p.iterations, 4);
  EXPECT_EQ(p.options.pcie.iterations, 20);  // untouched
}

TEST(ProbeOptions, UsageErrors) {
  const std::vector<std::vector<std::string_view>> bad = {
      {},
      {"gpu-burn"},
      {"gemm", "--bogus"},
      {"gemm", "--fraction", "0.5"},  // hbm option on gemm
      {"hbm", "--size", "1024"},      // gemm option on hbm
      {"gemm", "--size"},             // missing value
      {"gemm", "--size", "1000"},     // not a multiple of 128
      {"gemm", "--size", "big"},
      {"gemm", "--duration", "-1"},
      {"gemm", "--digest-size", "8192"},  // too large for the CPU reference
      {"gemm", "--paths", "bf16,int8"},
      {"gemm", "--expect-digest", "xyz"},
      {"hbm", "--fraction", "0.99"},
      {"hbm", "--tests", ""},
      {"pcie", "--bytes", "100"},   // below 4K
      {"pcie", "--bytes", "4097"},  // not a multiple of 16
      {"env", "--deadline", "0"},
      {"env", "--deadline", "nan"},
      {"env", "--inject", "meteor"},
      {"hbm", "--inject", "hang-kernel"},  // gemm only
      {"env", "--pretty=yes"},
      {"nccl", "--rank", "0"},  // needs --rendezvous
      {"nccl", "--rendezvous", "file:/tmp/x", "--rank", "2", "--nranks", "2"},
      {"nccl", "--rendezvous", "file:/tmp/x", "--rank", "0"},  // no nranks anywhere
      {"nccl", "--rendezvous", "tcp:host"},
      {"nccl", "--rendezvous", "smoke-signal:hill"},
      {"nccl", "--rendezvous", "file:/tmp/x", "--rank", "0", "--nranks", "2", "--gpus", "2"},
      {"nccl", "--collectives", "broadcast"},
  };
  for (const auto& args : bad) {
    const auto r = parse(args);
    std::string joined;
    for (auto a : args) joined += std::string(a) + " ";
    EXPECT_EQ(r.kind, ParseResult::Kind::kError) << joined;
    EXPECT_FALSE(r.text.empty()) << joined;
  }
}

TEST(ProbeOptions, TorchrunEnvironmentDefaults) {
  const auto d = parse({"hbm"}, {{"LOCAL_RANK", "3"}});
  EXPECT_EQ(d.options.common.device, 3);
  const auto explicit_device = parse({"hbm", "--device", "1"}, {{"LOCAL_RANK", "3"}});
  EXPECT_EQ(explicit_device.options.common.device, 1);
  const auto n = parse({"nccl", "--rendezvous", "tcp:node0:29500"},
                       {{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"}});
  ASSERT_EQ(n.kind, ParseResult::Kind::kRun) << n.text;
  EXPECT_EQ(n.options.nccl.rank, 5);
  EXPECT_EQ(n.options.nccl.nranks, 16);
  ASSERT_TRUE(n.options.nccl.rendezvous.has_value());
  EXPECT_EQ(n.options.nccl.rendezvous->kind, RendezvousSpec::Kind::kTcp);
  EXPECT_EQ(n.options.nccl.rendezvous->host, "node0");
  EXPECT_EQ(n.options.nccl.rendezvous->port, 29500);
  // Without a rendezvous, RANK/WORLD_SIZE do not switch local mode into multi-process mode.
  const auto local = parse({"nccl"}, {{"RANK", "5"}, {"WORLD_SIZE", "16"}});
  ASSERT_EQ(local.kind, ParseResult::Kind::kRun);
  EXPECT_FALSE(local.options.nccl.rendezvous.has_value());
}

TEST(ProbeOptions, RendezvousSpecs) {
  auto f = parse_rendezvous("file:/shared/run42/nccl.id");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, RendezvousSpec::Kind::kFile);
  EXPECT_EQ(f->path, "/shared/run42/nccl.id");
  auto v6 = parse_rendezvous("tcp:[::1]:1234");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 1234);
  EXPECT_FALSE(parse_rendezvous("file:"));
  EXPECT_FALSE(parse_rendezvous("tcp:host:0"));
  EXPECT_FALSE(parse_rendezvous("tcp:host:70000"));
  EXPECT_FALSE(parse_rendezvous("tcp::80"));
}

TEST(ProbeOptions, ByteSizes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("4K"), 4096u);
  EXPECT_EQ(parse_byte_size("256M"), 256u << 20);
  EXPECT_EQ(parse_byte_size("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("2gb"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1T"), 1ull << 40);
  EXPECT_FALSE(parse_byte_size("M"));
  EXPECT_FALSE(parse_byte_size("12Q"));
  EXPECT_FALSE(parse_byte_size("-1"));
  EXPECT_FALSE(parse_byte_size("99999999999999999999T"));
}

TEST(ProbeOptions, HelpListsEveryOption) {
  const std::string program = program_help();
  for (ProbeKind k : kAllProbes) {
    EXPECT_NE(program.find("  " + std::string(probe_name(k)) + " "), std::string::npos);
    const std::string help = probe_help(k);
    for (const auto& name : option_names(k)) {
      EXPECT_NE(help.find(name), std::string::npos) << probe_name(k) << " help lacks " << name;
      EXPECT_NE(program.find(name), std::string::npos) << "program help lacks " << name;
    }
    EXPECT_NE(help.find("exit codes"), std::string::npos);
    for (std::string_view word : {"0 pass", "1 fail", "2 usage", "3 no GPU", "4 deadline"}) {
      EXPECT_NE(help.find(word), std::string::npos) << word;
    }
  }
  EXPECT_EQ(parse({"--help"}).kind, ParseResult::Kind::kHelp);
  const auto probe = parse({"nccl", "--bytes", "1M", "--help"});
  EXPECT_EQ(probe.kind, ParseResult::Kind::kHelp);
  EXPECT_NE(probe.text.find("--rendezvous"), std::string::npos);
}

TEST(ProbeOptions, HelpFitsInOneHundredColumns) {
  std::string all = program_help();
  for (ProbeKind k : kAllProbes) all += probe_help(k);
  std::istringstream lines(all);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 100u) << line;
}

// probe_main end to end, in process, with the backend that never touches a GPU.
struct MainResult {
  int code;
  std::string out;
  std::string err;
};

MainResult run_main(std::vector<std::string_view> args) {
  auto backend = make_no_cuda_backend();
  std::ostringstream out, err;
  ProgramEnvironment environment;
  environment.env = fake_env({});
  environment.compiled_in_thresholds = FAULTLINE_THRESHOLDS_FILE;
  const int code = probe_main(args, *backend, out, err, environment);
  return {code, out.str(), err.str()};
}

TEST(ProbeMain, UsageErrorsExitTwoWithJson) {
  for (const auto& args : std::vector<std::vector<std::string_view>>{
           {}, {"nope"}, {"gemm", "--size", "7"}, {"hbm", "--thresholds", "/nonexistent.json"}}) {
    const auto r = run_main(args);
    EXPECT_EQ(r.code, 2);
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["verdict"], "usage_error");
    EXPECT_EQ(j["exit_code"], 2);
    EXPECT_FALSE(j["notes"].empty());
    EXPECT_NE(r.err.find("--help"), std::string::npos);
  }
}

TEST(ProbeMain, HelpExitsZero) {
  const auto r = run_main({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: faultline-probe"), std::string::npos);
  const auto p = run_main({"hbm", "--help"});
  EXPECT_EQ(p.code, 0);
  EXPECT_NE(p.out.find("--fraction"), std::string::npos);
}

TEST(ProbeMain, NoCudaBackendSaysNoGpu) {
  for (ProbeKind k : kAllProbes) {
    const auto r = run_main({probe_name(k), "--deadline", "20"});
    EXPECT_EQ(r.code, 3) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["verdict"], "no_gpu");
    EXPECT_EQ(j["probe"], probe_name(k));
  }
}

TEST(ProbeMain, InProcessModeAlsoWorks) {
  const auto r = run_main({"pcie", "--no-watchdog"});
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(nlohmann::json::parse(r.out)["verdict"], "no_gpu");
}

TEST(ProbeMain, HangBecomesDeadlineVerdict) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_main({"gemm", "--inject", "hang", "--deadline", "0.5"});
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 4);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "deadline_exceeded");
  EXPECT_EQ(j["inject"], "hang");
  EXPECT_LT(elapsed, 10.0);
}

}  // namespace
}  // namespace faultline::kernels
