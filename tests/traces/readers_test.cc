// Every reader on good records, on bad ones (the reporter gets line, field and reason,
// and reading goes on), in strict mode (it stops), and on garbage (no crash).
#include "traces/readers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/support/shared_data.h"
#include "traces/config.h"
#include "traces/timefmt.h"

namespace faultline::traces {
namespace {

struct Read {
  ReadResult r;
  CollectingReporter rep;
};

// Reads `text`; the reporter is kept next to the result.
std::unique_ptr<Read> read(std::string_view text, Format f, bool strict = false,
                           const ColumnMap* cols = nullptr) {
  auto out = std::make_unique<Read>();
  ReadOptions o;
  o.strict = strict;
  o.reporter = &out->rep;
  out->r = read_trace_text(text, f, "t", o, cols);
  return out;
}

TEST(InfiniteHbdReader, ReadsRecordsWithNestedCategory) {
  const char* text = R"([
    {"node_id": "a", "event_time": 1.5, "event_type": "fault_start",
     "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "GPU Lost"}},
    {"node_id": "a", "event_time": 2, "event_type": "fault_end",
     "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "GPU Lost"}}
  ])";
  auto x = read(text, Format::kInfiniteHbd);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  EXPECT_EQ(x->r.issues, 0u);
  const Trace& t = x->r.trace;
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_DOUBLE_EQ(t.events[0].time_s, 1.5 * 86400);
  EXPECT_EQ(t.events[0].kind, EventKind::kFaultStart);
  EXPECT_EQ(t.events[1].kind, EventKind::kFaultEnd);
  EXPECT_EQ(t.categories[t.events[0].category], (Category{"Hardware Failure", "GPU", "GPU Lost"}));
  EXPECT_EQ(t.events[0].line, 2u);
  EXPECT_EQ(t.fleet_nodes, 400);  // the release's declared sample
}

TEST(InfiniteHbdReader, ReportsBadRecordsAndGoesOn) {
  const char* text = R"([
    {"node_id": "a", "event_time": "soon", "event_type": "fault_start", "fault_type": {"Class": "GPU"}},
    {"node_id": "b", "event_time": 1, "event_type": "fault_begin", "fault_type": {"Class": "GPU"}},
    {"event_time": 1, "event_type": "fault_start", "fault_type": {"Class": "GPU"}},
    {"node_id": "c", "event_time": 1, "event_type": "fault_start" "fault_type": {}},
    {"node_id": "d", "event_time": 2, "event_type": "fault_start", "fault_type": {"Class": "NIC"}}
  ])";
  auto x = read(text, Format::kInfiniteHbd);
  ASSERT_TRUE(x->r.ok());
  EXPECT_EQ(x->r.records, 1u);
  EXPECT_EQ(x->r.skipped, 4u);
  const auto& is = x->rep.issues();
  ASSERT_EQ(is.size(), 4u);
  EXPECT_EQ(is[0].line, 2u);
  EXPECT_EQ(is[0].field, "event_time");
  EXPECT_NE(is[0].reason.find("expected a number"), std::string::npos) << is[0].reason;
  EXPECT_EQ(is[1].line, 3u);
  EXPECT_EQ(is[1].field, "event_type");
  EXPECT_NE(is[1].reason.find("fault_begin"), std::string::npos);
  EXPECT_EQ(is[2].field, "node_id");
  EXPECT_EQ(is[3].line, 5u);
  EXPECT_NE(is[3].reason.find("invalid JSON"), std::string::npos);
  EXPECT_EQ(x->r.trace.nodes.at(0), "d");
  EXPECT_EQ(is[0].text(), "t:2: event_time: expected a number, got \"soon\"");
}

TEST(InfiniteHbdReader, StrictStopsAtTheFirstBadRecord) {
  const char* text = R"([
    {"node_id": "a", "event_time": 1, "event_type": "fault_start", "fault_type": {}},
    {"node_id": "b", "event_time": -1e300, "event_type": "fault_start", "fault_type": {}},
    {"node_id": "c", "event_time": 1, "event_type": "fault_start", "fault_type": {}}
  ])";
  auto x = read(text, Format::kInfiniteHbd, true);
  EXPECT_TRUE(x->r.stopped);
  EXPECT_FALSE(x->r.ok());
  EXPECT_EQ(x->r.records, 1u);
  ASSERT_EQ(x->rep.count(), 1u);
  EXPECT_EQ(x->rep.issues()[0].line, 3u);
  EXPECT_NE(x->r.first_issue.find("out of range"), std::string::npos) << x->r.first_issue;
}

