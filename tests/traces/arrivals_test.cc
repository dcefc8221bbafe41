// Trace-driven arrivals: replay maps trace nodes onto slots, bootstrap keeps the fleet
// rate at any scale, rack- and switch-scope events take the whole rack, and every
// replica is reproducible from (seed, replica).
#include "traces/arrivals.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tests/support/shared_data.h"
#include "traces/config.h"
#include "traces/readers.h"

namespace faultline::traces {
namespace {

Trace jsonl(const std::string& text) {
  ReadOptions o;
  o.strict = true;
  ReadResult r = read_trace_text(text, Format::kJsonl, "t.jsonl", o);
  EXPECT_TRUE(r.ok()) << r.first_issue;
  r.trace.sort_by_time();
  return std::move(r.trace);
}

const char* kMap = R"({
  "categories": [
    {"name": "gpu", "symptom": "crash", "persistent": true},
    {"name": "tor", "scope": "rack", "symptom": "crash", "persistent": true},
    {"name": "other", "symptom": "crash"}
  ],
  "rules": [{"scope": "switch", "category": "tor"}, {"scope": "rack", "category": "tor"},
            {"class": "GPU*", "category": "gpu"}],
  "default": "other"
})";

TEST(Arrivals, ReplayInOrderMapsFirstAppearanceToSlots) {
  const Trace t = jsonl(
      "{\"time_s\":100,\"node\":\"b\",\"event\":\"fault_start\",\"class\":\"GPU\"}\n"
      "{\"time_s\":200,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"PSU\"}\n"
      "{\"time_s\":300,\"node\":\"b\",\"event\":\"fault_end\",\"class\":\"GPU\"}\n"
      "{\"time_s\":400,\"node\":\"c\",\"event\":\"fault\",\"class\":\"GPU\"}\n");
  const CategoryMap m = parse_category_map(kMap, "m.json");
  const FleetTimelines tl = build_timelines(t, m, 0);
  EXPECT_EQ(tl.nodes.size(), 3u);
  EXPECT_EQ(tl.faults, 3u);
  ArrivalOptions o;
  o.mode = ArrivalMode::kReplay;
  o.slots = 2;
  o.rack_size = 16;
  o.horizon_s = 1000;
  o.time_scale = 0.5;
  o.start_s = 50;
  const auto a = trace_arrivals(tl, o, 1, 0);
  ASSERT_EQ(a.size(), 2u);  // node c has no slot
  EXPECT_EQ(a[0].at_ns, 25'000'000'000);
  EXPECT_EQ(a[0].slot, 0);
  EXPECT_EQ(a[0].category, 0);
  EXPECT_EQ(a[1].at_ns, 75'000'000'000);
  EXPECT_EQ(a[1].slot, 1);
  EXPECT_EQ(a[1].category, 2);
  // Random order: an injective, replica-dependent assignment.
  o.order = NodeOrder::kRandom;
  o.slots = 100;
  std::set<std::vector<std::int32_t>> layouts;
  for (std::uint64_t r = 0; r < 20; ++r) {
    const auto x = trace_arrivals(tl, o, 1, r);
    ASSERT_EQ(x.size(), 3u);
    EXPECT_NE(x[0].slot, x[1].slot);
    layouts.insert({x[0].slot, x[1].slot, x[2].slot});
    const auto y = trace_arrivals(tl, o, 1, r);
    EXPECT_EQ(y[0].slot, x[0].slot);
  }
  EXPECT_GT(layouts.size(), 15u);
}

TEST(Arrivals, BootstrapKeepsTheFleetRateAndCountsFaultFreeNodes) {
  // 10 faulty nodes of a declared fleet of 100: 20 faults over 10 days.
  std::string text = "{\"meta\":{\"version\":1,\"fleet_nodes\":100,\"window\":[0,864000]}}\n";
  for (int n = 0; n < 10; ++n)
    for (int k = 0; k < 2; ++k)
      text += "{\"time_s\":" + std::to_string(86400 * (n % 5) + 40000 * k + 1) + ",\"node\":\"n" +
              std::to_string(n) + "\",\"event\":\"fault_start\",\"class\":\"GPU\"}\n";
  const Trace t = jsonl(text);
  const CategoryMap m = parse_category_map(kMap, "m.json");
  const FleetTimelines tl = build_timelines(t, m, 0);
  ASSERT_EQ(tl.nodes.size(), 100u);
  ArrivalOptions o;
  o.mode = ArrivalMode::kBootstrap;
  o.slots = 12500;
  o.rack_size = 16;
  o.horizon_s = 30 * 86400.0;
  // Expected: 0.02 faults per node-day x 12,500 machines x 30 days = 7,500.
  double total = 0;
  const int reps = 20;
  for (int r = 0; r < reps; ++r)
    total += static_cast<double>(trace_arrivals(tl, o, 9, static_cast<std::uint64_t>(r)).size());
  const double mean = total / reps;
  // Each slot draws a node: faulty with p = 0.1, then 6 faults (2 per 10-day period).
  const double sd = std::sqrt(12500 * 0.1 * 0.9) * 6 / std::sqrt(static_cast<double>(reps));
  EXPECT_NEAR(mean, 7500, 4 * sd);
  // A fleet of only the faulty nodes would give ten times the rate.
  const FleetTimelines only_faulty = build_timelines(t, m, 10);
  EXPECT_NEAR(static_cast<double>(trace_arrivals(only_faulty, o, 9, 0).size()), 75000, 1);
  EXPECT_THROW(build_timelines(t, m, 5), TraceError);
  // Sorted, in range, and different per replica.
  const auto a = trace_arrivals(tl, o, 9, 0), b = trace_arrivals(tl, o, 9, 1);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end(),
                             [](const auto& x, const auto& y) { return x.at_ns < y.at_ns; }));
  for (const auto& x : a) {
    EXPECT_GE(x.slot, 0);
    EXPECT_LT(x.slot, 12500);
    EXPECT_LT(x.at_ns, static_cast<std::int64_t>(30 * 86400e9));
  }
  EXPECT_NE(a.size() == b.size() && a.front().at_ns == b.front().at_ns, true);
}

