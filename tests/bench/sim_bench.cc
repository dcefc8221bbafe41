// Simulator throughput.
//
// BM_SimulatorReplica runs whole replicas of a scenario in this process (platform
// built once) and reports events per second. BM_PriorityQueueBaseline replays the same
// event stream (the fault arrivals of the same replicas, each followed by the same
// number of follow-up events the simulator handled per fault) through a plain
// std::priority_queue loop that does nothing else. The ratio of the two is the cost of
// everything the simulator does per event: symptom model, policy, accounting, SimGrid.
//
//   faultline_bench_sim [--benchmark_filter=...]   (scenario: FAULTLINE_BENCH_SCENARIO or the
//   default)
#include <benchmark/benchmark.h>

#include <chrono>
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
    sc = scenarios::load_scenario(
        env ? env : FAULTLINE_SOURCE_DIR "/scenarios/byterobust-dense-9600.json", {}, registry);
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
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events/replica"] = static_cast<double>(events) / state.iterations();
}
BENCHMARK(BM_SimulatorReplica)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Replica k's fault arrivals, each followed by `follow` events a second apart, through a
// plain std::priority_queue loop that does nothing else. Returns the events handled.
std::int64_t queue_replay(const Fixture& f, std::uint64_t k, int follow) {
  const std::int64_t horizon = Duration::days(f.sc.job.horizon_days).ns;
  sim::FaultStream stream(f.sc.faults, f.sc.cluster.machines, f.sc.cluster.rack_size, f.sc.seed, k);
  struct Item {
    std::int64_t at;
    std::uint64_t seq;
    bool operator>(const Item& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  std::uint64_t seq = 0;
  std::int64_t sum = 0, events = 0;
  while (stream.peek_time() < horizon) {
    const sim::FaultArrival a = stream.next();
    q.push({a.at_ns, seq++});
    for (int j = 1; j <= follow; ++j) q.push({a.at_ns + j * 1'000'000'000LL, seq++});
    while (!q.empty() && q.top().at <= a.at_ns + follow * 1'000'000'000LL) {
      sum += q.top().at;
      q.pop();
      ++events;
    }
  }
  benchmark::DoNotOptimize(sum);
  return events;
}

void BM_PriorityQueueBaseline(benchmark::State& state) {
  Fixture& f = fixture();
  std::uint64_t replica = 0;
  std::int64_t events = 0;
  const int follow = std::max(0, static_cast<int>(g_events_per_fault + 0.5) - 1);
  for (auto _ : state) events += queue_replay(f, replica++, follow);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PriorityQueueBaseline)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// The two above, paired: each iteration runs one replica through the simulator and then
// its own event stream (its fault arrivals, each followed by that replica's own number of
// events per fault) through the bare queue loop, timing each. The machine's speed drifts
// within a run on a shared host; pairing replica by replica cancels the drift, so
// `queue/sim` (how many times faster the bare loop is) is the figure to quote.
void BM_SimulatorVsQueue(benchmark::State& state) {
  Fixture& f = fixture();
  std::uint64_t replica = 0;
  std::int64_t events = 0, queue_events = 0;
  double sim_s = 0, queue_s = 0;
  for (auto _ : state) {
    const std::uint64_t k = replica++;
    auto t0 = std::chrono::steady_clock::now();
    sim::ReplicaResult r = f.runner->run(k, {});
    auto t1 = std::chrono::steady_clock::now();
    const std::int64_t n = r.events + r.faults_injected;
    const int follow = std::max(
        0, static_cast<int>(static_cast<double>(n) / std::max<std::int64_t>(1, r.faults_injected) +
                            0.5) -
               1);
    const std::int64_t handled = queue_replay(f, k, follow);
    auto t2 = std::chrono::steady_clock::now();
    sim_s += std::chrono::duration<double>(t1 - t0).count();
    queue_s += std::chrono::duration<double>(t2 - t1).count();
    events += n;
    queue_events += handled;
  }
  const double sim_rate = static_cast<double>(events) / sim_s;
  const double queue_rate = static_cast<double>(queue_events) / queue_s;
  state.counters["sim events/s"] = sim_rate;
  state.counters["queue events/s"] = queue_rate;
  state.counters["queue/sim"] = queue_rate / sim_rate;
}
BENCHMARK(BM_SimulatorVsQueue)->Unit(benchmark::kMillisecond)->MinTime(4.0);

}  // namespace

BENCHMARK_MAIN();