TEST(OobleckReader, RemovesAreFaultsAddsAreJoinsOrRepairs) {
  auto x =
      read("0,add,node1\n0,add,node2\n60000,remove,node1\n120000,add,node1\n180000,remove,node2\n",
           Format::kOobleck);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  const Trace& t = x->r.trace;
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].kind, EventKind::kNodeJoin);
  EXPECT_EQ(t.events[2].kind, EventKind::kFaultStart);
  EXPECT_DOUBLE_EQ(t.events[2].time_s, 60);
  EXPECT_EQ(t.events[3].kind, EventKind::kFaultEnd);  // node1 came back
  EXPECT_EQ(t.categories[t.events[2].category].cls, "Preemption");
  const PairingResult p = pair_faults(t);
  ASSERT_EQ(p.faults.size(), 2u);
  EXPECT_DOUBLE_EQ(p.faults[0].duration_s(), 60);
  EXPECT_TRUE(p.faults[1].open());
}

TEST(OobleckReader, ReportsBadRows) {
  auto x = read(
      "0,add,node1\nabc,remove,node1\n5,evict,node1\n6,remove\n\"7,remove,node2\n8,remove,node3\n",
      Format::kOobleck);
  ASSERT_TRUE(x->r.ok());
  EXPECT_EQ(x->r.records, 2u);
  const auto& is = x->rep.issues();
  ASSERT_EQ(is.size(), 4u);
  EXPECT_EQ(is[0].line, 2u);
  EXPECT_EQ(is[0].field, "column 0");
  EXPECT_EQ(is[1].line, 3u);
  EXPECT_EQ(is[1].field, "column 1");
  EXPECT_NE(is[1].reason.find("remove|add"), std::string::npos) << is[1].reason;
  EXPECT_EQ(is[2].line, 4u);
  EXPECT_EQ(is[2].field, "column 2");
  EXPECT_EQ(is[3].line, 5u);
  EXPECT_NE(is[3].reason.find("unterminated"), std::string::npos);
  EXPECT_EQ(x->r.trace.events.back().line, 6u);
}

TEST(CanonicalJsonl, ReadsEveryField) {
  const char* text =
      "{\"meta\":{\"version\":1,\"fleet_nodes\":50,\"origin\":\"2024-03-30T00:00:00Z\",\"pairing\":"
      "\"fifo\"}}\n"
      "{\"time_s\":10,\"node\":\"n1\",\"event\":\"fault\",\"level\":\"L\",\"class\":\"C\",\"desc\":"
      "\"D\","
      "\"duration_s\":3600,\"scope\":\"rack\",\"scope_id\":\"tor-7\",\"attrs\":{\"ticket\":\"T-1\","
      "\"n\":3}}\n"
      "\n"
      "{\"time_s\":20,\"node\":\"n2\",\"event\":\"node_join\"}\n";
  auto x = read(text, Format::kJsonl);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  EXPECT_EQ(x->r.issues, 0u);
  const Trace& t = x->r.trace;
  EXPECT_EQ(t.fleet_nodes, 50);
  EXPECT_EQ(t.origin, "2024-03-30T00:00:00Z");
  EXPECT_EQ(t.pairing, Pairing::kFifo);
  ASSERT_EQ(t.events.size(), 2u);
  const Event& e = t.events[0];
  EXPECT_EQ(e.kind, EventKind::kFault);
  EXPECT_DOUBLE_EQ(e.duration_s, 3600);
  EXPECT_EQ(e.scope, Scope::kRack);
  EXPECT_EQ(t.groups[e.group], "tor-7");
  ASSERT_GE(e.attrs, 0);
  EXPECT_EQ(t.attrs[e.attrs], (Attributes{{"ticket", "T-1"}, {"n", "3"}}));
  EXPECT_EQ(t.events[1].line, 4u);
}

