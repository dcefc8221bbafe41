// The record interpreter of the trace readers (see record_interpreter.h): a record's
// fields, as text, checked and turned into a trace event (time, node, kind, duration or
// end time, scope, category, attributes), the canonical format's meta records, and the
// fix-ups once every record is read (time origin, rejoins ending faults, fleet size).
// Apart from the container scanners (readers.cc) and the column-map files
// (column_map.cc): this is what a field means, whatever the file it came from.
#include "traces/record_interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "traces/timefmt.h"

namespace faultline::traces::internal {

namespace {

// Seconds from a value in `unit_s` seconds. Sub-second units divide (v / 1000 is the
// double nearest to the exact quotient; v * 0.001 is not always).
double scale_unit(double v, double unit_s) {
  return unit_s < 1 ? v / std::round(1 / unit_s) : v * unit_s;
}

// Appends a composite node key's part, escaping '/' and '\\' so the join is one-to-one.
void append_key_part(std::string& id, std::string_view part, bool first) {
  if (!first) id += '/';
  for (char c : part) {
    if (c == '/' || c == '\\') id += '\\';
    id += c;
  }
}

}  // namespace

std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  if (s.size() > 40) out += "...";
  return out;
}

bool Interpreter::parse_time(const Slot& s, double* out, std::string* why) const {
  double t = 0;
  if (!map_.date_format.empty()) {
    if (!parse_date(s.text, map_.date_format, &t, why)) return false;
    if (map_.origin == TimeOrigin::kFixed) t -= map_.origin_unix_s;
  } else {
    double v = 0;
    if (!scan::parse_double(s.text, &v)) {
      *why = "expected a number, got \"" + shown(s.text) + "\"";
      return false;
    }
    t = scale_unit(v, map_.time_unit_s);
    if (map_.origin == TimeOrigin::kFixed) t -= map_.origin_unix_s;
  }
  if (!(std::fabs(t) <= kMaxAbsTime)) {
    *why = "time " + shown(s.text) + " out of range (|t| <= 1e12 s)";
    return false;
  }
  *out = t;
  return true;
}

bool Interpreter::record(const RecordView& r, std::size_t line) {
  if (ignored(r)) return true;

  // Time.
  double t = 0;
  if (r.time.empty()) return bad(line, map_.time, "time_s", "missing time");
  {
    std::string why;
    if (!parse_time(r.time, &t, &why)) return bad(line, map_.time, "time_s", why);
  }

  std::string_view node;
  EventKind kind = EventKind::kFault;
  bool up = false;
  double duration = NAN;
  Scope scope = Scope::kNode;
  if (Verdict v = read_node(r, line, &node)) return *v;
  if (Verdict v = read_kind(r, line, &kind, &up)) return *v;
  if (up) return up_record(r, line, t, node);
  if (Verdict v = read_duration(r, line, kind, &duration)) return *v;
  if (Verdict v = read_end_time(r, line, kind, t, &duration)) return *v;
  if (Verdict v = read_scope(r, line, &scope)) return *v;

  Event e;
  e.time_s = t;
  e.duration_s = duration;
  e.kind = kind;
  e.scope = scope;
  e.line = static_cast<std::uint32_t>(std::min<std::size_t>(line, UINT32_MAX));
  e.node = trace_.intern_node(node);
  auto text = [](const Slot& s) { return s.null || !s.present ? std::string_view() : s.text; };
  e.category = trace_.intern_category(text(r.level), text(r.cls), text(r.desc));
  if (!r.scope_id.empty()) e.group = trace_.intern_group(r.scope_id.text);
  if (Verdict v = read_attributes(r, line, e)) return *v;
  min_time_ = std::min(min_time_, t);
  max_time_ = std::max(max_time_, std::isnan(duration) ? t : t + duration);
  trace_.events.push_back(e);
  ++res_.records;
  return true;
}

