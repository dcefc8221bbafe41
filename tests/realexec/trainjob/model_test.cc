// The model, optimiser, options and reports of faultline-trainjob, against independent
// references (finite differences, a hand-written update).

#include "realexec/trainjob/model.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "realexec/trainjob/options.h"
#include "realexec/trainjob/report.h"
#include "realexec/trainjob/rng.h"
#include "realexec/trainjob/trainer.h"

namespace faultline::live::trainjob {
namespace {

ModelShape small_shape() {
  ModelShape s;
  s.hidden = 6;
  s.input_dim = 5;
  s.output_dim = 3;
  s.samples_per_microbatch = 4;
  return s;
}

TEST(TrainjobModel, GradientMatchesFiniteDifferences) {
  const ModelShape shape = small_shape();
  const Task task(11, shape);
  const TrainState st = init_state(11, shape);
  std::vector<double> c(shape.contribution_size());
  task.microbatch_contribution(st.weights, 3, 1, c);
  const double loss = c.back();
  EXPECT_GT(loss, 0);
  std::vector<double> probe(shape.contribution_size());
  for (std::size_t i = 0; i < shape.param_count(); ++i) {
    auto w = st.weights;
    const double h = 1e-6;
    w[i] += h;
    task.microbatch_contribution(w, 3, 1, probe);
    const double up = probe.back();
    w[i] -= 2 * h;
    task.microbatch_contribution(w, 3, 1, probe);
    const double down = probe.back();
    EXPECT_NEAR(c[i], (up - down) / (2 * h), 1e-7 * std::max(1.0, std::abs(c[i]))) << "param " << i;
  }
}

TEST(TrainjobModel, ApplyStepIsOrderedMeanWithMomentum) {
  const ModelShape shape = small_shape();
  const std::size_t n = shape.param_count();
  TrainState st = init_state(5, shape);
  st.momentum.assign(n, 0.25);
  const TrainState before = st;
  const int m = 3;
  std::vector<double> gathered(m * (n + 1));
  for (std::size_t k = 0; k < gathered.size(); ++k) gathered[k] = std::sin(0.1 * k);
  const StepOutcome out = apply_step(gathered, m, st);
  double sq = 0, loss = 0;
  for (int b = 0; b < m; ++b) loss += gathered[b * (n + 1) + n];
  for (std::size_t i = 0; i < n; ++i) {
    const double g = ((gathered[i] + gathered[n + 1 + i]) + gathered[2 * (n + 1) + i]) / 3.0;
    sq += g * g;
    const double v = 0.9 * 0.25 + g;
    EXPECT_DOUBLE_EQ(st.momentum[i], v);
    EXPECT_DOUBLE_EQ(st.weights[i], before.weights[i] - 0.05 * v);
  }
  EXPECT_DOUBLE_EQ(out.loss, loss / 3);
  EXPECT_DOUBLE_EQ(out.grad_norm, std::sqrt(sq));
  EXPECT_EQ(st.step, 1);
}

TEST(TrainjobModel, ContributionsDoNotDependOnWhoComputesThem) {
  // The same micro-batch computed in another order or after other work gives the same bits.
  ModelShape shape;
  shape.hidden = 16;
  const Task a(3, shape), b(3, shape);
  const TrainState st = init_state(3, shape);
  std::vector<double> x(shape.contribution_size()), y(shape.contribution_size());
  for (int mb = 7; mb >= 0; --mb) b.microbatch_contribution(st.weights, 9, mb, y);
  a.microbatch_contribution(st.weights, 9, 0, x);
  EXPECT_EQ(state_hash(TrainState{0, x, {}}), state_hash(TrainState{0, y, {}}));
  a.microbatch_contribution(st.weights, 9, 1, x);
  EXPECT_NE(state_hash(TrainState{0, x, {}}), state_hash(TrainState{0, y, {}}));
}

TEST(TrainjobModel, TrainingReducesTheLoss) {
  ModelShape shape;
  shape.hidden = 32;
  const Task task(1, shape);
  TrainState st = init_state(1, shape);
  const int m = 8;
  std::vector<double> gathered(m * shape.contribution_size());
  double first = 0, last = 0;
  for (int step = 1; step <= 200; ++step) {
    for (int mb = 0; mb < m; ++mb) {
      task.microbatch_contribution(st.weights, step, mb,
                                   std::span<double>(gathered).subspan(
                                       mb * shape.contribution_size(), shape.contribution_size()));
    }
    const auto out = apply_step(gathered, m, st);
    if (step == 1) first = out.loss;
    last = out.loss;
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(TrainjobModel, SdcFlipsOneExponentBit) {
  std::vector<double> g = {0.0, 1.5, -0.25, 3.0, 1e-310};
  const auto before = g;
  corrupt_gradient(g, 17);
  int changed = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(g[i]) == std::bit_cast<std::uint64_t>(before[i])) continue;
    ++changed;
    EXPECT_TRUE(std::isnormal(before[i]));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(g[i]) ^ std::bit_cast<std::uint64_t>(before[i]),
              std::uint64_t{1} << 62);
  }
  EXPECT_EQ(changed, 1);
  // Deterministic for a step.
  auto again = before;
  corrupt_gradient(again, 17);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(again[1]), std::bit_cast<std::uint64_t>(g[1]));
}