// \u escapes in a node name: a BMP character, a surrogate pair joined into one, a lone high
// surrogate (alone, or before a \u escape that is not its low half) and a lone low one as
// U+FFFD; bad hex digits are an error naming the escape.
TEST(CanonicalJsonl, DecodesUnicodeEscapes) {
  const char* text =
      "{\"time_s\":1,\"node\":\"a\\u00e9\",\"event\":\"fault\"}\n"
      "{\"time_s\":2,\"node\":\"b\\ud83d\\ude00\",\"event\":\"fault\"}\n"
      "{\"time_s\":3,\"node\":\"c\\ud800x\",\"event\":\"fault\"}\n"
      "{\"time_s\":4,\"node\":\"d\\ud800\\u0041\",\"event\":\"fault\"}\n"
      "{\"time_s\":5,\"node\":\"e\\udc00\",\"event\":\"fault\"}\n"
      "{\"time_s\":6,\"node\":\"f\\ud800\\udbff\",\"event\":\"fault\"}\n";
  auto x = read(text, Format::kJsonl);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  const Trace& t = x->r.trace;
  ASSERT_EQ(t.events.size(), 6u);
  const std::string fffd = "\xef\xbf\xbd";
  const std::string want[] = {"a\xc3\xa9",      "b\xf0\x9f\x98\x80", "c" + fffd + "x",
                              "d" + fffd + "A", "e" + fffd,          "f" + fffd + fffd};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.nodes[t.events[i].node], want[i]) << i;
  auto bad = read("{\"time_s\":1,\"node\":\"a\\u00g9\",\"event\":\"fault\"}\n", Format::kJsonl,
                  /*strict=*/true);
  EXPECT_FALSE(bad->r.ok());
  EXPECT_NE(bad->r.first_issue.find("bad \\u escape"), std::string::npos) << bad->r.first_issue;
}

TEST(CanonicalJsonl, BadRecordsNameLineFieldAndReason) {
  const char* text =
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault_start\"}\n"
      "{\"time_s\":1,\"node\":\"\",\"event\":\"fault_start\"}\n"
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault_start\",\"duration_s\":5}\n"
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault\",\"duration_s\":-5}\n"
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault\",\"scope\":\"galaxy\"}\n"
      "{\"time_s\":1,\"node\":\"a\",\"event\":\"fault_end\"} trailing\n"
      "[1,2,3]\n"
      "{\"time_s\":2,\"node\":\"a\",\"event\":\"fault_end\",\"colour\":\"red\"}\n";
  auto x = read(text, Format::kJsonl);
  ASSERT_TRUE(x->r.ok());
  EXPECT_EQ(x->r.records, 2u);
  EXPECT_EQ(x->r.skipped, 6u);
  const auto& is = x->rep.issues();
  ASSERT_EQ(is.size(), 7u);
  EXPECT_EQ(is[0].line, 2u);
  EXPECT_EQ(is[0].field, "node");
  EXPECT_EQ(is[1].field, "duration_s");
  EXPECT_NE(is[1].reason.find("applies to event \"fault\" only"), std::string::npos);
  EXPECT_EQ(is[2].field, "duration_s");
  EXPECT_EQ(is[3].field, "scope");
  EXPECT_EQ(is[4].line, 6u);
  EXPECT_EQ(is[5].line, 7u);
  EXPECT_EQ(is[6].line, 8u);  // unknown key: a warning, the record is kept
  EXPECT_EQ(is[6].field, "colour");
}

TEST(CanonicalCsv, ReadsQuotedFieldsAndMeta) {
  const char* text =
      "#meta {\"version\":1,\"fleet_nodes\":7}\n"
      "time_s,node,event,level,class,desc,duration_s,scope,scope_id,attrs\n"
      "1.25,\"node,1\",fault,Hardware,GPU,\"say "
      "\"\"hi\"\"\nthere\",60,switch,sw1,\"{\"\"k\"\":\"\"v\"\"}\"\r\n"
      "2,n2,fault_start,,,,,,,\n";
  auto x = read(text, Format::kCsv);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  const Trace& t = x->r.trace;
  EXPECT_EQ(t.fleet_nodes, 7);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.nodes[0], "node,1");
  EXPECT_EQ(t.categories[t.events[0].category].desc, "say \"hi\"\nthere");
  EXPECT_EQ(t.events[0].scope, Scope::kSwitch);
  EXPECT_EQ(t.attrs[t.events[0].attrs], (Attributes{{"k", "v"}}));
  EXPECT_EQ(t.events[1].line, 5u);  // the quoted newline spans line 4
}

