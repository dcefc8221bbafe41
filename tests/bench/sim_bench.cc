// Simulator throughput.
//
// BM_SimulatorReplica runs whole replicas of a scenario in this process (platform
// built once) and reports events per second. BM_PriorityQueueBaseline replays the same
// event stream (the fault arrivals of the same replicas, each followed by the same
// number of follow-up events the simulator handled per fault) through a plain
// std::priority_queue loop that does nothing else. The ratio of the two is the cost of
// everything the simulator does per event: symptom model, policy, accounting, SimGrid.
//
//   faultline_bench_sim [--benchmark_filter=...]   (scenario: FAULTLINE_BENCH_SCENARIO or the default)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <queue>

#include "policies/builtin.h"
#include "sim/faults.h"
#include "sim/runner.h"

namespace {

using namespace faultline;

struct Fixture {
  Registry registry = policies::builtin_registry();
  scenarios::Scenario sc;
  std::unique_ptr<sim::ReplicaRunner> runner;
  Fixture() {
    const char* env = std::getenv("FAULTLINE_BENCH_SCENARIO");
    sc = scenarios::load_scenario(env ? env : FAULTLINE_SOURCE_DIR "/scenarios/byterobust-dense-9600.json", {},
                                  registry);
    runner = std::make_unique<sim::ReplicaRunner>(sc, registry);
  }
};

Fixture& fixture() {
  static Fixture f;  // SimGrid allows one engine per process
  return f;
}

double g_events_per_fault = 10;

void BM_SimulatorReplica(benchmark::State& state) {
  Fixture& f = fixture();
  std::uint64_t replica = 0;
  std::int64_t events = 0, faults = 0;
  for (auto _ : state) {
    sim::ReplicaResult r = f.runner->run(replica++, {});
    events += r.events + r.faults_injected;
    faults += r.faults_injected;
    benchmark::DoNotOptimize(r.ettr);
  }
  g_events_per_fault = static_cast<double>(events) / std::max<std::int64_t>(1, faults);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events/replica"] = static_cast<double>(events) / state.iterations();
}
BENCHMARK(BM_SimulatorReplica)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_PriorityQueueBaseline(benchmark::State& state) {
  Fixture& f = fixture();
  const std::int64_t horizon = Duration::days(f.sc.job.horizon_days).ns;
  std::uint64_t replica = 0;
  std::int64_t events = 0;
  const int follow = std::max(0, static_cast<int>(g_events_per_fault + 0.5) - 1);
  for (auto _ : state) {
    sim::FaultStream stream(f.sc.faults, f.sc.cluster.machines, f.sc.cluster.rack_size, f.sc.seed, replica++);
    struct Item {
      std::int64_t at;
      std::uint64_t seq;
      bool operator>(const Item& o) const { return at != o.at ? at > o.at : seq > o.seq; }
    };
    std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
    std::uint64_t seq = 0;
    std::int64_t sum = 0;
    while (stream.peek_time() < horizon) {
      const sim::FaultArrival a = stream.next();
      q.push({a.at_ns, seq++});
      for (int k = 1; k <= follow; ++k) q.push({a.at_ns + k * 1'000'000'000LL, seq++});
      while (!q.empty() && q.top().at <= a.at_ns + follow * 1'000'000'000LL) {
        sum += q.top().at;
        q.pop();
        ++events;
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PriorityQueueBaseline)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
