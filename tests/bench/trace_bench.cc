// Reading plus statistics of a one-million-event canonical trace (JSON Lines and
// CSV), the budget being 2 s. The trace is generated once into a temporary file: 10,000
// nodes, 500,000 faults with a start and an end each, 40 fault classes, attributes on
// one fault in a hundred.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "policies/api/rng.h"
#include "traces/readers.h"
#include "traces/stats.h"
#include "traces/writers.h"

namespace {

using namespace faultline;
using namespace faultline::traces;

Trace million_events() {
  Trace t;
  t.fleet_nodes = 10000;
  t.origin = "generated";
  Rng rng({2025});
  for (int n = 0; n < 10000; ++n) t.intern_node("node-" + std::to_string(n));
  std::vector<std::int32_t> cats;
  for (int c = 0; c < 40; ++c)
    cats.push_back(t.intern_category(c < 20 ? "Hardware Failure" : "Other Failure",
                                     "Class " + std::to_string(c % 13),
                                     "Description of fault kind " + std::to_string(c)));
  t.events.reserve(1'000'000);
  double at = 0;
  for (int i = 0; i < 500'000; ++i) {
    at += rng.exponential(60.0);
    Event e;
    e.time_s = std::round(at * 1000) / 1000;
    e.node = static_cast<std::int32_t>(rng.below(10000));
    e.category = cats[rng.below(cats.size())];
    e.kind = EventKind::kFaultStart;
    if (i % 100 == 0) e.attrs = t.add_attributes({{"ticket", "T-" + std::to_string(i)}});
    t.events.push_back(e);
    Event end = e;
    end.kind = EventKind::kFaultEnd;
    end.attrs = -1;
    end.time_s = std::round((at + rng.lognormal(9, 1.5)) * 1000) / 1000;
    t.events.push_back(end);
  }
  t.sort_by_time();
  return t;
}

const std::string& trace_file(Format f) {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("faultline-trace-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    const Trace t = million_events();
    for (Format g : {Format::kJsonl, Format::kCsv}) {
      std::string err;
      write_text_file((d / (g == Format::kJsonl ? "m.jsonl" : "m.csv")).string(),
                      write_trace(t, g).text, &err);
    }
    return d.string();
  }();
  static const std::string jsonl = dir + "/m.jsonl", csv = dir + "/m.csv";
  return f == Format::kJsonl ? jsonl : csv;
}

void read_and_stats(benchmark::State& state, Format f) {
  const std::string& path = trace_file(f);
  state.counters["MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  for (auto _ : state) {
    ReadResult r = read_trace_file(path, f, {});
    if (!r.ok() || r.records != 1'000'000) state.SkipWithError("trace did not read back");
    const TraceStats s = compute_stats(r.trace);
    if (s.faults != 500'000) state.SkipWithError("wrong fault count");
    benchmark::DoNotOptimize(s.faults_per_1000_node_days);
  }
  state.counters["events_per_s"] =
      benchmark::Counter(1e6, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ReadStatsCanonicalJsonl(benchmark::State& s) { read_and_stats(s, Format::kJsonl); }
void BM_ReadStatsCanonicalCsv(benchmark::State& s) { read_and_stats(s, Format::kCsv); }
BENCHMARK(BM_ReadStatsCanonicalJsonl)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_ReadStatsCanonicalCsv)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(trace_file(Format::kJsonl)).parent_path(), ec);
  return 0;
}