TEST(TrainjobModel, MicrobatchBlocksAreContiguous) {
  EXPECT_EQ(microbatch_range(0, 1, 8), (std::pair<int, int>{0, 8}));
  EXPECT_EQ(microbatch_range(1, 4, 8), (std::pair<int, int>{2, 4}));
  EXPECT_EQ(microbatch_range(7, 8, 8), (std::pair<int, int>{7, 8}));
}

TEST(TrainjobModel, CounterRngIsStable) {
  // Pinned values: a change here silently changes every loss log and checkpoint.
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(counter_hash(1, 2, 3, 4, 5), counter_hash(1, 2, 3, 4, 5));
  EXPECT_NE(counter_hash(1, 2, 3, 4, 5), counter_hash(1, 2, 3, 5, 4));
  const double u = to_symmetric_unit(~std::uint64_t{0});
  EXPECT_LT(u, 1.0);
  EXPECT_EQ(to_symmetric_unit(0), -1.0);
}

ParsedOptions parse(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  return parse_options(args, [env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(TrainjobOptions, FlagsAndEnvironment) {
  const auto p = parse({"--seed", "9", "--steps=30", "--hidden", "32", "--loss-log", "/tmp/x",
                        "--version", "v2", "--step-ms", "5"},
                       {{"RANK", "3"},
                        {"WORLD_SIZE", "4"},
                        {"LOCAL_RANK", "1"},
                        {"MASTER_ADDR", "10.0.0.1"},
                        {"MASTER_PORT", "29400"},
                        {"FAULTLINE_CKPT_EVERY", "1"},
                        {"FAULTLINE_REPORT_FD", "5"}});
  ASSERT_TRUE(p.options) << p.message;
  const Options& o = *p.options;
  EXPECT_EQ(o.mode, Mode::kTrain);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.steps, 30);
  EXPECT_EQ(o.hidden, 32);
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 29400);
  EXPECT_EQ(o.ckpt_every, 1);
  EXPECT_EQ(o.report_fd, 5);
  EXPECT_EQ(o.rendezvous_s, 60);
  EXPECT_EQ(parse({"--probe", "bitwise"}).options->steps, 1);
  EXPECT_EQ(parse({"--replay", "--steps", "4"}).options->mode, Mode::kReplay);
  EXPECT_EQ(parse({"--crash-at", "30"}).options->crash_at, 30);
  EXPECT_EQ(parse({}).options->crash_at, -1);
}

TEST(TrainjobOptions, ErrorsNameTheFlagAndExitTwo) {
  auto p = parse({"--seed", "1", "--frobnicate", "3"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.message.find("--frobnicate"), std::string::npos);
  EXPECT_EQ(p.message.find('\n'), std::string::npos);
  p = parse({"--steps", "many"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.message.find("--steps"), std::string::npos);
  p = parse({"--microbatches", "8"}, {{"WORLD_SIZE", "3"}});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.message.find("WORLD_SIZE"), std::string::npos);
  p = parse({}, {{"RANK", "x"}});
  EXPECT_EQ(p.exit_code, 2);
  p = parse({"--probe", "nccl"});
  EXPECT_EQ(p.exit_code, 2);
  p = parse({"--crash-at", "0"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.message.find("--crash-at"), std::string::npos);
  p = parse({"--help"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, 0);
}

TEST(TrainjobReport, NonFiniteNumbersBecomeNullWithAFlag) {
  nlohmann::json j;
  put_number(j, "loss", std::numeric_limits<double>::quiet_NaN());
  put_number(j, "grad_norm", 2.5);
  EXPECT_TRUE(j["loss"].is_null());
  EXPECT_EQ(j["loss_nan"], true);
  EXPECT_EQ(j["grad_norm"], 2.5);
  EXPECT_FALSE(j.contains("grad_norm_nan"));
  const std::string line = Reporter::line(j);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find("nan,"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(line)["loss"].is_null());
}

}  // namespace
}  // namespace faultline::live::trainjob
