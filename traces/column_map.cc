// Column maps (see readers.h, ColumnMap, and traces/FORMAT.md §4): the built-in formats'
// maps and the parsing of a column-map file, which says where a log keeps each field of
// a trace event. Apart from the readers that apply a map (readers.cc and
// record_interpreter.cc) because it is configuration, not input: its errors are thrown,
// "file: $.path: expected ...", never reported record by record.
#include <set>
#include <string>
#include <utility>

#include "traces/config.h"
#include "traces/readers.h"
#include "traces/record_interpreter.h"  // kIgnore, shown
#include "traces/timefmt.h"

namespace faultline::traces {

namespace {

using internal::kIgnore;
using internal::kUp;
using internal::shown;

// A field name or column number at `path`.
FieldRef scalar_field_ref(const ConfigObj& o, const nlohmann::json& j, const std::string& path,
                          bool csv, bool header) {
  FieldRef f;
  if (j.is_string()) {
    f.name = j.get<std::string>();
    if (f.name.empty()) o.fail(path, "expected a non-empty field name");
    if (csv && !header)
      o.fail(path, "expected a column number (the CSV has no header row), got \"" + f.name + "\"");
  } else if (j.is_number_integer() || j.is_number_unsigned()) {
    if (!csv)
      o.fail(path, "expected a key name (column numbers are for CSV), got " + json_brief(j));
    const auto i = j.get<std::int64_t>();
    if (i < 0 || i > 100000)
      o.fail(path, "expected a column number in [0, 100000], got " + json_brief(j));
    f.index = static_cast<int>(i);
  } else {
    o.fail(path,
           "expected a field name or column number, got " + json_type_of(j) + " " + json_brief(j));
  }
  return f;
}

FieldRef field_ref(ConfigObj& o, const std::string& key, bool csv, bool header, bool allow_constant,
                   nlohmann::json const** extra) {
  FieldRef f;
  const nlohmann::json* v = o.get(key);
  if (extra) *extra = nullptr;
  if (!v) return f;
  auto from_scalar = [&](const nlohmann::json& j, const std::string& path) {
    f = scalar_field_ref(o, j, path, csv, header);
  };
  if (v->is_object()) {
    if (extra) *extra = v;
    if (v->contains("value")) {
      if (!allow_constant) o.fail(o.at(key) + ".value", "a constant is not allowed here");
      const auto& c = (*v)["value"];
      if (!c.is_string()) o.fail(o.at(key) + ".value", "expected a string, got " + json_type_of(c));
      f.constant = c.get<std::string>();
      f.is_constant = true;
    } else if (v->contains("field")) {
      from_scalar((*v)["field"], o.at(key) + ".field");
    } else {
      o.fail(o.at(key), "expected \"field\" (or \"value\" for a constant)");
    }
  } else {
    from_scalar(*v, o.at(key));
  }
  return f;
}

double unit_seconds(ConfigObj& o, const std::string& key, double def) {
  if (!o.has(key)) {
    o.get(key);
    return def;
  }
  const std::string u = o.choice(key, "s", {"ns", "us", "ms", "s", "min", "h", "d"});
  if (u == "ns") return 1e-9;
  if (u == "us") return 1e-6;
  if (u == "ms") return 1e-3;
  if (u == "s") return 1;
  if (u == "min") return 60;
  if (u == "h") return 3600;
  return 86400;
}

// ---------------------------------------------------------------- parse_column_map parts
// Each reads its keys of the map in a fixed order: the first bad one is the one reported.

// "format", and for CSV its "delimiter", "header", "comment" and "trim".
void read_container(ConfigObj& o, ColumnMap& m) {
  const std::string fmt = o.choice("format", "", {"csv", "jsonl", "json"});
  if (fmt.empty()) o.fail("$.format", "required: csv|jsonl|json");
  m.container = fmt == "csv"     ? Container::kCsv
                : fmt == "jsonl" ? Container::kJsonl
                                 : Container::kJsonArray;
  if (m.container == Container::kCsv) {
    const std::string d = o.string("delimiter", ",");
    if (d.size() != 1 || d == "\"" || d == "\n" || d == "\r")
      o.fail("$.delimiter", "expected one character (not a quote or newline)");
    m.delimiter = d == "\\t" ? '\t' : d[0];
    m.header = o.boolean("header", true);
    const std::string c = o.string("comment", "#");
    if (c.size() > 1) o.fail("$.comment", "expected one character or \"\"");
    m.comment = c.empty() ? '\0' : c[0];
    m.trim = o.boolean("trim", false);
  } else {
    for (const char* k : {"delimiter", "header", "comment", "trim"})
      if (o.has(k)) o.fail(o.at(k), "only for \"format\": \"csv\"");
  }
}

// "time" with its "unit" or "date".
void read_time(ConfigObj& o, ColumnMap& m, bool csv) {
  const nlohmann::json* extra = nullptr;
  m.time = field_ref(o, "time", csv, m.header, false, &extra);
  if (!m.time.set()) o.fail("$.time", "required: the field holding the time");
  if (extra) {
    ConfigObj t(*extra, "$.time", o.file());
    t.get("field");
    m.time_unit_s = unit_seconds(t, "unit", 1);
    m.date_format = t.string("date", "");
    if (!m.date_format.empty()) {
      std::string err;
      if (!check_date_format(m.date_format, &err)) t.fail("$.time.date", err);
      if (t.has("unit")) t.fail("$.time.unit", "not with \"date\" (dates carry their own unit)");
    }
    t.finish();
  }
}

// "origin": as_is, first, or a date (dated times only). Dates default to the first record.
void read_origin(ConfigObj& o, ColumnMap& m) {
  m.origin = m.date_format.empty() ? TimeOrigin::kAsIs : TimeOrigin::kFirstRecord;
  const nlohmann::json* ov = o.get("origin");
  if (!ov) return;
  if (!ov->is_string())
    o.fail("$.origin",
           "expected \"as_is\", \"first\" or an ISO-8601 date, got " + json_type_of(*ov));
  const std::string s = ov->get<std::string>();
  if (s == "as_is") {
    m.origin = TimeOrigin::kAsIs;
  } else if (s == "first") {
    m.origin = TimeOrigin::kFirstRecord;
  } else {
    std::string err;
    if (!parse_date(s, "iso8601", &m.origin_unix_s, &err))
      o.fail("$.origin",
             "expected \"as_is\", \"first\" or an ISO-8601 date, got \"" + shown(s) + "\"");
    m.origin = TimeOrigin::kFixed;
    if (m.date_format.empty())
      o.fail("$.origin",
             "a date origin needs dated times (time.date); numeric times are already relative");
  }
}

// "node": one field, or a list of two or more joined into a composite key.
void read_node(ConfigObj& o, ColumnMap& m, bool csv) {
  if (const nlohmann::json* nv = o.get("node"); nv && nv->is_array()) {
    if (nv->size() < 2)
      o.fail("$.node", "expected a field name, a column number or a list of at least two");
    for (std::size_t i = 0; i < nv->size(); ++i) {
      m.node_parts.push_back(
          scalar_field_ref(o, (*nv)[i], "$.node[" + std::to_string(i) + "]", csv, m.header));
    }
    m.node = m.node_parts.front();
  } else {
    m.node = field_ref(o, "node", csv, m.header, false, nullptr);
  }
  if (!m.node.set()) o.fail("$.node", "required: the field naming the node");
}

// "event" with its value lists (start, end, fault, join, ignore).
void read_event(ConfigObj& o, ColumnMap& m, bool csv) {
  const nlohmann::json* extra = nullptr;
  m.event = field_ref(o, "event", csv, m.header, false, &extra);
  if (!extra) return;
  ConfigObj e(*extra, "$.event", o.file());
  e.get("field");
  std::set<std::string> seen;
  const std::pair<const char*, int> kinds[] = {{"start", static_cast<int>(EventKind::kFaultStart)},
                                               {"end", static_cast<int>(EventKind::kFaultEnd)},
                                               {"fault", static_cast<int>(EventKind::kFault)},
                                               {"join", static_cast<int>(EventKind::kNodeJoin)},
                                               {"up", kUp},
                                               {"ignore", kIgnore}};
  for (const auto& [key, kind] : kinds) {
    for (const auto& v : e.one_or_more_strings(key)) {
      if (!seen.insert(v).second) e.fail(e.at(key), "value \"" + shown(v) + "\" listed twice");
      m.event_values.emplace_back(v, kind);
    }
  }
  if (m.event_values.empty())
    e.fail("$.event", "expected value lists: start, end, fault, join, up, ignore (at least one)");
  e.finish();
}

// "duration" with its "unit", or "end_time" (read like the start time), not both.
void read_duration_or_end(ConfigObj& o, ColumnMap& m, bool csv) {
  const nlohmann::json* extra = nullptr;
  m.duration = field_ref(o, "duration", csv, m.header, false, &extra);
  if (extra) {
    ConfigObj d(*extra, "$.duration", o.file());
    d.get("field");
    m.duration_unit_s = unit_seconds(d, "unit", 1);
    d.finish();
  }
  m.end_time = field_ref(o, "end_time", csv, m.header, false, &extra);
  if (extra) {
    // Read like the start time: its unit or date format are the start's.
    ConfigObj e(*extra, "$.end_time", o.file());
    e.get("field");
    e.finish();
  }
  if (m.end_time.set() && m.duration.set())
    o.fail("$.end_time", "not with \"duration\" (a row holds an end time or a duration)");
}

// "scope": a field with its value lists, or a constant.
void read_scope(ConfigObj& o, ColumnMap& m, bool csv) {
  const nlohmann::json* extra = nullptr;
  m.scope = field_ref(o, "scope", csv, m.header, true, &extra);
  if (!extra) return;
  ConfigObj s(*extra, "$.scope", o.file());
  s.get("field");
  s.get("value");
  for (const auto& [key, scope] :
       {std::pair{"node", Scope::kNode}, std::pair{"rack", Scope::kRack},
        std::pair{"switch", Scope::kSwitch}, std::pair{"job", Scope::kJob}})
    for (const auto& v : s.one_or_more_strings(key)) m.scope_values.emplace_back(v, scope);
  s.finish();
  if (m.scope.is_constant) {
    Scope sc;
    if (!parse_scope(m.scope.constant, &sc))
      s.fail("$.scope.value", "expected node|rack|switch|job");
  }
}

// "attributes": fields kept as attributes.
void read_attributes(ConfigObj& o, ColumnMap& m, bool csv) {
  const nlohmann::json* av = o.get("attributes");
  if (!av) return;
  if (!av->is_array()) o.fail("$.attributes", "expected an array of field names");
  for (std::size_t i = 0; i < av->size(); ++i) {
    nlohmann::json wrap = {{"a", (*av)[i]}};
    ConfigObj w(wrap, "$.attributes[" + std::to_string(i) + "]", o.file());
    FieldRef f = field_ref(w, "a", csv, m.header, false, nullptr);
    m.attributes.push_back(f);
  }
}

}  // namespace

std::string FieldRef::describe() const {
  if (is_constant) return "constant";
  if (index >= 0 && !name.empty()) return "column " + std::to_string(index) + " (" + name + ")";
  if (!name.empty()) return name;
  return "column " + std::to_string(index);
}

ColumnMap builtin_column_map(Format f) {
  ColumnMap m;
  m.name = format_name(f);
  switch (f) {
    case Format::kJsonl:
    case Format::kCsv:
    case Format::kAuto:
    case Format::kColumns:
      m.container = f == Format::kCsv ? Container::kCsv : Container::kJsonl;
      m.canonical = true;
      m.time.name = "time_s";
      m.node.name = "node";
      m.event.name = "event";
      m.duration.name = "duration_s";
      m.level.name = "level";
      m.cls.name = "class";
      m.desc.name = "desc";
      m.scope.name = "scope";
      m.scope_id.name = "scope_id";
      m.attributes_object = "attrs";
      break;
    case Format::kInfiniteHbd:
      // github.com/stepfun-ai/InfiniteHBD-Trace: days since the start of a 400-server sample.
      m.container = Container::kJsonArray;
      m.time.name = "event_time";
      m.time_unit_s = 86400;
      m.node.name = "node_id";
      m.event.name = "event_type";
      m.event_values = {{"fault_start", static_cast<int>(EventKind::kFaultStart)},
                        {"fault_end", static_cast<int>(EventKind::kFaultEnd)}};
      m.level.name = "fault_type.Level";
      m.cls.name = "fault_type.Class";
      m.desc.name = "fault_type.Desc";
      m.fleet_nodes = 400;
      break;
    case Format::kOobleck:
      // github.com/SymbioticLab/Oobleck traces: time_ms,add|remove,nodeN. A removal is a
      // preemption (fault start); an add is a node joining (or coming back).
      m.container = Container::kCsv;
      m.header = false;
      m.comment = '#';
      m.time.index = 0;
      m.time_unit_s = 1e-3;
      m.event.index = 1;
      m.event_values = {{"remove", static_cast<int>(EventKind::kFaultStart)},
                        {"add", static_cast<int>(EventKind::kNodeJoin)}};
      m.join_ends_fault = true;
      m.node.index = 2;
      m.level = {"", -1, "Other", true};
      m.cls = {"", -1, "Preemption", true};
      m.desc = {"", -1, "remove", true};
      break;
    case Format::kFta:
      // The Failure Trace Archive's event_trace table (its public traces' *_event_trace.tab):
      // tab-separated, values padded with blanks, read by position (a header row is skipped),
      // event_id, component_id, node_id, platform_id, node_name, event_type,
      // event_start_time, event_stop_time, event_end_reason; times in Unix seconds.
      // event_type 0 is an unavailability interval (a whole fault lasting stop - start), 1
      // an availability one (the node is up: in the fleet and the window, not a fault).
      m.container = Container::kCsv;
      m.delimiter = '\t';
      m.header = false;
      m.comment = '#';
      m.trim = true;
      m.time = {"event_start_time", 6, "", false};
      m.end_time = {"event_stop_time", 7, "", false};
      m.origin = TimeOrigin::kFixed;  // Unix seconds: time zero is 1970-01-01
      m.origin_unix_s = 0;
      m.node = {"node_id", 2, "", false};
      m.event = {"event_type", 5, "", false};
      m.event_values = {
          {"0", static_cast<int>(EventKind::kFault)}, {"1", kUp}, {"event_type", kIgnore}};
      m.cls = {"", -1, "Unavailability", true};
      break;
  }
  return m;
}

ColumnMap parse_column_map(const std::string& json_text, const std::string& file) {
  nlohmann::json doc = parse_config_json(json_text, file);
  ConfigObj o(doc, "$", file);
  ColumnMap m;
  m.name = file;
  o.string("description", "");
  read_container(o, m);
  const bool csv = m.container == Container::kCsv;
  read_time(o, m, csv);
  read_origin(o, m);
  read_node(o, m, csv);
  read_event(o, m, csv);
  m.join_ends_fault = o.boolean("rejoin_ends_fault", false);
  read_duration_or_end(o, m, csv);
  m.level = field_ref(o, "level", csv, m.header, true, nullptr);
  m.cls = field_ref(o, "class", csv, m.header, true, nullptr);
  m.desc = field_ref(o, "desc", csv, m.header, true, nullptr);
  read_scope(o, m, csv);
  m.scope_id = field_ref(o, "scope_id", csv, m.header, false, nullptr);
  read_attributes(o, m, csv);
  const std::string pairing = o.choice("pairing", "by_category", {"by_category", "fifo", "lifo"});
  parse_pairing(pairing, &m.pairing);
  m.fleet_nodes = static_cast<int>(o.integer("fleet_nodes", 0, 0, 100'000'000));
  o.finish();
  return m;
}

ColumnMap load_column_map(const std::string& path) {
  return parse_column_map(read_text_file(path), path);
}

}  // namespace faultline::traces