TEST(Arrivals, RackAndSwitchEventsTakeTheRackOnce) {
  // One ToR failure recorded on three nodes, and a rack event without a scope id.
  const Trace t = jsonl(
      "{\"time_s\":1000,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"ToR\",\"scope\":"
      "\"switch\",\"scope_id\":\"tor-1\"}\n"
      "{\"time_s\":1010,\"node\":\"b\",\"event\":\"fault_start\",\"class\":\"ToR\",\"scope\":"
      "\"switch\",\"scope_id\":\"tor-1\"}\n"
      "{\"time_s\":1020,\"node\":\"c\",\"event\":\"fault_start\",\"class\":\"ToR\",\"scope\":"
      "\"switch\",\"scope_id\":\"tor-1\"}\n"
      "{\"time_s\":5000,\"node\":\"d\",\"event\":\"fault\",\"class\":\"PDU\",\"scope\":\"rack\"}\n"
      "{\"time_s\":9000,\"node\":\"c\",\"event\":\"fault_start\",\"class\":\"GPU\"}\n");
  const CategoryMap m = parse_category_map(kMap, "m.json");
  const FleetTimelines tl = build_timelines(t, m, 0);
  EXPECT_EQ(tl.mapping.merged, 2u);
  EXPECT_EQ(tl.faults, 3u);
  ArrivalOptions o;
  o.mode = ArrivalMode::kReplay;
  o.slots = 64;
  o.rack_size = 16;
  o.horizon_s = 1e6;
  o.order = NodeOrder::kRandom;
  for (std::uint64_t r = 0; r < 10; ++r) {
    const auto a = trace_arrivals(tl, o, 3, r);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a[0].category, 1);
    EXPECT_EQ(a[0].slot % 16, 0);  // first slot of a rack: the simulator takes the whole rack
    EXPECT_EQ(a[1].category, 1);
    EXPECT_EQ(a[1].slot % 16, 0);
    EXPECT_EQ(a[2].category, 0);
  }
  // A switch event mapped to a machine-scope category is a scope mismatch.
  const CategoryMap narrow =
      parse_category_map(R"({"categories": [{"name": "x"}], "default": "x"})", "n.json");
  const FleetTimelines bad = build_timelines(t, narrow, 0);
  EXPECT_EQ(bad.mapping.scope_mismatch, 4u);
  EXPECT_EQ(bad.faults, 1u);
}

