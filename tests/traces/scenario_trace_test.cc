// Traces in scenarios: faults.trace loads and validates with one-line errors, its
// arrivals reach the simulator's FaultStream deterministically, and the fault models
// that `trace fit` and `trace mix` write load as a scenario's "faults".
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "policies/builtin.h"
#include "scenarios/scenario.h"
#include "sim/faults.h"
#include "tests/support/shared_data.h"
#include "traces/model.h"
#include "traces/readers.h"

namespace faultline {
namespace {

using nlohmann::json;

const std::string kHbd = ::faultline::testing::shared_trace("infinitehbd/fault_trace.json");
const std::string kScenarios = FAULTLINE_SOURCE_DIR "/scenarios/";

json base() {
  return json::parse(R"({
    "description": "trace test",
    "seed": 5,
    "cluster": {"machines": 64, "gpus_per_machine": 8, "rack_size": 16},
    "job": {"tp": 8, "pp": 4, "dp": 16, "step_time_s": 5, "horizon_days": 30},
    "faults": {},
    "policy": {"stack": "requeue", "params": {}}
  })");
}

// Writes `doc` (and a small trace next to it) into a fresh directory; returns the scenario path.
std::string write_case(const json& doc, const std::string& trace_text = "",
                       const std::string& trace_name = "t.jsonl") {
  // The directories are removed when the test process exits.
  static struct Made {
    std::vector<std::filesystem::path> dirs;
    ~Made() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  } made;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("faultline-trace-test-" + std::to_string(::getpid()) + "-" +
                    std::to_string(made.dirs.size()));
  made.dirs.push_back(dir);
  std::filesystem::create_directories(dir / "sub");
  if (!trace_text.empty()) std::ofstream(dir / "sub" / trace_name) << trace_text;
  const auto path = dir / "scenario.json";
  std::ofstream(path) << doc.dump(2);
  return path.string();
}

std::string load_error(const std::string& path) {
  const Registry r = policies::builtin_registry();
  try {
    scenarios::load_scenario(path, {}, r);
  } catch (const scenarios::ScenarioError& e) {
    return e.what();
  }
  return "loaded";
}

const char* kSmallTrace =
    "{\"meta\":{\"version\":1,\"fleet_nodes\":32}}\n"
    "{\"time_s\":3600,\"node\":\"a\",\"event\":\"fault_start\",\"class\":\"GPU\"}\n"
    "{\"time_s\":7200,\"node\":\"a\",\"event\":\"fault_end\",\"class\":\"GPU\"}\n"
    "{\"time_s\":86400,\"node\":\"b\",\"event\":\"fault\",\"class\":\"NIC\",\"duration_s\":60}\n"
    "{\"time_s\":172800,\"node\":\"c\",\"event\":\"fault\",\"class\":\"ToR\",\"scope\":\"switch\","
    "\"scope_id\":\"t1\"}\n";

TEST(ScenarioTrace, LoadsRelativeToTheScenarioAndFeedsFaultStream) {
  json doc = base();
  doc["faults"] = {{"categories", json::array({{{"name", "code"},
                                                {"class", "manual"},
                                                {"scope", "job"},
                                                {"symptom", "manual"},
                                                {"rate_per_job_day", 0.5}}})},
                   {"trace",
                    {{"file", "sub/t.jsonl"},
                     {"mode", "replay"},
                     {"time_scale", 2},
                     {"extra_slots", "fault_free"}}}};  // 32 fleet nodes, 64 machines
  const std::string path = write_case(doc, kSmallTrace);
  const Registry r = policies::builtin_registry();
  const scenarios::Scenario sc = scenarios::load_scenario(path, {}, r);
  ASSERT_TRUE(sc.trace);
  EXPECT_EQ(sc.trace->first_category, 1);
  // Identity mapping: rack_outage, gpu, nic, tor after the modelled category.
  ASSERT_EQ(sc.faults.size(), 5u);
  EXPECT_EQ(sc.faults[1].name, "rack_outage");
  EXPECT_EQ(sc.faults[1].scope, scenarios::FaultScope::kRack);
  EXPECT_EQ(sc.faults[2].name, "gpu");
  EXPECT_DOUBLE_EQ(sc.faults[2].rate_per_machine_day, 0);
  EXPECT_EQ(sc.trace->timelines->nodes.size(), 32u);
  const auto scripted = sim::trace_arrivals(sc, 0);
  ASSERT_EQ(scripted.size(), 3u);
  EXPECT_EQ(scripted[0].at_ns, 7200'000'000'000);  // time_scale 2
  EXPECT_EQ(scripted[0].category, 2);
  EXPECT_EQ(scripted[0].slot, 0);
  EXPECT_EQ(scripted[1].slot, 1);
  EXPECT_EQ(scripted[2].category, 1);
  EXPECT_EQ(scripted[2].slot, 0);  // node c is slot 2: its rack starts at slot 0
  // FaultStream merges them with the modelled manual restarts, in time order.
  sim::FaultStream fs(sc.faults, sc.cluster.machines, sc.cluster.rack_size, sc.seed, 0, scripted);
  std::int64_t last = -1;
  int from_trace = 0, modelled = 0;
  while (fs.peek_time() < static_cast<std::int64_t>(30 * 86400e9)) {
    const sim::FaultArrival a = fs.next();
    EXPECT_GE(a.at_ns, last);
    last = a.at_ns;
    (a.category >= 1 ? from_trace : modelled)++;
  }
  EXPECT_EQ(from_trace, 3);
  EXPECT_GT(modelled, 5);
}

TEST(ScenarioTrace, ErrorsAreOneLineWithTheJsonPath) {
  auto with_trace = [](json trace) {
    json doc = base();
    doc["faults"] = {{"trace", trace}};
    return doc;
  };
  auto tail = [](const std::string& s) { return s.substr(s.find(": $") + 2); };
  EXPECT_EQ(tail(load_error(write_case(with_trace({{"mode", "replay"}})))),
            "$.faults.trace.file: required string is missing");
  EXPECT_EQ(tail(load_error(write_case(with_trace({{"file", "sub/t.jsonl"}, {"mode", "shuffle"}}),
                                       kSmallTrace))),
            "$.faults.trace.mode: expected one of replay|bootstrap, got \"shuffle\"");
  EXPECT_EQ(tail(load_error(write_case(
                with_trace({{"file", "sub/t.jsonl"}, {"node_order", "random"}}), kSmallTrace))),
            "$.faults.trace.node_order: only with \"mode\": \"replay\" (bootstrap draws nodes at "
            "random)");
  EXPECT_EQ(tail(load_error(
                write_case(with_trace({{"file", "sub/t.jsonl"}, {"time_scale", 0}}), kSmallTrace))),
            "$.faults.trace.time_scale: expected a number in [1e-06, 1e+06], got 0");
  EXPECT_EQ(tail(load_error(
                write_case(with_trace({{"file", "sub/t.jsonl"}, {"speed", 1}}), kSmallTrace))),
            "$.faults.trace.speed: unknown key; expected one of: columns, extra_slots, file, "
            "fleet_nodes, format, mapping, mode, "
            "node_order, start_day, strict, time_scale");
  const std::string missing = load_error(write_case(with_trace({{"file", "sub/none.jsonl"}})));
  EXPECT_NE(missing.find("$.faults.trace.file: "), std::string::npos) << missing;
  EXPECT_NE(missing.find("sub/none.jsonl: cannot open file"), std::string::npos) << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos);
  // A bad record: strict by default, named with its line.
  const std::string bad = load_error(write_case(
      with_trace({{"file", "sub/t.jsonl"}}),
      std::string(kSmallTrace) + "{\"time_s\":\"x\",\"node\":\"a\",\"event\":\"fault\"}\n"));
  EXPECT_NE(bad.find("$.faults.trace.file: "), std::string::npos) << bad;
  EXPECT_NE(bad.find("t.jsonl:6: time_s: expected a number, got \"x\""), std::string::npos) << bad;
  EXPECT_EQ(load_error(write_case(with_trace({{"file", "sub/t.jsonl"}, {"strict", false}}),
                                  std::string(kSmallTrace) +
                                      "{\"time_s\":\"x\",\"node\":\"a\",\"event\":\"fault\"}\n")),
            "loaded");
  EXPECT_EQ(
      tail(load_error(
          write_case(with_trace({{"file", "sub/t.jsonl"}, {"fleet_nodes", 2}}), kSmallTrace))),
      "$.faults.trace.fleet_nodes: fleet of 2 nodes is smaller than the 3 nodes in the trace");
  // The mapping's categories are checked like the scenario's own.
  json map = {{"categories", json::array({{{"name", "g"}, {"symptom", "sparks"}},
                                          {{"name", "r"}, {"scope", "rack"}}})},
              {"rules", json::array({{{"scope", "switch"}, {"category", "r"}}})},
              {"default", "g"}};
  const std::string p =
      write_case(with_trace({{"file", "sub/t.jsonl"}, {"mapping", "sub/map.json"}}), kSmallTrace);
  std::ofstream(std::filesystem::path(p).parent_path() / "sub" / "map.json") << map.dump();
  const std::string e = load_error(p);
  EXPECT_NE(e.find("map.json: $.categories[0].symptom: expected one of "
                   "crash|hang|slowdown|nan|manual, got \"sparks\""),
            std::string::npos)
      << e;
  // A switch-scope event needs a rack-scope category.
  map = {{"categories", json::array({{{"name", "g"}}})}, {"default", "g"}};
  std::ofstream(std::filesystem::path(p).parent_path() / "sub" / "map.json") << map.dump();
  const std::string s = load_error(p);
  EXPECT_NE(s.find("$.faults.trace.mapping: "), std::string::npos) << s;
  EXPECT_NE(s.find("narrower scope (first at line 5)"), std::string::npos) << s;
  // Without a trace, categories stay required.
  json doc = base();
  EXPECT_EQ(tail(load_error(write_case(doc))),
            "$.faults.categories: expected an array of fault categories");
}

// Issue 18: replaying a trace of fewer nodes than the job has machines left the slots
// beyond the trace's fleet without a single fault, silently. Now the load refuses unless
// faults.trace.extra_slots says what those slots get: "bootstrap" (a randomly drawn
// fleet node's history each, as in mode bootstrap) or "fault_free" (explicitly none).
TEST(ScenarioTrace, ReplayOntoMoreMachinesThanTraceNodesNeverLeavesSlotsSilentlyFaultFree) {
  // A fleet of 4 nodes, each failing every 12 hours over 30 days.
  std::string trace = "{\"meta\":{\"version\":1,\"fleet_nodes\":4}}\n";
  for (int k = 0; k < 60; ++k)
    for (int n = 0; n < 4; ++n)
      trace += "{\"time_s\":" + std::to_string(k * 43200 + n * 600 + 300) + ",\"node\":\"n" +
               std::to_string(n) + "\",\"event\":\"fault\",\"class\":\"GPU\",\"duration_s\":60}\n";
  auto scenario = [&](json extra) {
    json doc = base();  // 64 machines, 30 days
    json t = {{"file", "sub/t.jsonl"}, {"mode", "replay"}};
    t.update(extra);
    doc["faults"] = {{"trace", t}};
    return write_case(doc, trace);
  };
  const Registry r = policies::builtin_registry();
  // No rule for the 60 slots beyond the fleet: a one-line error that says what to do.
  const std::string e = load_error(scenario(json::object()));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("scenario.json: $.faults.trace.mode: "), std::string::npos) << e;
  for (const char* part :
       {"t.jsonl", "4 nodes", "64 machines", "60 slots", "\"extra_slots\": \"bootstrap\"",
        "\"fault_free\"", "\"mode\": \"bootstrap\""})
    EXPECT_NE(e.find(part), std::string::npos) << part << " not in: " << e;
  // Only in replay mode.
  const std::string b = load_error(scenario({{"mode", "bootstrap"}, {"extra_slots", "bootstrap"}}));
  EXPECT_NE(b.find("$.faults.trace.extra_slots: only with \"mode\": \"replay\""), std::string::npos)
      << b;
  EXPECT_NE(load_error(scenario({{"extra_slots", "spread"}}))
                .find("$.faults.trace.extra_slots: expected one of"),
            std::string::npos);
  // fault_free: the explicit opt-in to the old behaviour, trace nodes on slots 0..3 only.
  const scenarios::Scenario ff =
      scenarios::load_scenario(scenario({{"extra_slots", "fault_free"}}), {}, r);
  const auto ffa = sim::trace_arrivals(ff, 0);
  EXPECT_EQ(ffa.size(), 240u);
  for (const auto& a : ffa) EXPECT_LT(a.slot, 4);
  // bootstrap: every slot gets faults; slots 0..3 keep exactly the replayed ones; the
  // extra slots fail at the fleet's per-node rate (2 a day, 60 in 30 days).
  const scenarios::Scenario bs =
      scenarios::load_scenario(scenario({{"extra_slots", "bootstrap"}}), {}, r);
  for (std::uint64_t rep = 0; rep < 3; ++rep) {
    const auto a = sim::trace_arrivals(bs, rep);
    std::vector<int> per_slot(64, 0);
    for (const auto& x : a) ++per_slot[x.slot];
    for (int s = 0; s < 64; ++s) {
      EXPECT_GE(per_slot[s], 55) << "slot " << s << " replica " << rep;
      EXPECT_LE(per_slot[s], 65) << "slot " << s << " replica " << rep;
    }
    std::vector<sim::FaultArrival> first4;
    for (const auto& x : a)
      if (x.slot < 4) first4.push_back(x);
    const auto replayed = sim::trace_arrivals(ff, rep);
    ASSERT_EQ(first4.size(), replayed.size());
    for (std::size_t i = 0; i < first4.size(); ++i) {
      EXPECT_EQ(first4[i].at_ns, replayed[i].at_ns);
      EXPECT_EQ(first4[i].slot, replayed[i].slot);
    }
    const auto again = sim::trace_arrivals(bs, rep);
    ASSERT_EQ(again.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(again[i].at_ns, a[i].at_ns);
  }
  // A trace as large as the job needs no rule.
  EXPECT_EQ(scenarios::load_scenario(scenario(json::object()),
                                     {"cluster.machines=4", "cluster.rack_size=4", "job.dp=1"}, r)
                .cluster.machines,
            4);
}

TEST(ScenarioTrace, ShippedBootstrapScenarioLoadsAndIsDeterministic) {
  FAULTLINE_REQUIRE_SHARED(kHbd);
  const Registry r = policies::builtin_registry();
  // The trace where $FAULTLINE_TRACES puts it (shared_data.h), after any other --set.
  auto with = [](std::vector<std::string> sets) {
    for (const std::string& s : ::faultline::testing::shipped_trace_sets(kHbd)) sets.push_back(s);
    return sets;
  };
  const scenarios::Scenario sc =
      scenarios::load_scenario(kScenarios + "infinitehbd-bootstrap-1200.json", with({}), r);
  ASSERT_TRUE(sc.trace);
  EXPECT_EQ(sc.trace->mode, "bootstrap");
  EXPECT_EQ(sc.trace->timelines->nodes.size(), 400u);
  EXPECT_EQ(sc.trace->timelines->faults, 584u);
  double total = 0;
  for (std::uint64_t rep = 0; rep < 40; ++rep)
    total += static_cast<double>(sim::trace_arrivals(sc, rep).size());
  // 4.2308 per 1,000 node-days x 1,200 machines x 90 days = 457 per replica.
  EXPECT_NEAR(total / 40, 1200 * 90 * 584 / (400 * 345.0843), 25);
  const auto a = sim::trace_arrivals(sc, 3), b = sim::trace_arrivals(sc, 3);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at_ns, b[i].at_ns);
    EXPECT_EQ(a[i].slot, b[i].slot);
  }
  // Replay through --set: the first 90 days of the trace on the first 400 slots, the other
  // 800 fault-free by explicit choice (without one the load refuses).
  EXPECT_THROW(scenarios::load_scenario(kScenarios + "infinitehbd-bootstrap-1200.json",
                                        with({"faults.trace.mode=replay"}), r),
               scenarios::ScenarioError);
  const scenarios::Scenario rp = scenarios::load_scenario(
      kScenarios + "infinitehbd-bootstrap-1200.json",
      with({"faults.trace.mode=replay", "faults.trace.extra_slots=fault_free"}), r);
  const auto rr = sim::trace_arrivals(rp, 0);
  EXPECT_GT(rr.size(), 100u);
  for (const auto& x : rr) EXPECT_LT(x.slot, 400);
}

