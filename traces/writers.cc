#include "traces/writers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "traces/scan.h"

namespace faultline::traces {

namespace {

std::string meta_json(const Trace& t) {
  std::string m = "{\"version\":1";
  if (t.fleet_nodes > 0) m += ",\"fleet_nodes\":" + std::to_string(t.fleet_nodes);
  if (!t.origin.empty()) {
    m += ",\"origin\":";
    scan::append_json_string(m, t.origin);
  }
  if (t.pairing != Pairing::kByCategory)
    m += std::string(",\"pairing\":\"") + pairing_name(t.pairing) + "\"";
  if (t.window)
    m += ",\"window\":[" + format_double(t.window->first) + "," + format_double(t.window->second) +
         "]";
  return m + "}";
}

std::string attrs_json(const Attributes& a) {
  std::string s = "{";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i) s += ',';
    scan::append_json_string(s, a[i].first);
    s += ':';
    scan::append_json_string(s, a[i].second);
  }
  return s + "}";
}

void jsonl(const Trace& t, std::string& out) {
  out.reserve(t.events.size() * 140 + 128);
  out += "{\"meta\":" + meta_json(t) + "}\n";
  for (const Event& e : t.events) {
    const Category& c = t.categories[static_cast<std::size_t>(e.category)];
    out += "{\"time_s\":";
    out += format_double(e.time_s);
    out += ",\"node\":";
    scan::append_json_string(out, t.nodes[static_cast<std::size_t>(e.node)]);
    out += ",\"event\":\"";
    out += event_kind_name(e.kind);
    out += '"';
    if (!c.level.empty()) {
      out += ",\"level\":";
      scan::append_json_string(out, c.level);
    }
    if (!c.cls.empty()) {
      out += ",\"class\":";
      scan::append_json_string(out, c.cls);
    }
    if (!c.desc.empty()) {
      out += ",\"desc\":";
      scan::append_json_string(out, c.desc);
    }
    if (e.kind == EventKind::kFault && !std::isnan(e.duration_s)) {
      out += ",\"duration_s\":";
      out += format_double(e.duration_s);
    }
    if (e.scope != Scope::kNode) {
      out += ",\"scope\":\"";
      out += scope_name(e.scope);
      out += '"';
    }
    if (e.group >= 0) {
      out += ",\"scope_id\":";
      scan::append_json_string(out, t.groups[static_cast<std::size_t>(e.group)]);
    }
    if (e.attrs >= 0) {
      out += ",\"attrs\":";
      out += attrs_json(t.attrs[static_cast<std::size_t>(e.attrs)]);
    }
    out += "}\n";
  }
}

void csv(const Trace& t, std::string& out) {
  out.reserve(t.events.size() * 110 + 256);
  out += "#meta " + meta_json(t) + "\n";
  out += "time_s,node,event,level,class,desc,duration_s,scope,scope_id,attrs\n";
  for (const Event& e : t.events) {
    const Category& c = t.categories[static_cast<std::size_t>(e.category)];
    out += format_double(e.time_s);
    out += ',';
    scan::append_csv_field(out, t.nodes[static_cast<std::size_t>(e.node)], ',');
    out += ',';
    out += event_kind_name(e.kind);
    out += ',';
    scan::append_csv_field(out, c.level, ',');
    out += ',';
    scan::append_csv_field(out, c.cls, ',');
    out += ',';
    scan::append_csv_field(out, c.desc, ',');
    out += ',';
    if (e.kind == EventKind::kFault && !std::isnan(e.duration_s))
      out += format_double(e.duration_s);
    out += ',';
    if (e.scope != Scope::kNode) out += scope_name(e.scope);
    out += ',';
    if (e.group >= 0) scan::append_csv_field(out, t.groups[static_cast<std::size_t>(e.group)], ',');
    out += ',';
    if (e.attrs >= 0)
      scan::append_csv_field(out, attrs_json(t.attrs[static_cast<std::size_t>(e.attrs)]), ',');
    out += '\n';
  }
}

struct Row {
  double t;
  std::size_t order;
  const Event* e;
  bool end;  // the end half of a whole-fault record
};

std::vector<Row> split_rows(const Trace& t, std::size_t* joins, std::size_t* open_faults) {
  std::vector<Row> rows;
  rows.reserve(t.events.size() + 16);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::kNodeJoin && joins) {
      ++*joins;
      continue;
    }
    rows.push_back({e.time_s, rows.size(), &e, false});
    if (e.kind == EventKind::kFault) {
      if (std::isnan(e.duration_s)) {
        if (open_faults) ++*open_faults;
      } else {
        rows.push_back({e.time_s + e.duration_s, rows.size(), &e, true});
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.t < b.t; });
  return rows;
}