TEST(CanonicalCsv, MissingRequiredColumnIsOneIssueAndStrictStops) {
  auto x = read("time_s,event\n1,fault\n", Format::kCsv);
  EXPECT_EQ(x->r.records, 0u);
  ASSERT_EQ(x->rep.count(), 1u);
  EXPECT_EQ(x->rep.issues()[0].field, "node");
  auto y = read("time_s,node,event\n1,a,fault\nx,a,fault\n3,a,fault\n", Format::kCsv, true);
  EXPECT_TRUE(y->r.stopped);
  EXPECT_EQ(y->r.records, 1u);
  EXPECT_EQ(y->rep.issues()[0].line, 3u);
  EXPECT_EQ(y->rep.issues()[0].field, "time_s");
}

TEST(ColumnMap, ReadsAUserLogWithDatesAndRenamedKinds) {
  const char* map_text = R"({
    "description": "ticket export",
    "format": "csv", "delimiter": ";",
    "time": {"field": "opened", "date": "%Y-%m-%d %H:%M:%S"},
    "node": "host",
    "event": {"field": "what", "start": ["DOWN"], "end": ["UP"], "ignore": ["NOTE"]},
    "class": "component", "level": {"value": "Hardware"},
    "scope": {"field": "blast", "rack": ["tor"], "node": ["host"]},
    "scope_id": "switch",
    "attributes": ["ticket"],
    "pairing": "fifo"
  })";
  const ColumnMap m = parse_column_map(map_text, "map.json");
  const char* log =
      "opened;host;what;component;blast;switch;ticket\n"
      "2024-03-30 00:00:00;h1;DOWN;GPU;host;;T1\n"
      "2024-03-30 06:00:00;h1;UP;GPU;host;;T1\n"
      "2024-03-30 07:00:00;h2;NOTE;;;;\n"
      "2024-03-31 00:00:00;h3;DOWN;ToR;tor;sw9;T2\n"
      "2024-02-30 00:00:00;h4;DOWN;GPU;host;;T3\n";
  auto x = read(log, Format::kColumns, false, &m);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  const Trace& t = x->r.trace;
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_DOUBLE_EQ(t.events[0].time_s, 0);  // dates default to the first record as time zero
  EXPECT_DOUBLE_EQ(t.events[1].time_s, 6 * 3600.0);
  EXPECT_EQ(t.events[1].kind, EventKind::kFaultEnd);
  EXPECT_EQ(t.events[2].scope, Scope::kRack);
  EXPECT_EQ(t.groups[t.events[2].group], "sw9");
  EXPECT_EQ(t.categories[t.events[0].category].level, "Hardware");
  EXPECT_EQ(t.attrs[t.events[0].attrs], (Attributes{{"ticket", "T1"}}));
  EXPECT_EQ(t.origin, "2024-03-30T00:00:00Z");
  EXPECT_EQ(t.pairing, Pairing::kFifo);
  ASSERT_EQ(x->rep.count(), 1u);  // February 30th
  EXPECT_EQ(x->rep.issues()[0].line, 6u);
  EXPECT_EQ(x->rep.issues()[0].field, "opened");
}

TEST(ColumnMap, ShippedExampleLoads) {
  const ColumnMap m = load_column_map(FAULTLINE_SOURCE_DIR "/traces/columns/ticket-export.json");
  EXPECT_EQ(m.delimiter, ';');
  EXPECT_EQ(m.fleet_nodes, 4096);
  EXPECT_EQ(m.scope_values.size(), 4u);
}

TEST(ColumnMap, JsonLinesWithDottedKeysAndDurations) {
  const ColumnMap m = parse_column_map(R"({"format": "jsonl", "time": {"field": "t", "unit": "ms"},
      "node": "where.host", "duration": {"field": "down", "unit": "h"}, "class": "kind"})",
                                       "m.json");
  auto x = read("{\"t\": 5000, \"where\": {\"host\": \"x\"}, \"down\": 2, \"kind\": \"PSU\"}\n",
                Format::kColumns, false, &m);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  ASSERT_EQ(x->r.trace.events.size(), 1u);
  const Event& e = x->r.trace.events[0];
  EXPECT_EQ(e.kind, EventKind::kFault);
  EXPECT_DOUBLE_EQ(e.time_s, 5);
  EXPECT_DOUBLE_EQ(e.duration_s, 7200);
  EXPECT_EQ(x->r.trace.nodes[0], "x");
}