TEST(ScenarioTrace, FittedAndPublishedModelsLoadAsScenarioFaults) {
  const Registry r = policies::builtin_registry();
  auto load_with = [&](const nlohmann::ordered_json& faults) {
    json doc = base();
    doc["faults"] = json::parse(faults.dump());
    // A model names the inspection that sees each category (alert), which only a stack
    // that runs inspections or stop-time tests reads (requeue's would be refused).
    doc["policy"] = {{"stack", "byterobust"}};
    return scenarios::parse_scenario(doc.dump(), "model.json", {}, r);
  };
  // The shipped Table 1 model is the mix at the dense job's calibration.
  const auto mix = traces::published_mix("byterobust-table1", 1.9444, 1200);
  std::ifstream f(FAULTLINE_SOURCE_DIR "/traces/models/byterobust-table1.json");
  const json shipped = json::parse(f);
  EXPECT_EQ(shipped, json::parse(mix.dump()));
  const scenarios::Scenario s = load_with(mix);
  ASSERT_EQ(s.faults.size(), 17u);
  double per_day = 0;
  for (const auto& c : s.faults)
    per_day += c.rate_per_machine_day * 64;  // job rates are spread over 64 machines
  EXPECT_NEAR(per_day,
              1.9444 * 64 / 1200 * (1 - (1104 + 128 + 9582) / 55365.0) +
                  1.9444 * (1104 + 128 + 9582) / 55365.0,
              1e-3);
  const auto scaled = traces::published_mix("byterobust-table1", 10, 100);
  EXPECT_NEAR(scaled["categories"][0]["rate_per_machine_day"].get<double>(),
              10 * 19968 / 55365.0 / 100, 2e-4 * 0.036);
  EXPECT_THROW(traces::published_mix("nope", 1, 1), traces::TraceError);

  // Llama 3's Table 5 at its published rate loads as well, and agrees with
  // scenarios/llama3-16k.json, written apart from it, which groups the same 18 rows into
  // 11 categories: each group's rates add up to the scenario's (to its 4 significant
  // digits), and a row alone in its group has the scenario's fields.
  const auto llama = traces::published_mix("llama3-405b", NAN, 2048);
  EXPECT_EQ(load_with(llama).faults.size(), 18u);
  std::ifstream lf(kScenarios + "llama3-16k.json");
  const json scenario = json::parse(lf)["faults"]["categories"];
  const std::map<std::string, std::string> group = {{"gpu_sram", "gpu_other"},
                                                    {"gpu_system_processor", "gpu_other"},
                                                    {"gpu_thermal", "gpu_other"},
                                                    {"host_ssd", "host_hardware"},
                                                    {"host_power_supply", "host_hardware"},
                                                    {"host_chassis", "host_hardware"},
                                                    {"host_io_board", "host_hardware"},
                                                    {"host_cpu", "host_hardware"},
                                                    {"host_memory", "host_hardware"}};
  std::map<std::string, double> summed;
  for (const auto& c : llama["categories"]) {
    const std::string name = c["name"];
    const auto g = group.find(name);
    const std::string in = g == group.end() ? name : g->second;
    const char* key = c.contains("rate_per_job_day") ? "rate_per_job_day" : "rate_per_machine_day";
    summed[in] += c[key].get<double>();
    const auto sc = std::find_if(scenario.begin(), scenario.end(),
                                 [&](const json& x) { return x["name"] == in; });
    ASSERT_NE(sc, scenario.end()) << in;
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (it.key() == "rate_per_job_day" || it.key() == "rate_per_machine_day") continue;
      if (g != group.end() && it.key() == "signature") continue;  // one line per row
      if (it.key() == "name") continue;
      ASSERT_TRUE(sc->contains(it.key())) << name << "." << it.key();
      EXPECT_EQ(json::parse(it.value().dump()), (*sc)[it.key()]) << name << "." << it.key();
    }
  }
  for (const auto& c : scenario) {
    if (c["name"] == "planned") continue;  // Table 5 counts unexpected interruptions only
    const double want = c.contains("rate_per_job_day") ? c["rate_per_job_day"].get<double>()
                                                       : c["rate_per_machine_day"].get<double>();
    EXPECT_NEAR(summed[c["name"].get<std::string>()], want, 1e-3 * want) << c["name"];
  }
  EXPECT_EQ(summed.size(), scenario.size() - 1);

  FAULTLINE_REQUIRE_SHARED(kHbd);
  traces::ReadResult rr = traces::read_trace_file(kHbd, traces::Format::kInfiniteHbd, {});
  rr.trace.sort_by_time();
  const auto map =
      traces::load_category_map(FAULTLINE_SOURCE_DIR "/traces/mappings/infinitehbd.json");
  const traces::FaultModel fm = traces::fault_model(rr.trace, map, {});
  ASSERT_TRUE(fm.ok()) << fm.refused.front();
  const scenarios::Scenario m = load_with(fm.model);
  ASSERT_EQ(m.faults.size(), map.names.size());
  double rate = 0;
  for (const auto& c : m.faults) rate += c.rate_per_machine_day;
  EXPECT_NEAR(rate * 1000, 4.2308, 0.01);
  EXPECT_EQ(m.faults[1].name, "gpu_fatal");
  EXPECT_LT(m.faults[1].weibull_shape, 1);  // GPU faults cluster on nodes
  // Categories whose gaps reject the exponential and a lognormal fits better than a Weibull
  // carry its sigma, and the model loads as written (issue 36: a fitted model usable as it
  // is).
  int lognormal = 0;
  for (const auto& c : m.faults)
    if (c.lognormal_sigma > 0) {
      ++lognormal;
      EXPECT_EQ(c.weibull_shape, 1) << c.name;
    }
  EXPECT_GE(lognormal, 1);
  const traces::FaultModel identity =
      traces::fault_model(rr.trace, traces::identity_category_map(rr.trace), {});
  ASSERT_TRUE(identity.ok()) << identity.refused.front();
  EXPECT_EQ(load_with(identity.model).faults.size(), 21u);
}

