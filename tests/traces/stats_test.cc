// Trace statistics: the InfiniteHBD figures of ../shared/traces/README.md, and the
// rate denominators on small traces.
#include "traces/stats.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/support/shared_data.h"
#include "traces/readers.h"

namespace faultline::traces {
namespace {

const std::string kInfiniteHbd = ::faultline::testing::shared_trace("infinitehbd/fault_trace.json");

Trace read_strict(const std::string& path) {
  ReadOptions o;
  o.strict = true;
  ReadResult r = read_trace_file(path, Format::kAuto, o);
  EXPECT_TRUE(r.ok()) << r.error << r.first_issue;
  return std::move(r.trace);
}

TEST(InfiniteHbdStats, MatchesTheTraceReadme) {
  FAULTLINE_REQUIRE_SHARED(kInfiniteHbd);
  const Trace t = read_strict(kInfiniteHbd);
  const TraceStats s = compute_stats(t);
  EXPECT_EQ(s.events, 1168u);
  EXPECT_EQ(s.fault_starts, 584u);
  EXPECT_EQ(s.fault_ends, 584u);
  EXPECT_EQ(s.faults, 584u);
  EXPECT_EQ(s.nodes_with_faults, 231u);
  EXPECT_EQ(s.nodes, 231u);
  EXPECT_EQ(s.fleet_nodes, 400);
  EXPECT_EQ(s.fleet_source, "declared by the trace");
  EXPECT_NEAR(s.span_days, 345.08, 0.005);
  // 584 / (400 x 345.0843) x 1000 = 4.2308
  EXPECT_NEAR(s.faults_per_1000_node_days, 4.2308, 5e-4);
  EXPECT_NEAR(s.node_mtbf_days, 400 * 345.0843 / 584, 0.01);
  EXPECT_NEAR(s.fleet_mtbf_h, 345.0843 * 24 / 584, 0.001);
  EXPECT_EQ(s.unmatched_ends, 0u);
  EXPECT_EQ(s.open_faults, 0u);
  EXPECT_EQ(s.repair_h.n, 584u);
  EXPECT_NEAR(s.repair_h.median, 20.39, 0.01);
  EXPECT_NEAR(s.repair_h.mean, 132.84, 0.01);

  std::map<std::string, std::size_t> cls, lvl;
  for (const auto& g : s.by_class) cls[g.name] = g.faults;
  for (const auto& g : s.by_level) lvl[g.name] = g.faults;
  const std::map<std::string, std::size_t> readme = {{"GPU", 158},
                                                     {"Unknown Error", 144},
                                                     {"Stress Test Failure", 97},
                                                     {"Parameter Plane Cable", 40},
                                                     {"Fan", 33},
                                                     {"NIC", 30},
                                                     {"Power Supply", 26},
                                                     {"Training Task Troubleshooting", 14},
                                                     {"Other Failures", 13},
                                                     {"Software Tool", 7}};
  for (const auto& [name, n] : readme) EXPECT_EQ(cls[name], n) << name;
  std::size_t others = 0;
  for (const auto& [name, n] : cls)
    if (!readme.count(name)) {
      EXPECT_LE(n, 4u) << name;
      others += n;
    }
  EXPECT_EQ(others, 584u - 562u);
  EXPECT_EQ(lvl["Hardware Failure"], 298u);
  EXPECT_EQ(lvl["Other Failure"], 262u);
  EXPECT_EQ(lvl["Software Failure"], 24u);
  EXPECT_EQ(s.by_class.front().name, "GPU");

  // --nodes overrides the declared fleet; the JSON says which count was used.
  StatsOptions o;
  o.nodes = 231;
  const TraceStats d = compute_stats(t, o);
  EXPECT_NEAR(d.faults_per_1000_node_days, 1000.0 * 584 / (231 * 345.0843), 1e-3);
  EXPECT_EQ(stats_json(d)["nodes"]["fleet_source"], "--nodes");
  EXPECT_NE(stats_table(s).find("4.231 faults per 1,000 node-days"), std::string::npos);
}

TEST(TraceStats, DistinctNodesWhenNoFleetIsDeclared) {
  ReadResult r = read_trace_text(
      "{\"time_s\":0,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"X\"}\n"
      "{\"time_s\":3600,\"node\":\"a\",\"event\":\"fault_end\",\"class\":\"X\"}\n"
      "{\"time_s\":86400,\"node\":\"b\",\"event\":\"fault\",\"class\":\"Y\",\"duration_s\":7200}\n"
      "{\"time_s\":172800,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"X\"}\n",
      Format::kJsonl, "x", {});
  const TraceStats s = compute_stats(r.trace);
  EXPECT_EQ(s.fleet_source, "distinct nodes in the trace");
  EXPECT_EQ(s.fleet_nodes, 2);
  EXPECT_EQ(s.faults, 3u);
  EXPECT_EQ(s.open_faults, 1u);
  EXPECT_DOUBLE_EQ(s.span_days, 2);
  EXPECT_DOUBLE_EQ(s.faults_per_1000_node_days, 1000.0 * 3 / (2 * 2));
  EXPECT_DOUBLE_EQ(s.repair_h.median, 1.5);
  EXPECT_EQ(s.node_tbf_days.n, 1u);
  EXPECT_DOUBLE_EQ(s.node_tbf_days.mean, 2);
  EXPECT_EQ(s.by_class[0].name, "X");
  EXPECT_EQ(s.by_class[0].faults, 2u);
}

TEST(TraceStats, PairingByCategoryAndUnmatchedEnds) {
  ReadResult r = read_trace_text(
      "{\"time_s\":0,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"X\"}\n"
      "{\"time_s\":10,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"Y\"}\n"
      "{\"time_s\":20,\"node\":\"a\",\"event\":\"fault_end\",\"class\":\"Y\"}\n"
      "{\"time_s\":50,\"node\":\"a\",\"event\":\"fault_end\",\"class\":\"X\"}\n"
      "{\"time_s\":60,\"node\":\"b\",\"event\":\"fault_end\",\"class\":\"X\"}\n",
      Format::kJsonl, "x", {});
  const PairingResult p = pair_faults(r.trace);
  ASSERT_EQ(p.faults.size(), 2u);
  EXPECT_DOUBLE_EQ(p.faults[0].duration_s(), 50);
  EXPECT_DOUBLE_EQ(p.faults[1].duration_s(), 10);
  EXPECT_EQ(p.unmatched_ends, 1u);
  const PairingResult f = pair_faults(r.trace, Pairing::kFifo);
  EXPECT_DOUBLE_EQ(f.faults[0].duration_s(), 20);
  const PairingResult l = pair_faults(r.trace, Pairing::kLifo);
  EXPECT_DOUBLE_EQ(l.faults[0].duration_s(), 50);
}

TEST(TraceStats, QuantilesInterpolate) {
  const Summary s = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_EQ(summarize({}).n, 0u);
}

}  // namespace
}  // namespace faultline::traces