// What parse_column_map says about a map named m.json: its error, or "accepted".
std::string column_map_error(const std::string& text) {
  try {
    parse_column_map(text, "m.json");
  } catch (const TraceError& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

TEST(ColumnMap, ConfigErrorsAreOneLineWithPath) {
  EXPECT_EQ(column_map_error(R"({"format": "csv", "node": "n"})"),
            "m.json: $.time: required: the field holding the time");
  EXPECT_EQ(column_map_error(R"({"format": "xml", "time": "t", "node": "n"})"),
            "m.json: $.format: expected one of csv|jsonl|json, got \"xml\"");
  EXPECT_EQ(column_map_error(
                R"({"format": "csv", "time": {"field": "t", "unit": "fortnights"}, "node": "n"})"),
            "m.json: $.time.unit: expected one of ns|us|ms|s|min|h|d, got \"fortnights\"");
  EXPECT_EQ(column_map_error(R"({"format": "csv", "header": false, "time": "t", "node": 1})"),
            "m.json: $.time: expected a column number (the CSV has no header row), got \"t\"");
  EXPECT_EQ(column_map_error(R"({"format": "jsonl", "time": "t", "node": "n", "colour": 1})"),
            "m.json: $.colour: unknown key; expected one of: attributes, class, desc, description, "
            "duration, "
            "end_time, event, fleet_nodes, format, level, node, origin, pairing, "
            "rejoin_ends_fault, scope, "
            "scope_id, time");
  EXPECT_NE(
      column_map_error(R"({"format": "csv", "time": {"field": "t", "date": "%Y %Q"}, "node": "n"})")
          .find("%Q"),
      std::string::npos);
  EXPECT_NE(column_map_error("{nope").find("invalid JSON"), std::string::npos);
}

// A made-up multi-system failure log in the style of public HPC failure data: a node is
// (system, node number), every row holds the start and the end of one failure, and the
// export has blank rows (all fields empty).
constexpr const char* kMultiSystemMap = R"({
  "format": "csv",
  "time": {"field": "prob_started", "date": "%Y-%m-%d %H:%M"},
  "end_time": "prob_fixed",
  "node": ["system", "nodenum"],
  "event": {"field": "type", "fault": ["failure"], "ignore": [""]},
  "class": "category",
  "fleet_nodes": 64
})";
constexpr const char* kMultiSystemLog =
    "system,nodenum,prob_started,prob_fixed,type,category\n"
    "2,17,2004-03-01 10:00,2004-03-01 12:30,failure,Hardware\n"
    ",,,,,\n"
    "20,17,2004-03-02 00:00,2004-03-02 00:45,failure,Software\n"
    "21,7,2004-03-03 06:00,2004-03-04 06:00,failure,Hardware\n"
    ",,,,,\n"
    "2,17,2004-03-05 08:00,2004-03-05 08:00,failure,Network\n"
    "2,1/7,2004-03-06 00:00,,failure,Hardware\n";

TEST(ColumnMap, CompositeNodeKeyAndEndTimeReadAMultiSystemLogStrictly) {
  const ColumnMap m = parse_column_map(kMultiSystemMap, "lanl.json");
  auto x = read(kMultiSystemLog, Format::kColumns, /*strict=*/true, &m);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  EXPECT_EQ(x->rep.count(), 0u);
  const Trace& t = x->r.trace;
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(x->r.records, 5u);
  // (2, 17) and (20, 17) are different nodes; a '/' inside a part is escaped, so the
  // join is one-to-one: (2, "1/7") is not (2, 1, 7) nor (21, 7).
  EXPECT_EQ(t.nodes, (std::vector<std::string>{"2/17", "20/17", "21/7", "2/1\\/7"}));
  EXPECT_EQ(t.events[0].node, t.events[3].node);
  for (const Event& e : t.events) EXPECT_EQ(e.kind, EventKind::kFault);
  EXPECT_DOUBLE_EQ(t.events[0].time_s, 0);
  EXPECT_DOUBLE_EQ(t.events[0].duration_s, 2.5 * 3600);
  EXPECT_DOUBLE_EQ(t.events[1].time_s, 14 * 3600.0);
  EXPECT_DOUBLE_EQ(t.events[1].duration_s, 45 * 60.0);
  EXPECT_DOUBLE_EQ(t.events[2].duration_s, 86400.0);
  EXPECT_DOUBLE_EQ(t.events[3].duration_s, 0);      // end == start is allowed
  EXPECT_TRUE(std::isnan(t.events[4].duration_s));  // no end: duration unknown
  EXPECT_EQ(t.fleet_nodes, 64);
  const PairingResult p = pair_faults(t);
  ASSERT_EQ(p.faults.size(), 5u);
  EXPECT_DOUBLE_EQ(p.faults[0].duration_s(), 2.5 * 3600);
}