// The ranges `trace fit -o` checks a fault model against (traces/model.h; traces/ may not
// include the loader) are the loader's own, as it records them while it parses.
TEST(ScenarioTrace, FaultModelRangesAreTheLoaders) {
  std::map<std::string, scenarios::FieldInfo> fields;
  for (const auto& f : scenarios::scenario_fields(policies::builtin_registry())) fields[f.path] = f;
  for (const traces::SchemaRange* r : {&traces::kRateRange, &traces::kWeibullShapeRange,
                                       &traces::kLognormalSigmaRange, &traces::kRepairRange}) {
    const auto it = fields.find(std::string("faults.categories[].") + r->key);
    ASSERT_NE(it, fields.end()) << r->key;
    EXPECT_TRUE(it->second.has_range) << r->key;
    EXPECT_EQ(it->second.min, r->lo) << r->key;
    EXPECT_EQ(it->second.max, r->hi) << r->key;
  }
  // lognormal_sigma's open end: the loader refuses an explicit 0 (0 means "not lognormal").
  json doc = base();
  doc["faults"] = json::parse(R"({"categories": [{"name": "a", "rate_per_machine_day": 0.001,
                                                  "lognormal_sigma": 0}]})");
  EXPECT_THROW(scenarios::parse_scenario(doc.dump(), "s.json", {}, policies::builtin_registry()),
               scenarios::ScenarioError);
  EXPECT_TRUE(traces::kLognormalSigmaRange.lo_open);
  EXPECT_FALSE(traces::kLognormalSigmaRange.contains(0));
  EXPECT_TRUE(traces::kLognormalSigmaRange.contains(10));
  EXPECT_FALSE(traces::kLognormalSigmaRange.contains(10.1));
  EXPECT_EQ(traces::kLognormalSigmaRange.text(), "(0, 10]");
  EXPECT_EQ(traces::kRepairRange.text(), "[0, 100000]");
}

}  // namespace
}  // namespace faultline