// A record saying the node was up from `t` to its end time (or at `t`, without one): the
// node joins the trace's nodes, the interval the window; no event.
bool Interpreter::up_record(const RecordView& r, std::size_t line, double t,
                            std::string_view node) {
  double end = t;
  if (map_.end_time.set() && !r.end_time.empty()) {
    std::string why;
    if (!parse_time(r.end_time, &end, &why)) return bad(line, map_.end_time, "end_time", why);
    if (!(end >= t))
      return bad(line, map_.end_time, "end_time",
                 "end time " + shown(r.end_time.text) + " is before the start " +
                     shown(r.time.text) + " (expected end >= start)");
  }
  trace_.intern_node(node);
  up_ = true;
  min_time_ = std::min(min_time_, t);
  max_time_ = std::max(max_time_, end);
  ++res_.records;
  return true;
}

// An event value listed under "ignore" skips the record before anything else is checked:
// "ignore": [""] skips the blank rows of an export, whose other fields are empty too.
bool Interpreter::ignored(const RecordView& r) const {
  if (map_.event.set() && !map_.event_values.empty()) {
    const std::string_view v = r.event.empty() ? std::string_view() : r.event.text;
    for (const auto& [value, kk] : map_.event_values)
      if (kk == kIgnore && value == v) return true;
  }
  return false;
}

// The node: one field, or a composite key joined into node_id_.
Interpreter::Verdict Interpreter::read_node(const RecordView& r, std::size_t line,
                                            std::string_view* out) {
  std::string_view node = r.node.empty() ? std::string_view() : r.node.text;
  if (!map_.node_parts.empty()) {
    node_id_.clear();
    for (std::size_t i = 0; i < map_.node_parts.size(); ++i) {
      const Slot& part = i < r.node_parts.size() ? r.node_parts[i] : Slot{};
      if (part.empty()) {
        std::string names;
        for (const FieldRef& f : map_.node_parts)
          names += (names.empty() ? "" : ", ") + f.describe();
        return bad(line, map_.node_parts[i], "node",
                   "missing node key part (expected a value in each of " + names + ")");
      }
      append_key_part(node_id_, part.text, i == 0);
    }
    node = node_id_;
  }
  if (node.empty()) return bad(line, map_.node, "node", "missing node");
  *out = node;
  return std::nullopt;
}

// The event kind: the canonical names, or the map's value lists (an ignored value ends
// the record, which is not an error).
Interpreter::Verdict Interpreter::read_kind(const RecordView& r, std::size_t line, EventKind* out,
                                            bool* up) {
  if (!map_.event.set()) return std::nullopt;
  if (r.event.empty()) return bad(line, map_.event, "event", "missing event kind");
  int k = -2;
  if (map_.event_values.empty()) {
    EventKind ek;
    if (parse_event_kind(r.event.text, &ek)) k = static_cast<int>(ek);
  } else {
    for (const auto& [value, kk] : map_.event_values)
      if (value == r.event.text) {
        k = kk;
        break;
      }
  }
  if (k == kIgnore) return true;
  if (k == kUp) {
    *up = true;
    return std::nullopt;
  }
  if (k < 0) {
    std::string known;
    if (map_.event_values.empty()) {
      known = "fault_start|fault_end|fault|node_join";
    } else {
      for (const auto& [value, kk] : map_.event_values) known += (known.empty() ? "" : "|") + value;
    }
    return bad(line, map_.event, "event",
               "unknown event kind \"" + shown(r.event.text) + "\" (expected " + known + ")");
  }
  *out = static_cast<EventKind>(k);
  return std::nullopt;
}

// The duration of a whole fault (other kinds: ignored, or an error in the canonical format).
Interpreter::Verdict Interpreter::read_duration(const RecordView& r, std::size_t line,
                                                EventKind kind, double* out) {
  if (!map_.duration.set() || r.duration.empty()) return std::nullopt;
  double d = 0;
  if (!scan::parse_double(r.duration.text, &d) || d < 0)
    return bad(line, map_.duration, "duration_s",
               "expected a number >= 0, got \"" + shown(r.duration.text) + "\"");
  d = scale_unit(d, map_.duration_unit_s);
  if (!(d <= kMaxAbsTime)) return bad(line, map_.duration, "duration_s", "duration out of range");
  if (kind == EventKind::kFault) {
    *out = d;
  } else if (map_.canonical) {
    return bad(line, map_.duration, "duration_s",
               std::string("duration_s applies to event \"fault\" only, not \"") +
                   event_kind_name(kind) + "\"");
  }
  return std::nullopt;
}