TEST(Arrivals, IdentityMapGivesOneCategoryPerClass) {
  const Trace t = jsonl(
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"Power Supply\"}\n"
      "{\"time_s\":2,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"GPU\"}\n"
      "{\"time_s\":3,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"\"}\n"
      "{\"time_s\":4,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"X\",\"scope\":\"rack\"}"
      "\n");
  const CategoryMap m = identity_category_map(t);
  EXPECT_EQ(m.names,
            (std::vector<std::string>{"rack_outage", "power_supply", "gpu", "unclassified", "x"}));
  const FleetTimelines tl = build_timelines(t, m, 0);
  EXPECT_EQ(tl.faults, 4u);
  EXPECT_EQ(tl.mapping.unmapped, 0u);
}

TEST(CategoryMap, ErrorsNameTheFileAndPath) {
  auto error = [](const std::string& text) {
    try {
      parse_category_map(text, "map.json");
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(
      error(R"({"categories": [{"name": "a"}], "rules": [{"class": "GPU", "category": "b"}]})"),
      "map.json: $.rules[0].category: no category named \"b\" in $.categories");
  EXPECT_EQ(error(R"({"categories": [{"name": "a", "rate_per_machine_day": 1}], "default": "a"})"),
            "map.json: $.categories[0].rate_per_machine_day: not in a mapping table: the trace "
            "supplies the rates");
  EXPECT_EQ(
      error(R"({"categories": [{"name": "a"}], "rules": [{"klass": "GPU", "category": "a"}]})"),
      "map.json: $.rules[0].klass: unknown key; expected one of: category, class, desc, level, "
      "scope");
  EXPECT_EQ(error(R"({"categories": [{"name": "a", "scope": "pod"}], "default": "a"})"),
            "map.json: $.categories[0].scope: expected one of machine|rack|job, got \"pod\"");
  EXPECT_EQ(error(R"({"categories": [{"name": "a"}]})"),
            "map.json: $: expected \"rules\" or a \"default\" category");
  EXPECT_TRUE(glob_match("GPU*", "GPU Lost"));
  EXPECT_TRUE(glob_match("*Bit ECC*", "GPU DBE(Double Bit ECC) > Threshold"));
  EXPECT_FALSE(glob_match("GPU", "GPU Lost"));
  EXPECT_TRUE(glob_match("*", ""));
}

TEST(CategoryMap, ShippedInfiniteHbdMappingCoversTheTrace) {
  const std::string path = ::faultline::testing::shared_trace("infinitehbd/fault_trace.json");
  const CategoryMap m = load_category_map(FAULTLINE_SOURCE_DIR "/traces/mappings/infinitehbd.json");
  FAULTLINE_REQUIRE_SHARED(path);
  ReadResult r = read_trace_file(path, Format::kInfiniteHbd, {});
  r.trace.sort_by_time();
  const FleetTimelines tl = build_timelines(r.trace, m, 0);
  EXPECT_EQ(tl.faults, 584u);
  EXPECT_EQ(tl.nodes.size(), 400u);
  std::map<std::string, int> per;
  for (const auto& node : tl.nodes)
    for (const auto& f : node) ++per[m.names[static_cast<std::size_t>(f.category)]];
  EXPECT_EQ(per["unknown"], 144 + 1 + 2);  // Unknown Error, System Crash, Test
  EXPECT_EQ(per["gpu_sdc"], 1);
  EXPECT_EQ(per["gpu_degraded"], 25 + 3 + 2);
  EXPECT_EQ(per["stress_test_failure"], 97);
  EXPECT_EQ(per["suspect_machine"], 14);
}

}  // namespace
}  // namespace faultline::traces
