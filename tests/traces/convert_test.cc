// Format conversion: canonical JSON Lines <-> CSV is lossless; InfiniteHBD and Oobleck
// survive a trip through the canonical form.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include "tests/support/shared_data.h"
#include "traces/readers.h"
#include "traces/stats.h"
#include "traces/writers.h"

namespace faultline::traces {
namespace {

// Every observable property of a trace, as comparable values.
struct Flat {
  std::vector<std::tuple<double, double, std::string, std::string, std::string, std::string, int,
                         int, std::string, Attributes>>
      events;
  int fleet = 0;
  std::string origin;
  std::optional<std::pair<double, double>> window;
  Pairing pairing = Pairing::kByCategory;
  bool operator==(const Flat&) const = default;
};

Flat flatten(const Trace& t) {
  Flat f;
  for (const Event& e : t.events) {
    const Category& c = t.categories[static_cast<std::size_t>(e.category)];
    f.events.emplace_back(
        e.time_s, std::isnan(e.duration_s) ? -1.0 : e.duration_s,
        t.nodes[static_cast<std::size_t>(e.node)], c.level, c.cls, c.desc, static_cast<int>(e.kind),
        static_cast<int>(e.scope),
        e.group >= 0 ? t.groups[static_cast<std::size_t>(e.group)] : std::string("<none>"),
        e.attrs >= 0 ? t.attrs[static_cast<std::size_t>(e.attrs)] : Attributes{});
  }
  f.fleet = t.fleet_nodes;
  f.origin = t.origin;
  f.window = t.window;
  f.pairing = t.pairing;
  return f;
}

Trace read_ok(const std::string& text, Format f) {
  ReadOptions o;
  o.strict = true;
  ReadResult r = read_trace_text(text, f, "rt", o);
  EXPECT_TRUE(r.ok()) << r.error << r.first_issue;
  return std::move(r.trace);
}

// A trace that uses every field, with awkward text and numbers.
Trace awkward() {
  Trace t;
  t.fleet_nodes = 12;
  t.origin = "2024-03-30T00:00:00Z \"quoted\"";
  t.window = std::make_pair(-1.5, 1e7 + 0.1);
  t.pairing = Pairing::kLifo;
  auto add = [&](double time, const std::string& node, EventKind k, Category c, double dur, Scope s,
                 const std::string& group, Attributes a) {
    Event e;
    e.time_s = time;
    e.node = t.intern_node(node);
    e.kind = k;
    e.category = t.intern_category(c.level, c.cls, c.desc);
    e.duration_s = dur;
    e.scope = s;
    e.group = group.empty() ? -1 : t.intern_group(group);
    e.attrs = a.empty() ? -1 : t.add_attributes(std::move(a));
    t.events.push_back(e);
  };
  add(0.1 + 0.2, "n,1", EventKind::kFaultStart,
      {"Hardware Failure", "GPU", "GPU DBE(Double Bit ECC) > Threshold"}, NAN, Scope::kNode, "",
      {});
  add(1e-300, "  padded  ", EventKind::kFault, {"", "", ""}, 3.14159, Scope::kRack, "tor,\"7\"",
      {{"ticket", "T-1"},
       {"note", "line1\nline2"},
       {"", "empty key"},
       {"utf8", "caf\xc3\xa9 \xe2\x9c\x93"}});
  add(336571.19999999995, "#hash", EventKind::kFaultEnd,
      {"Hardware Failure", "GPU", "GPU DBE(Double Bit ECC) > Threshold"}, NAN, Scope::kNode, "",
      {});
  add(5e6, "n2", EventKind::kNodeJoin, {"a\tb", "c\"d", "e\\f"}, NAN, Scope::kJob, "", {{"k", ""}});
  add(-0.0, "n3", EventKind::kFault, {"L", "C", "D"}, NAN, Scope::kSwitch, "sw", {});
  add(123456789.123456789, "n3", EventKind::kFault, {"L", "C", "D"}, 0, Scope::kNode, "", {});
  return t;
}

TEST(Convert, CanonicalJsonlAndCsvRoundTripLosslessly) {
  const Trace t = awkward();
  const Flat original = flatten(t);
  const Trace from_jsonl = read_ok(write_trace(t, Format::kJsonl).text, Format::kJsonl);
  EXPECT_TRUE(flatten(from_jsonl) == original);
  const Trace from_csv = read_ok(write_trace(from_jsonl, Format::kCsv).text, Format::kCsv);
  EXPECT_TRUE(flatten(from_csv) == original);
  const Trace back = read_ok(write_trace(from_csv, Format::kJsonl).text, Format::kJsonl);
  EXPECT_TRUE(flatten(back) == original);
  // And the text itself is stable.
  EXPECT_EQ(write_trace(back, Format::kJsonl).text, write_trace(t, Format::kJsonl).text);
  EXPECT_EQ(write_trace(from_csv, Format::kCsv).text, write_trace(t, Format::kCsv).text);
}

TEST(Convert, RealTracesThroughCanonicalForms) {
  const std::string dir = ::faultline::testing::traces_dir() + "/";
  FAULTLINE_REQUIRE_SHARED(dir + "infinitehbd/fault_trace.json");
  FAULTLINE_REQUIRE_SHARED(dir + "oobleck/p3-trace.csv");
  ReadResult hbd = read_trace_file(dir + "infinitehbd/fault_trace.json", Format::kInfiniteHbd, {});
  ASSERT_TRUE(hbd.ok());
  const Flat original = flatten(hbd.trace);
  const Trace csv = read_ok(write_trace(hbd.trace, Format::kCsv).text, Format::kCsv);
  EXPECT_TRUE(flatten(csv) == original);
  const Trace jsonl = read_ok(write_trace(csv, Format::kJsonl).text, Format::kJsonl);
  EXPECT_TRUE(flatten(jsonl) == original);
  // Back to the InfiniteHBD layout: same statistics.
  const WriteResult w = write_trace(jsonl, Format::kInfiniteHbd);
  EXPECT_TRUE(w.notes.empty());
  const Trace again = read_ok(w.text, Format::kInfiniteHbd);
  const TraceStats a = compute_stats(hbd.trace), b = compute_stats(again);
  EXPECT_EQ(a.faults, b.faults);
  EXPECT_EQ(a.nodes_with_faults, b.nodes_with_faults);
  EXPECT_NEAR(a.span_days, b.span_days, 1e-9);
  EXPECT_NEAR(a.repair_h.median, b.repair_h.median, 1e-6);

  ReadResult p3 = read_trace_file(dir + "oobleck/p3-trace.csv", Format::kOobleck, {});
  ASSERT_TRUE(p3.ok());
  const WriteResult o = write_trace(
      read_ok(write_trace(p3.trace, Format::kJsonl).text, Format::kJsonl), Format::kOobleck);
  EXPECT_TRUE(o.notes.empty());
  std::string original_text;
  {
    std::ifstream f(dir + "oobleck/p3-trace.csv");
    std::stringstream ss;
    ss << f.rdbuf();
    original_text = ss.str();
  }
  // The file has CRLF line ends; the writer writes LF.
  original_text.erase(std::remove(original_text.begin(), original_text.end(), '\r'),
                      original_text.end());
  EXPECT_EQ(o.text, original_text);
}

TEST(Convert, LossyTargetsSayWhatTheyDrop) {
  const WriteResult w = write_trace(awkward(), Format::kInfiniteHbd);
  EXPECT_FALSE(w.notes.empty());
  const Trace back = read_ok(w.text, Format::kInfiniteHbd);
  // The whole fault with a duration becomes a start and an end; the join is dropped.
  EXPECT_EQ(back.events.size(), 1u + 2u + 1u + 1u + 2u);
}

}  // namespace
}  // namespace faultline::traces