// End time: a whole fault's end in the same row, starting at `t`.
Interpreter::Verdict Interpreter::read_end_time(const RecordView& r, std::size_t line,
                                                EventKind kind, double t, double* duration) {
  if (!map_.end_time.set() || r.end_time.empty()) return std::nullopt;
  if (kind != EventKind::kFault)
    return bad(line, map_.end_time, "end_time",
               std::string("an end time applies to whole faults only, not to \"") +
                   event_kind_name(kind) + "\" records");
  double end = 0;
  std::string why;
  if (!parse_time(r.end_time, &end, &why)) return bad(line, map_.end_time, "end_time", why);
  if (!(end >= t))
    return bad(line, map_.end_time, "end_time",
               "end time " + shown(r.end_time.text) + " is before the start " + shown(r.time.text) +
                   " (expected end >= start)");
  // Each time is within 1e12 s, their difference need not be: a duration the canonical
  // format would refuse is refused here too.
  if (!(end - t <= kMaxAbsTime))
    return bad(line, map_.end_time, "end_time",
               "end time " + shown(r.end_time.text) + " is more than 1e12 s after the start " +
                   shown(r.time.text));
  *duration = end - t;
  return std::nullopt;
}

Interpreter::Verdict Interpreter::read_scope(const RecordView& r, std::size_t line, Scope* out) {
  if (!map_.scope.set() || r.scope.empty()) return std::nullopt;
  Scope scope = Scope::kNode;
  bool found = false;
  for (const auto& [value, s] : map_.scope_values)
    if (value == r.scope.text) {
      scope = s;
      found = true;
      break;
    }
  if (!found && !parse_scope(r.scope.text, &scope))
    return bad(
        line, map_.scope, "scope",
        "unknown scope \"" + shown(r.scope.text) + "\" (expected node|machine|rack|switch|job)");
  *out = scope;
  return std::nullopt;
}

// The attributes: named fields, and the canonical CSV's JSON object of strings in one cell.
Interpreter::Verdict Interpreter::read_attributes(const RecordView& r, std::size_t line, Event& e) {
  if (r.attrs.empty() && r.attrs_text.empty()) return std::nullopt;
  Attributes a;
  for (const auto& [k, v] : r.attrs)
    if (v.present && !v.null) a.emplace_back(std::string(k), std::string(v.text));
  if (!r.attrs_text.empty()) {
    scan::JsonCursor c(r.attrs_text.text);
    std::string err;
    if (!c.object(attrs_rec_, &err))
      return bad(line, map_.cls, "attrs", "expected a JSON object: " + err);
    c.skip_ws();
    if (!c.at_end()) return bad(line, map_.cls, "attrs", "text after the JSON object");
    for (std::size_t i = 0; i < attrs_rec_.size(); ++i)
      if (attrs_rec_[i].type != scan::JType::kNull)
        a.emplace_back(std::string(attrs_rec_[i].key), std::string(attrs_rec_[i].value));
  }
  if (!a.empty()) e.attrs = trace_.add_attributes(std::move(a));
  return std::nullopt;
}