TEST(ColumnMap, ShippedMultiSystemExampleReadsTheLogStrictly) {
  const ColumnMap m =
      load_column_map(FAULTLINE_SOURCE_DIR "/traces/columns/multi-system-failures.json");
  auto x = read(kMultiSystemLog, Format::kColumns, true, &m);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  EXPECT_EQ(x->r.records, 5u);
  EXPECT_EQ(x->r.trace.nodes.size(), 4u);
  // Garbage under the same map: issues, never a crash.
  for (const char* g : {"system,nodenum,prob_started,prob_fixed,type,category\n2\n",
                        "system,nodenum,prob_started,prob_fixed,type,category\n,,,\n\"",
                        "system,nodenum\n1,2\n", "", ",,,,,\n"}) {
    ReadResult r;
    EXPECT_NO_THROW(r = read_trace_text(g, Format::kColumns, "g", {}, &m)) << g;
    EXPECT_TRUE(r.error.empty());
    EXPECT_EQ(r.records, 0u);
  }
}

TEST(ColumnMap, EndTimeOnlyOnWholeFaultRecords) {
  const ColumnMap m = parse_column_map(
      R"({"format": "csv", "time": "t", "end_time": "t_end", "node": "n",
          "event": {"field": "e", "start": ["down"], "fault": ["fault"]}})",
      "m.json");
  auto x = read("t,t_end,n,e\n1,5,a,fault\n2,,a,down\n3,4,b,down\n", Format::kColumns, false, &m);
  ASSERT_EQ(x->r.records, 2u);
  EXPECT_DOUBLE_EQ(x->r.trace.events[0].duration_s, 4);
  ASSERT_EQ(x->rep.count(), 1u);
  EXPECT_EQ(x->rep.issues()[0].text(),
            "t:4: t_end: an end time applies to whole faults only, not to \"fault_start\" records");
}

TEST(ColumnMap, IgnoreMatchesEmptyEventValuesUnderStrictLoading) {
  // Regression: "ignore": [""] had no effect (the empty-value check came first), so a
  // strict load stopped at the first blank row with "missing event kind".
  const ColumnMap m = parse_column_map(
      R"({"format": "csv", "time": "t", "node": "n",
          "event": {"field": "e", "start": ["down"], "end": ["up"], "ignore": [""]}})",
      "m.json");
  auto x = read("t,n,e\n1,a,down\n,,\n2,a,up\n3,b,\n", Format::kColumns, true, &m);
  ASSERT_TRUE(x->r.ok()) << x->r.first_issue;
  EXPECT_EQ(x->r.records, 2u);
  EXPECT_EQ(x->rep.count(), 0u);
  // Without "" in ignore an empty kind is still a bad record.
  const ColumnMap m2 = parse_column_map(
      R"({"format": "csv", "time": "t", "node": "n",
          "event": {"field": "e", "start": ["down"], "end": ["up"]}})",
      "m.json");
  auto y = read("t,n,e\n1,a,down\n3,b,\n", Format::kColumns, true, &m2);
  EXPECT_TRUE(y->r.stopped);
  EXPECT_EQ(y->r.first_issue, "t:3: e: missing event kind");
}