void infinitehbd(const Trace& t, std::string& out, std::vector<std::string>& notes) {
  std::size_t joins = 0, open = 0, extras = 0;
  for (const Event& e : t.events)
    if (e.scope != Scope::kNode || e.group >= 0 || e.attrs >= 0) ++extras;
  const std::vector<Row> rows = split_rows(t, &joins, &open);
  out += "[";
  bool first = true;
  for (const Row& r : rows) {
    const Event& e = *r.e;
    const Category& c = t.categories[static_cast<std::size_t>(e.category)];
    const bool start = e.kind == EventKind::kFaultStart || (e.kind == EventKind::kFault && !r.end);
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {\n        \"node_id\": ";
    scan::append_json_string(out, t.nodes[static_cast<std::size_t>(e.node)]);
    // Days to 12 significant digits: the release's 4 decimals come back as written.
    char days[40];
    std::snprintf(days, sizeof days, "%.12g", r.t / 86400.0);
    out += ",\n        \"event_time\": ";
    out += days;
    out +=
        std::string(",\n        \"event_type\": \"") + (start ? "fault_start" : "fault_end") + "\"";
    out += ",\n        \"fault_type\": {\n            \"Level\": ";
    scan::append_json_string(out, c.level);
    out += ",\n            \"Class\": ";
    scan::append_json_string(out, c.cls);
    out += ",\n            \"Desc\": ";
    scan::append_json_string(out, c.desc);
    out += "\n        }\n    }";
  }
  out += "\n]\n";
  if (joins)
    notes.push_back(std::to_string(joins) +
                    " node_join events dropped (InfiniteHBD has no membership events)");
  if (open)
    notes.push_back(std::to_string(open) +
                    " faults without a duration written as fault_start only");
  if (extras)
    notes.push_back(std::to_string(extras) + " events lost their scope, scope_id or attributes");
}

void oobleck(const Trace& t, std::string& out, std::vector<std::string>& notes) {
  std::size_t open = 0;
  const std::vector<Row> rows = split_rows(t, nullptr, &open);
  std::size_t categorised = 0;
  for (const Row& r : rows) {
    const Event& e = *r.e;
    const bool remove = e.kind == EventKind::kFaultStart || (e.kind == EventKind::kFault && !r.end);
    // Oobleck times are whole milliseconds; undo the rounding of ms -> s -> ms.
    double ms = r.t * 1000.0;
    const double whole = std::round(ms);
    if (std::fabs(ms - whole) <= 1e-9 * std::max(1.0, std::fabs(ms))) ms = whole;
    out += format_double(ms);
    out += remove ? ",remove," : ",add,";
    // Oobleck names carry no delimiters; replace any that would break the row.
    std::string name = t.nodes[static_cast<std::size_t>(e.node)];
    for (char& ch : name)
      if (ch == ',' || ch == '\n' || ch == '\r') ch = '_';
    out += name;
    out += '\n';
    const Category& c = t.categories[static_cast<std::size_t>(e.category)];
    if (e.kind != EventKind::kNodeJoin && !(c.cls == "Preemption" || c.cls.empty())) ++categorised;
  }
  if (categorised)
    notes.push_back(std::to_string(categorised) +
                    " events lost their fault category (Oobleck rows have none)");
  if (open)
    notes.push_back(std::to_string(open) + " faults without a duration written as remove only");
}

}  // namespace

WriteResult write_trace(const Trace& t, Format format) {
  WriteResult r;
  switch (format) {
    case Format::kJsonl:
      jsonl(t, r.text);
      break;
    case Format::kCsv:
      csv(t, r.text);
      break;
    case Format::kInfiniteHbd:
      infinitehbd(t, r.text, r.notes);
      break;
    case Format::kOobleck:
      oobleck(t, r.text, r.notes);
      break;
    default:
      r.notes.push_back(std::string("cannot write format ") + format_name(format));
      break;
  }
  return r;
}

bool write_text_file(const std::string& path, const std::string& text, std::string* err) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
      if (err) *err = "stdout: write error";
      return false;
    }
    std::fflush(stdout);
    return true;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    if (err) *err = path + ": cannot write";
    return false;
  }
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) {
    if (err) *err = path + ": write error";
    return false;
  }
  return true;
}

}  // namespace faultline::traces