bool Interpreter::meta(const scan::JRecord& rec, std::size_t line, std::size_t first) {
  double w0 = NAN, w1 = NAN;
  for (std::size_t i = first; i < rec.size(); ++i) {
    const scan::JField& f = rec[i];
    if (f.key.compare(0, 5, "meta.") != 0) {
      if (sink_.issue(line, std::string(f.key), "unexpected key in a meta record ignored", false))
        return false;
      continue;
    }
    const std::string_view key = f.key.substr(5);  // after "meta."
    std::int64_t iv = 0;
    double dv = 0;
    if (key == "version") {
      if (f.type != scan::JType::kNumber || !scan::parse_int64(f.value, &iv) || iv != 1)
        if (sink_.issue(line, "meta.version", "expected 1, got " + shown(f.value), false))
          return false;
    } else if (key == "fleet_nodes") {
      if (f.type != scan::JType::kNumber || !scan::parse_int64(f.value, &iv) || iv < 0 ||
          iv > 100'000'000) {
        if (sink_.issue(line, "meta.fleet_nodes", "expected an integer >= 0, got " + shown(f.value),
                        false))
          return false;
      } else {
        trace_.fleet_nodes = static_cast<int>(iv);
      }
    } else if (key == "origin") {
      trace_.origin = f.value;
    } else if (key == "pairing") {
      Pairing p;
      if (!parse_pairing(f.value, &p)) {
        if (sink_.issue(line, "meta.pairing",
                        "expected by_category|fifo|lifo, got " + shown(f.value), false))
          return false;
      } else {
        trace_.pairing = p;
      }
    } else if (key == "window.0" || key == "window.1") {
      if (f.type != scan::JType::kNumber || !scan::parse_double(f.value, &dv) ||
          std::fabs(dv) > kMaxAbsTime) {
        if (sink_.issue(line, "meta.window", "expected [start_s, end_s], got " + shown(f.value),
                        false))
          return false;
      } else {
        (key == "window.0" ? w0 : w1) = dv;
      }
    } else if (key != "source") {
      if (sink_.issue(line, std::string(f.key), "unknown meta key ignored", false)) return false;
    }
  }
  if (!std::isnan(w0) && !std::isnan(w1) && w1 >= w0) trace_.window = std::make_pair(w0, w1);
  return true;
}

void Interpreter::finish() {
  double shift = 0;  // what the first record's origin takes off every time
  if (map_.origin == TimeOrigin::kFirstRecord && std::isfinite(min_time_) && min_time_ != 0) {
    shift = min_time_;
    for (Event& e : trace_.events) e.time_s -= min_time_;
    if (trace_.origin.empty())
      trace_.origin = map_.date_format.empty()
                          ? "first record at " + format_double(min_time_) + " s"
                          : format_iso8601(min_time_);
  }
  if (map_.origin == TimeOrigin::kFixed && trace_.origin.empty())
    trace_.origin = format_iso8601(map_.origin_unix_s);
  if (map_.join_ends_fault) {
    // A node that comes back ends its open fault.
    std::vector<std::uint32_t> order(trace_.events.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return trace_.events[a].time_s < trace_.events[b].time_s;
    });
    std::vector<int> open(trace_.nodes.size(), 0);
    for (std::uint32_t i : order) {
      Event& e = trace_.events[i];
      if (e.kind == EventKind::kFaultStart) ++open[e.node];
      if (e.kind == EventKind::kFaultEnd && open[e.node] > 0) --open[e.node];
      if (e.kind == EventKind::kNodeJoin && open[e.node] > 0) {
        e.kind = EventKind::kFaultEnd;
        --open[e.node];
      }
    }
  }
  if (map_.fleet_nodes > 0 && trace_.fleet_nodes == 0)
    trace_.fleet_nodes = std::max<int>(map_.fleet_nodes, static_cast<int>(trace_.nodes.size()));
  if (up_) {
    // Up records observed the fleet: every node named (also those that never failed) and
    // from the first record's time to the last record's end, which a written trace keeps
    // as its meta record's fleet_nodes and window.
    if (trace_.fleet_nodes == 0) trace_.fleet_nodes = static_cast<int>(trace_.nodes.size());
    if (!trace_.window) trace_.window = std::make_pair(min_time_ - shift, max_time_ - shift);
  }
  if (trace_.pairing == Pairing::kByCategory) trace_.pairing = map_.pairing;
}

}  // namespace faultline::traces::internal