TEST(ColumnMap, CompositeKeyAndEndTimeErrorsAreOneLineNamingLineAndField) {
  const ColumnMap m = parse_column_map(kMultiSystemMap, "lanl.json");
  const std::string head = "system,nodenum,prob_started,prob_fixed,type,category\n";
  auto first_issue = [&](const std::string& rows) {
    auto x = read(head + rows, Format::kColumns, true, &m);
    EXPECT_TRUE(x->r.stopped) << rows;
    EXPECT_EQ(x->r.records, 0u);
    return x->r.first_issue;
  };
  EXPECT_EQ(first_issue("2,,2004-03-01 10:00,2004-03-01 12:30,failure,Hardware\n"),
            "t:2: nodenum: missing node key part (expected a value in each of system, nodenum)");
  EXPECT_EQ(first_issue(",17,2004-03-01 10:00,2004-03-01 12:30,failure,Hardware\n"),
            "t:2: system: missing node key part (expected a value in each of system, nodenum)");
  EXPECT_EQ(first_issue("2,17,2004-03-01 10:00,2004-03-01 09:59,failure,Hardware\n"),
            "t:2: prob_fixed: end time 2004-03-01 09:59 is before the start 2004-03-01 10:00 "
            "(expected end >= start)");
  const std::string bad_end = first_issue("2,17,2004-03-01 10:00,yesterday,failure,Hardware\n");
  EXPECT_EQ(bad_end.rfind("t:2: prob_fixed: ", 0), 0u) << bad_end;
  EXPECT_EQ(bad_end.find('\n'), std::string::npos);
  // A composite part or the end column missing from the header: one issue at the header.
  for (const char* h : {"system,prob_started,prob_fixed,type,category\n",
                        "system,nodenum,prob_started,type,category\n"}) {
    auto x = read(std::string(h) + "2,17,2004-03-01 10:00,2004-03-01 12:30,failure,H\n",
                  Format::kColumns, false, &m);
    ASSERT_EQ(x->rep.count(), 1u) << h;
    EXPECT_EQ(x->rep.issues()[0].line, 1u);
    EXPECT_NE(x->rep.issues()[0].reason.find("is not in the header"), std::string::npos);
  }
  // JSON records: a missing key of the composite node.
  const ColumnMap j = parse_column_map(
      R"({"format": "jsonl", "time": "t", "end_time": {"field": "t_end"},
          "node": ["sys", "host.id"]})",
      "j.json");
  auto y = read(
      "{\"t\": 5, \"t_end\": 9, \"sys\": \"a\", \"host\": {\"id\": 3}}\n"
      "{\"t\": 5, \"t_end\": 4, \"sys\": \"a\", \"host\": {\"id\": 3}}\n"
      "{\"t\": 5, \"sys\": \"b\"}\n",
      Format::kColumns, false, &j);
  ASSERT_EQ(y->r.trace.events.size(), 1u);
  EXPECT_EQ(y->r.trace.nodes[0], "a/3");
  EXPECT_DOUBLE_EQ(y->r.trace.events[0].duration_s, 4);
  ASSERT_EQ(y->rep.count(), 2u);
  EXPECT_EQ(y->rep.issues()[0].text(),
            "t:2: t_end: end time 4 is before the start 5 (expected end >= start)");
  EXPECT_EQ(y->rep.issues()[1].text(),
            "t:3: host.id: missing node key part (expected a value in each of sys, host.id)");
}

TEST(ColumnMap, CompositeKeyAndEndTimeConfigErrors) {
  EXPECT_EQ(column_map_error(R"({"format": "csv", "time": "t", "node": []})"),
            "m.json: $.node: expected a field name, a column number or a list of at least two");
  EXPECT_EQ(column_map_error(R"({"format": "csv", "time": "t", "node": ["a"]})"),
            "m.json: $.node: expected a field name, a column number or a list of at least two");
  EXPECT_EQ(column_map_error(R"({"format": "csv", "time": "t", "node": ["a", true]})"),
            "m.json: $.node[1]: expected a field name or column number, got a boolean true");
  EXPECT_EQ(column_map_error(R"({"format": "csv", "time": "t", "node": "n", "end_time": "e",
                      "duration": "d"})"),
            "m.json: $.end_time: not with \"duration\" (a row holds an end time or a duration)");
  EXPECT_EQ(column_map_error(
                R"({"format": "csv", "time": "t", "node": "n", "end_time": {"value": "3"}})"),
            "m.json: $.end_time.value: a constant is not allowed here");
  EXPECT_EQ(
      column_map_error(R"({"format": "csv", "time": "t", "node": "n", "end_time": {"field": "e",
                      "unit": "h"}})"),
      "m.json: $.end_time.unit: unknown key; expected one of: field");
}

