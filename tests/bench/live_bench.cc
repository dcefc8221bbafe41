// The live controller's cost per agent message, at 1,000 machines: the frame's JSON parse
// (what Conn does for every message) and LiveWorld's handling of a heartbeat, a step report
// and a rank exit (decode, then the world's bookkeeping; the policy sees what it acts on).
// The controller adds a map lookup and a timer check per message
// (realexec/controller/live_controller.cc).
//
//   faultline_bench_live [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "eventlog/event_log.h"
#include "policies/builtin.h"
#include "realexec/controller/journal.h"
#include "realexec/controller/live_world.h"
#include "realexec/live_config.h"

namespace {

using namespace faultline;
using namespace faultline::live;
using nlohmann::json;

constexpr int kMachines = 1000;

// Every request "sent" succeeds and is never answered: the world runs, nothing replies.
struct NullLink final : MachineLink {
  bool send(MachineId, const json&) override { return true; }
  bool connected(MachineId) const override { return true; }
};

struct Fixture {
  std::string dir = std::filesystem::temp_directory_path() / "faultline-bench-live";
  Registry registry = policies::builtin_registry();
  LiveConfig config;
  Reactor reactor;
  NullLink link;
  std::unique_ptr<traces::EventLogWriter> log;
  std::unique_ptr<Journal> journal;
  std::unique_ptr<LiveWorld> world;
  Fixture() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    json machines = json::array();
    for (int i = 0; i < kMachines; ++i)
      machines.push_back({{"name", "m" + std::to_string(i)},
                          {"addr", "127.0.0.1"},
                          {"workdir", dir + "/m" + std::to_string(i)}});
    const json cfg = {{"controller", "127.0.0.1:1"},
                      {"token_file", "token"},
                      {"machines", machines},
                      {"standby", json::array()},
                      {"job", {{"versions", {{"v1", {"/bin/true"}}}}, {"nominal_step_time_s", 1}}},
                      {"policy", {{"stack", "byterobust"}}},
                      {"trainjob_bin", "/bin/true"},
                      {"state_dir", dir + "/state"}};
    config = parse_live_config(cfg.dump(), dir + "/live.json", registry);
    std::filesystem::create_directories(dir + "/state");
    log = std::make_unique<traces::EventLogWriter>(dir + "/state/events.jsonl");
    journal = std::make_unique<Journal>(dir + "/state/journal.json");
    std::string err;
    journal->load(&err);
    world = std::make_unique<LiveWorld>(config, registry, reactor, link, *log, *journal);
    for (MachineId m = 0; m < kMachines; ++m) world->on_agent_connected(m, Auth{});
    world->start();
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

const std::string kStep =
    R"({"type":"report","gen":1,"rank":17,"report":{"type":"step","rank":17,"step":42,"loss":2.5,"step_time_s":1.0}})";

void BM_ParseFrame(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(json::parse(kStep));
}
BENCHMARK(BM_ParseFrame);

void BM_Heartbeat(benchmark::State& state) {
  Fixture& f = fixture();
  const json hb = {{"type", "heartbeat"}};
  MachineId m = 0;
  for (auto _ : state) {
    f.world->on_agent_message(m, hb);
    m = (m + 1) % kMachines;
  }
}
BENCHMARK(BM_Heartbeat);

void BM_StepReport(benchmark::State& state) {
  Fixture& f = fixture();
  json msg = json::parse(kStep);
  std::int64_t step = 0;
  for (auto _ : state) {
    const int rank = static_cast<int>(step % kMachines);
    msg["rank"] = rank;
    msg["report"]["rank"] = rank;
    msg["report"]["step"] = 42 + step / kMachines;
    f.world->on_agent_message(rank, msg);
    ++step;
  }
}
BENCHMARK(BM_StepReport);

void BM_Exit(benchmark::State& state) {
  // An exit of an older generation: decoded and recognised as an echo (the common case
  // when a restart kills every rank of a big job).
  Fixture& f = fixture();
  const json exit = {{"type", "exit"},
                     {"gen", 0},
                     {"rank", 5},
                     {"pid", 1234},
                     {"code", -1},
                     {"signal", 9},
                     {"signature", "killed by signal 9 (SIGKILL)"}};
  for (auto _ : state) f.world->on_agent_message(5, exit);
}
BENCHMARK(BM_Exit);

}  // namespace

BENCHMARK_MAIN();