TEST(Readers, DetectFormat) {
  EXPECT_EQ(detect_format("[{}]", "x.json"), Format::kInfiniteHbd);
  EXPECT_EQ(detect_format("{\"meta\":{}}", "x"), Format::kJsonl);
  EXPECT_EQ(detect_format("", "x.jsonl"), Format::kJsonl);
  EXPECT_EQ(detect_format("0,add,node1\n", "x.csv"), Format::kOobleck);
  EXPECT_EQ(detect_format("# c\n120,remove,node1\n", "x"), Format::kOobleck);
  EXPECT_EQ(detect_format("time_s,node,event\n", "x.csv"), Format::kCsv);
}

TEST(Readers, GarbageNeverCrashesOrThrows) {
  const std::string inputs[] = {
      "",
      "[",
      "]",
      "{",
      "\"",
      "[{\"a\":",
      "[{}{}{}",
      "\xff\xfe\x00\x01",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
      "{\"time_s\":1e999,\"node\":\"a\",\"event\":\"fault\"}",
      "{\"a\":\"\\ud800\\u0041\"}",
      "#meta {\n",
      "time_s,node\n\"",
      ",,,,\n\n\r\r\n",
      std::string(1000, '{'),
      std::string(1000, '"'),
  };
  for (const std::string& s : inputs) {
    for (Format f :
         {Format::kInfiniteHbd, Format::kOobleck, Format::kJsonl, Format::kCsv, Format::kAuto}) {
      ReadResult r;
      EXPECT_NO_THROW(r = read_trace_text(s, f, "g", {})) << s;
      EXPECT_TRUE(r.error.empty());
    }
  }
}

TEST(Readers, RealFilesReadCleanly) {
  const std::string dir = ::faultline::testing::traces_dir() + "/";
  for (const char* f : {"oobleck/p3-trace.csv", "oobleck/g4dn-trace.csv", "oobleck/1h.csv",
                        "oobleck/5m.csv", "infinitehbd/fault_trace.json"})
    FAULTLINE_REQUIRE_SHARED(dir + f);
  for (const char* f :
       {"oobleck/p3-trace.csv", "oobleck/g4dn-trace.csv", "oobleck/1h.csv", "oobleck/5m.csv"}) {
    ReadOptions o;
    o.strict = true;
    ReadResult r = read_trace_file(dir + f, Format::kAuto, o);
    EXPECT_TRUE(r.ok()) << f << ": " << r.error << r.first_issue;
    EXPECT_EQ(r.trace.format, "oobleck") << f;
    EXPECT_GT(r.trace.events.size(), 40u) << f;
  }
  ReadOptions o;
  o.strict = true;
  ReadResult r = read_trace_file(dir + "infinitehbd/fault_trace.json", Format::kAuto, o);
  EXPECT_TRUE(r.ok()) << r.first_issue;
  EXPECT_EQ(r.records, 1168u);
}

TEST(TimeFormat, ParsesAndFormatsDates) {
  double t = 0;
  std::string err;
  ASSERT_TRUE(parse_date("2024-03-30T12:30:15.5+02:00", "iso8601", &t, &err)) << err;
  EXPECT_DOUBLE_EQ(t, 1711794615.5);
  ASSERT_TRUE(parse_date("30/Mar/2024:01:02:03", "%d/%b/%Y:%T", &t, &err)) << err;
  EXPECT_DOUBLE_EQ(t, 1711760523);
  ASSERT_TRUE(parse_date("1711760523.25", "%s", &t, &err));
  EXPECT_DOUBLE_EQ(t, 1711760523.25);
  EXPECT_FALSE(parse_date("2023-02-29", "%F", &t, &err));
  EXPECT_TRUE(parse_date("2024-02-29", "%F", &t, &err));
  EXPECT_EQ(format_iso8601(1711760523.25), "2024-03-30T01:02:03.25Z");
  EXPECT_EQ(format_iso8601(-86400), "1969-12-31T00:00:00Z");
}

}  // namespace
}  // namespace faultline::traces
