#include "traces/readers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <new>
#include <set>
#include <sstream>

#include "traces/config.h"
#include "traces/scan.h"
#include "traces/timefmt.h"

namespace faultline::traces {

namespace {

constexpr double kMaxAbsTime = 1e12;  // seconds; ~31,700 years
constexpr int kIgnore = -1;

std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  if (s.size() > 40) out += "...";
  return out;
}

// Seconds from a value in `unit_s` seconds. Sub-second units divide (v / 1000 is the
// double nearest to the exact quotient; v * 0.001 is not always).
double scale_unit(double v, double unit_s) {
  return unit_s < 1 ? v / std::round(1 / unit_s) : v * unit_s;
}

// Issue accounting shared by every reader.
class Sink {
 public:
  Sink(const ReadOptions& opt, ReadResult& res, std::string source)
      : opt_(opt), res_(res), source_(std::move(source)) {}
  // Reports an issue; returns true when reading must stop (strict mode).
  bool issue(std::size_t line, std::string field, std::string reason, bool skipped = true) {
    Issue is{source_, line, std::move(field), std::move(reason)};
    if (res_.issues == 0) res_.first_issue = is.text();
    ++res_.issues;
    if (skipped) ++res_.skipped;
    if (opt_.reporter) opt_.reporter->report(is);
    if (opt_.strict) res_.stopped = true;
    return opt_.strict;
  }
  bool stopped() const { return res_.stopped; }
  const std::string& source() const { return source_; }

 private:
  const ReadOptions& opt_;
  ReadResult& res_;
  std::string source_;
};

struct Slot {
  std::string_view text;
  bool present = false;
  bool null = false;
  void set(std::string_view t, bool is_null = false) {
    text = t;
    present = true;
    null = is_null;
  }
  bool empty() const { return !present || null || text.empty(); }
};

struct RecordView {
  Slot time, end_time, node, event, duration, level, cls, desc, scope, scope_id, attrs_text;
  std::vector<Slot> node_parts;  // composite node key: one slot per ColumnMap::node_parts
  std::vector<std::pair<std::string_view, Slot>> attrs;
  void clear() {
    for (Slot* s : {&time, &end_time, &node, &event, &duration, &level, &cls, &desc, &scope,
                    &scope_id, &attrs_text})
      *s = Slot{};
    for (Slot& s : node_parts) s = Slot{};
    attrs.clear();
  }
};

// Appends a composite node key's part, escaping '/' and '\\' so the join is one-to-one.
void append_key_part(std::string& id, std::string_view part, bool first) {
  if (!first) id += '/';
  for (char c : part) {
    if (c == '/' || c == '\\') id += '\\';
    id += c;
  }
}

// Turns records (whatever their container) into trace events.
class Interpreter {
 public:
  Interpreter(const ColumnMap& map, Trace& trace, Sink& sink, ReadResult& res)
      : map_(map), trace_(trace), sink_(sink), res_(res) {}

  // Returns false when reading must stop.
  bool record(const RecordView& r, std::size_t line);
  bool meta(const scan::JRecord& rec, std::size_t line, std::size_t first_meta_field);
  void finish();

 private:
  // Reports a bad record; returns whether reading goes on (false in strict mode).
  bool bad(std::size_t line, const FieldRef& f, const char* canonical, const std::string& why) {
    return !sink_.issue(line, map_.canonical ? std::string(canonical) : f.describe(), why);
  }

  // A time field (the start or the end) in seconds; false with *why set when malformed.
  bool parse_time(const Slot& s, double* t, std::string* why) const;

  const ColumnMap& map_;
  Trace& trace_;
  Sink& sink_;
  ReadResult& res_;
  double min_time_ = INFINITY;
  scan::JRecord attrs_rec_;
  std::string node_id_;  // composite node key being joined
};

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
  // An event value listed under "ignore" skips the record before anything else is
  // checked: "ignore": [""] skips the blank rows of an export, whose other fields are
  // empty too.
  if (map_.event.set() && !map_.event_values.empty()) {
    const std::string_view v = r.event.empty() ? std::string_view() : r.event.text;
    for (const auto& [value, kk] : map_.event_values)
      if (kk == kIgnore && value == v) return true;
  }

  // Time.
  double t = 0;
  if (r.time.empty()) return bad(line, map_.time, "time_s", "missing time");
  {
    std::string why;
    if (!parse_time(r.time, &t, &why)) return bad(line, map_.time, "time_s", why);
  }

  // Node.
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

  // Event kind.
  EventKind kind = EventKind::kFault;
  if (map_.event.set()) {
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
    if (k < 0) {
      std::string known;
      if (map_.event_values.empty()) {
        known = "fault_start|fault_end|fault|node_join";
      } else {
        for (const auto& [value, kk] : map_.event_values)
          known += (known.empty() ? "" : "|") + value;
      }
      return bad(line, map_.event, "event",
                 "unknown event kind \"" + shown(r.event.text) + "\" (expected " + known + ")");
    }
    kind = static_cast<EventKind>(k);
  }

  // Duration.
  double duration = NAN;
  if (map_.duration.set() && !r.duration.empty()) {
    double d = 0;
    if (!scan::parse_double(r.duration.text, &d) || d < 0)
      return bad(line, map_.duration, "duration_s",
                 "expected a number >= 0, got \"" + shown(r.duration.text) + "\"");
    d = scale_unit(d, map_.duration_unit_s);
    if (!(d <= kMaxAbsTime)) return bad(line, map_.duration, "duration_s", "duration out of range");
    if (kind == EventKind::kFault) {
      duration = d;
    } else if (map_.canonical) {
      return bad(line, map_.duration, "duration_s",
                 std::string("duration_s applies to event \"fault\" only, not \"") +
                     event_kind_name(kind) + "\"");
    }
  }

  // End time: a whole fault's end in the same row.
  if (map_.end_time.set() && !r.end_time.empty()) {
    if (kind != EventKind::kFault)
      return bad(line, map_.end_time, "end_time",
                 std::string("an end time applies to whole faults only, not to \"") +
                     event_kind_name(kind) + "\" records");
    double end = 0;
    std::string why;
    if (!parse_time(r.end_time, &end, &why)) return bad(line, map_.end_time, "end_time", why);
    if (!(end >= t))
      return bad(line, map_.end_time, "end_time",
                 "end time " + shown(r.end_time.text) + " is before the start " +
                     shown(r.time.text) + " (expected end >= start)");
    duration = end - t;
  }

  // Scope.
  Scope scope = Scope::kNode;
  if (map_.scope.set() && !r.scope.empty()) {
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
  }

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

  // Attributes.
  if (!r.attrs.empty() || !r.attrs_text.empty()) {
    Attributes a;
    for (const auto& [k, v] : r.attrs)
      if (v.present && !v.null) a.emplace_back(std::string(k), std::string(v.text));
    if (!r.attrs_text.empty()) {
      // CSV canonical: a JSON object of strings in one cell.
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
  }
  min_time_ = std::min(min_time_, t);
  trace_.events.push_back(e);
  ++res_.records;
  return true;
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
  if (map_.origin == TimeOrigin::kFirstRecord && std::isfinite(min_time_) && min_time_ != 0) {
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
  if (trace_.pairing == Pairing::kByCategory) trace_.pairing = map_.pairing;
}

// ------------------------------------------------------------------ JSON containers

// Fills a RecordView from a flattened JSON record through the column map.
class JsonBinder {
 public:
  explicit JsonBinder(const ColumnMap& map) : map_(map) {
    if (map.canonical) return;
    attr_names_.reserve(map.attributes.size());
    for (const auto& a : map.attributes) attr_names_.push_back(a.name);
  }
  void bind(const scan::JRecord& rec, RecordView& v, Sink& sink, std::size_t line,
            std::set<std::string>& warned) {
    v.clear();
    if (map_.canonical) {
      bind_canonical(rec, v, sink, line, warned);
      return;
    }
    auto get = [&](const FieldRef& f, Slot& s) {
      if (f.is_constant) {
        s.set(f.constant);
      } else if (!f.name.empty()) {
        if (const scan::JField* jf = rec.find(f.name))
          s.set(jf->value, jf->type == scan::JType::kNull);
      }
    };
    get(map_.time, v.time);
    get(map_.end_time, v.end_time);
    if (map_.node_parts.empty()) {
      get(map_.node, v.node);
    } else {
      v.node_parts.resize(map_.node_parts.size());
      for (std::size_t i = 0; i < map_.node_parts.size(); ++i)
        get(map_.node_parts[i], v.node_parts[i]);
    }
    get(map_.event, v.event);
    get(map_.duration, v.duration);
    get(map_.level, v.level);
    get(map_.cls, v.cls);
    get(map_.desc, v.desc);
    get(map_.scope, v.scope);
    get(map_.scope_id, v.scope_id);
    for (const auto& a : map_.attributes) {
      Slot s;
      get(a, s);
      if (s.present) v.attrs.emplace_back(a.name, s);
    }
  }

 private:
  void bind_canonical(const scan::JRecord& rec, RecordView& v, Sink& sink, std::size_t line,
                      std::set<std::string>& warned) {
    for (std::size_t i = 0; i < rec.size(); ++i) {
      const scan::JField& f = rec[i];
      const std::string_view k = f.key;
      const bool null = f.type == scan::JType::kNull;
      Slot* s = nullptr;
      switch (k.size()) {
        case 4:
          if (k == "node")
            s = &v.node;
          else if (k == "desc")
            s = &v.desc;
          break;
        case 5:
          if (k == "event")
            s = &v.event;
          else if (k == "level")
            s = &v.level;
          else if (k == "class")
            s = &v.cls;
          else if (k == "scope")
            s = &v.scope;
          break;
        case 6:
          if (k == "time_s") s = &v.time;
          break;
        case 8:
          if (k == "scope_id") s = &v.scope_id;
          break;
        case 10:
          if (k == "duration_s") s = &v.duration;
          break;
        default:
          break;
      }
      if (s) {
        s->set(f.value, null);
        continue;
      }
      if (k.size() >= 6 && k.compare(0, 6, "attrs.") == 0) {
        Slot a;
        a.set(f.value, null);
        v.attrs.emplace_back(k.substr(6), a);
        continue;
      }
      if (warned.insert(std::string(k)).second)
        sink.issue(line, std::string(k), "unknown key ignored", false);
    }
  }

  const ColumnMap& map_;
  std::vector<std::string> attr_names_;
};

void read_json(std::string_view text, const ColumnMap& map, Trace& trace, Sink& sink,
               ReadResult& res) {
  Interpreter in(map, trace, sink, res);
  JsonBinder binder(map);
  scan::JRecord rec;
  RecordView view;
  std::set<std::string> warned;
  std::string err;
  auto handle = [&](std::size_t line) {
    if (map.canonical && rec.size() > 0 && rec[0].key.compare(0, 5, "meta.") == 0)
      return in.meta(rec, line, 0);
    binder.bind(rec, view, sink, line, warned);
    if (sink.stopped()) return false;
    return in.record(view, line);
  };
  scan::JsonCursor c(text);
  if (map.container == Container::kJsonl) {
    while (true) {
      c.skip_ws();
      if (c.at_end()) break;
      const std::size_t line = c.line();
      if (!c.object(rec, &err)) {
        if (sink.issue(line, "", "invalid JSON: " + err)) return;
        c.skip_line();
        continue;
      }
      // The rest of the line must be blank.
      while (!c.at_end() && (c.peek() == ' ' || c.peek() == '\t' || c.peek() == '\r')) c.advance();
      if (!c.at_end() && c.peek() != '\n') {
        if (sink.issue(line, "", "text after the JSON object")) return;
        c.skip_line();
        continue;
      }
      if (!handle(line)) return;
    }
  } else {
    c.skip_ws();
    if (c.peek() != '[') {
      sink.issue(c.line(), "", "expected a JSON array of records");
      return;
    }
    c.advance();
    bool expect_more = false;
    while (true) {
      c.skip_ws();
      if (c.at_end()) {
        sink.issue(c.line(), "", "unterminated array (missing ']')", false);
        break;
      }
      if (c.peek() == ']' && !expect_more) {
        c.advance();
        c.skip_ws();
        if (!c.at_end()) sink.issue(c.line(), "", "text after the closing ']' ignored", false);
        break;
      }
      const std::size_t line = c.line();
      if (!c.object(rec, &err)) {
        if (sink.issue(line, "", "invalid JSON: " + err)) return;
        c.resync_to_next_object_line();
        expect_more = false;
        continue;
      }
      if (!handle(line)) return;
      c.skip_ws();
      if (c.peek() == ',') {
        c.advance();
        expect_more = true;
      } else if (c.peek() == ']') {
        expect_more = false;
      } else {
        if (sink.issue(c.line(), "", "expected ',' or ']' after a record")) return;
        c.resync_to_next_object_line();
        expect_more = false;
      }
    }
  }
  in.finish();
}

// ------------------------------------------------------------------ CSV

void read_csv(std::string_view text, const ColumnMap& map, Trace& trace, Sink& sink,
              ReadResult& res) {
  Interpreter in(map, trace, sink, res);
  scan::CsvCursor c(text, map.delimiter, map.comment);
  std::vector<std::string> row;
  std::size_t line = 0;
  std::string err;
  // Column index of every field reference, once the header is known.
  struct Bound {
    const FieldRef* ref;
    Slot RecordView::*slot;
    int index;
  };
  std::vector<Bound> bound;
  std::vector<int> part_cols;  // composite node key: the column of each part
  std::vector<std::pair<std::string, int>> attr_cols;
  int attrs_col = -1;
  const std::pair<const FieldRef*, Slot RecordView::*> refs[] = {
      {&map.time, &RecordView::time},         {&map.end_time, &RecordView::end_time},
      {&map.node, &RecordView::node},         {&map.event, &RecordView::event},
      {&map.duration, &RecordView::duration}, {&map.level, &RecordView::level},
      {&map.cls, &RecordView::cls},           {&map.desc, &RecordView::desc},
      {&map.scope, &RecordView::scope},       {&map.scope_id, &RecordView::scope_id}};
  auto bind = [&](const std::vector<std::string>* header, std::size_t hline) {
    auto column = [&](const FieldRef& f) -> int {
      if (f.is_constant || !f.set()) return -1;
      if (f.index >= 0) return f.index;
      if (!header) return -1;
      for (std::size_t i = 0; i < header->size(); ++i)
        if ((*header)[i] == f.name) return static_cast<int>(i);
      return -2;
    };
    for (const FieldRef& part : map.node_parts) {
      const int col = column(part);
      if (col == -2) {
        sink.issue(hline, part.name, "column \"" + part.name + "\" is not in the header");
        return false;
      }
      part_cols.push_back(col);
    }
    for (const auto& [ref, slot] : refs) {
      if (ref == &map.node && !map.node_parts.empty()) continue;
      const int col = column(*ref);
      if (col == -2) {
        const bool required = ref == &map.time || ref == &map.node || ref == &map.end_time ||
                              (ref == &map.event && map.canonical);
        // A missing optional column is simply absent in every row.
        if (required) {
          sink.issue(hline, ref->name, "column \"" + ref->name + "\" is not in the header");
          return false;
        }
        continue;
      }
      if (col >= 0 || ref->is_constant) bound.push_back({ref, slot, col});
    }
    for (const auto& a : map.attributes) {
      const int col = column(a);
      if (col >= 0)
        attr_cols.emplace_back(
            a.index >= 0 && a.name.empty() ? "column" + std::to_string(a.index) : a.name, col);
    }
    if (!map.attributes_object.empty() && header) {
      for (std::size_t i = 0; i < header->size(); ++i)
        if ((*header)[i] == map.attributes_object) attrs_col = static_cast<int>(i);
    }
    if (map.canonical && header) {
      static const std::set<std::string> known = {"time_s",   "node", "event",      "level",
                                                  "class",    "desc", "duration_s", "scope",
                                                  "scope_id", "attrs"};
      for (const auto& h : *header)
        if (!known.count(h) && sink.issue(hline, h, "unknown column ignored", false)) return false;
    }
    return true;
  };
  bool have_header = !map.header;
  if (!map.header && !bind(nullptr, 0)) return;
  RecordView view;
  while (true) {
    const auto kind = c.next(row, line, &err);
    if (kind == scan::CsvCursor::Row::kEnd) break;
    if (kind == scan::CsvCursor::Row::kBlank) continue;
    if (kind == scan::CsvCursor::Row::kError) {
      if (sink.issue(line, "", err)) return;
      continue;
    }
    if (kind == scan::CsvCursor::Row::kComment) {
      if (map.canonical && row.size() == 1 && row[0].compare(0, 5, "meta ") == 0) {
        scan::JsonCursor jc(std::string_view(row[0]).substr(5));
        scan::JRecord rec;
        std::string jerr;
        if (!jc.object(rec, &jerr)) {
          if (sink.issue(line, "meta", "invalid JSON: " + jerr, false)) return;
          continue;
        }
        // Re-key as "meta.x" for the shared handler.
        scan::JRecord keyed;
        for (std::size_t i = 0; i < rec.size(); ++i)
          keyed.add_copy("meta." + std::string(rec[i].key), rec[i].value, rec[i].type);
        keyed.seal();
        if (!in.meta(keyed, line, 0)) return;
      }
      continue;
    }
    if (!have_header) {
      have_header = true;
      if (!bind(&row, line)) return;
      continue;
    }
    view.clear();
    for (const Bound& b : bound) {
      if (b.ref->is_constant) {
        (view.*(b.slot)).set(b.ref->constant);
      } else if (b.index < static_cast<int>(row.size())) {
        (view.*(b.slot)).set(row[static_cast<std::size_t>(b.index)]);
      }
    }
    view.node_parts.resize(part_cols.size());
    for (std::size_t i = 0; i < part_cols.size(); ++i)
      if (part_cols[i] < static_cast<int>(row.size()))
        view.node_parts[i].set(row[static_cast<std::size_t>(part_cols[i])]);
    for (const auto& [name, col] : attr_cols) {
      if (col < static_cast<int>(row.size()) && !row[static_cast<std::size_t>(col)].empty()) {
        Slot s;
        s.set(row[static_cast<std::size_t>(col)]);
        view.attrs.emplace_back(name, s);
      }
    }
    if (attrs_col >= 0 && attrs_col < static_cast<int>(row.size()) &&
        !row[static_cast<std::size_t>(attrs_col)].empty())
      view.attrs_text.set(row[static_cast<std::size_t>(attrs_col)]);
    if (!in.record(view, line)) return;
  }
  in.finish();
}

// ------------------------------------------------------------------ column-map files

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

}  // namespace

std::string FieldRef::describe() const {
  if (is_constant) return "constant";
  if (!name.empty()) return name;
  return "column " + std::to_string(index);
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kAuto:
      return "auto";
    case Format::kJsonl:
      return "jsonl";
    case Format::kCsv:
      return "csv";
    case Format::kInfiniteHbd:
      return "infinitehbd";
    case Format::kOobleck:
      return "oobleck";
    case Format::kColumns:
      return "columns";
  }
  return "?";
}

bool parse_format(std::string_view s, Format* out) {
  for (Format f : {Format::kAuto, Format::kJsonl, Format::kCsv, Format::kInfiniteHbd,
                   Format::kOobleck, Format::kColumns})
    if (s == format_name(f)) {
      *out = f;
      return true;
    }
  return false;
}

Format detect_format(std::string_view text, const std::string& path) {
  auto ends = [&](std::string_view suf) {
    return path.size() >= suf.size() &&
           path.compare(path.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(".jsonl") || ends(".ndjson")) return Format::kJsonl;
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
    ++i;
  if (i < text.size() && text[i] == '[') return Format::kInfiniteHbd;
  if (i < text.size() && text[i] == '{') return Format::kJsonl;
  // First non-comment line: "digits,add|remove,name" is Oobleck.
  while (i < text.size() && text[i] == '#') {
    while (i < text.size() && text[i] != '\n') ++i;
    while (i < text.size() && (text[i] == '\n' || text[i] == '\r')) ++i;
  }
  std::size_t j = i;
  while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
  if (j > i) {
    std::string_view rest = text.substr(j);
    if (rest.substr(0, 5) == ",add," || rest.substr(0, 8) == ",remove,") return Format::kOobleck;
  }
  return Format::kCsv;
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
  }
  return m;
}

ColumnMap parse_column_map(const std::string& json_text, const std::string& file) {
  nlohmann::json doc = parse_config_json(json_text, file);
  ConfigObj o(doc, "$", file);
  ColumnMap m;
  m.name = file;
  o.string("description", "");
  const std::string fmt = o.choice("format", "", {"csv", "jsonl", "json"});
  if (fmt.empty()) o.fail("$.format", "required: csv|jsonl|json");
  m.container = fmt == "csv"     ? Container::kCsv
                : fmt == "jsonl" ? Container::kJsonl
                                 : Container::kJsonArray;
  const bool csv = m.container == Container::kCsv;
  if (csv) {
    const std::string d = o.string("delimiter", ",");
    if (d.size() != 1 || d == "\"" || d == "\n" || d == "\r")
      o.fail("$.delimiter", "expected one character (not a quote or newline)");
    m.delimiter = d == "\\t" ? '\t' : d[0];
    m.header = o.boolean("header", true);
    const std::string c = o.string("comment", "#");
    if (c.size() > 1) o.fail("$.comment", "expected one character or \"\"");
    m.comment = c.empty() ? '\0' : c[0];
  } else {
    for (const char* k : {"delimiter", "header", "comment"})
      if (o.has(k)) o.fail(o.at(k), "only for \"format\": \"csv\"");
  }
  const nlohmann::json* extra = nullptr;
  m.time = field_ref(o, "time", csv, m.header, false, &extra);
  if (!m.time.set()) o.fail("$.time", "required: the field holding the time");
  if (extra) {
    ConfigObj t(*extra, "$.time", file);
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
  m.origin = m.date_format.empty() ? TimeOrigin::kAsIs : TimeOrigin::kFirstRecord;
  if (const nlohmann::json* ov = o.get("origin")) {
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
  if (const nlohmann::json* nv = o.get("node"); nv && nv->is_array()) {
    // A composite key: two or more fields joined into one node id.
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
  m.event = field_ref(o, "event", csv, m.header, false, &extra);
  if (extra) {
    ConfigObj e(*extra, "$.event", file);
    e.get("field");
    std::set<std::string> seen;
    const std::pair<const char*, int> kinds[] = {
        {"start", static_cast<int>(EventKind::kFaultStart)},
        {"end", static_cast<int>(EventKind::kFaultEnd)},
        {"fault", static_cast<int>(EventKind::kFault)},
        {"join", static_cast<int>(EventKind::kNodeJoin)},
        {"ignore", kIgnore}};
    for (const auto& [key, kind] : kinds) {
      for (const auto& v : e.strings(key)) {
        if (!seen.insert(v).second) e.fail(e.at(key), "value \"" + shown(v) + "\" listed twice");
        m.event_values.emplace_back(v, kind);
      }
    }
    if (m.event_values.empty())
      e.fail("$.event", "expected value lists: start, end, fault, join, ignore (at least one)");
    e.finish();
  }
  m.join_ends_fault = o.boolean("rejoin_ends_fault", false);
  m.duration = field_ref(o, "duration", csv, m.header, false, &extra);
  if (extra) {
    ConfigObj d(*extra, "$.duration", file);
    d.get("field");
    m.duration_unit_s = unit_seconds(d, "unit", 1);
    d.finish();
  }
  m.end_time = field_ref(o, "end_time", csv, m.header, false, &extra);
  if (extra) {
    // Read like the start time: its unit or date format are the start's.
    ConfigObj e(*extra, "$.end_time", file);
    e.get("field");
    e.finish();
  }
  if (m.end_time.set() && m.duration.set())
    o.fail("$.end_time", "not with \"duration\" (a row holds an end time or a duration)");
  m.level = field_ref(o, "level", csv, m.header, true, nullptr);
  m.cls = field_ref(o, "class", csv, m.header, true, nullptr);
  m.desc = field_ref(o, "desc", csv, m.header, true, nullptr);
  m.scope = field_ref(o, "scope", csv, m.header, true, &extra);
  if (extra) {
    ConfigObj s(*extra, "$.scope", file);
    s.get("field");
    s.get("value");
    for (const auto& [key, scope] :
         {std::pair{"node", Scope::kNode}, std::pair{"rack", Scope::kRack},
          std::pair{"switch", Scope::kSwitch}, std::pair{"job", Scope::kJob}})
      for (const auto& v : s.strings(key)) m.scope_values.emplace_back(v, scope);
    s.finish();
    if (m.scope.is_constant) {
      Scope sc;
      if (!parse_scope(m.scope.constant, &sc))
        s.fail("$.scope.value", "expected node|rack|switch|job");
    }
  }
  m.scope_id = field_ref(o, "scope_id", csv, m.header, false, nullptr);
  if (const nlohmann::json* av = o.get("attributes")) {
    if (!av->is_array()) o.fail("$.attributes", "expected an array of field names");
    for (std::size_t i = 0; i < av->size(); ++i) {
      nlohmann::json wrap = {{"a", (*av)[i]}};
      ConfigObj w(wrap, "$.attributes[" + std::to_string(i) + "]", file);
      FieldRef f = field_ref(w, "a", csv, m.header, false, nullptr);
      m.attributes.push_back(f);
    }
  }
  const std::string pairing = o.choice("pairing", "by_category", {"by_category", "fifo", "lifo"});
  parse_pairing(pairing, &m.pairing);
  m.fleet_nodes = static_cast<int>(o.integer("fleet_nodes", 0, 0, 100'000'000));
  o.finish();
  return m;
}

ColumnMap load_column_map(const std::string& path) {
  return parse_column_map(read_text_file(path), path);
}

ReadResult read_trace_text(std::string_view text, Format format, const std::string& source,
                           const ReadOptions& opt, const ColumnMap* columns) {
  ReadResult res;
  try {
    if (format == Format::kAuto) format = detect_format(text, source);
    ColumnMap builtin;
    const ColumnMap* map = columns;
    if (format == Format::kColumns) {
      if (!columns) {
        res.error = source + ": format \"columns\" needs a column map";
        return res;
      }
    } else {
      builtin = builtin_column_map(format);
      map = &builtin;
    }
    res.trace.source = source;
    res.trace.format =
        format == Format::kColumns ? "columns:" + columns->name : format_name(format);
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    Sink sink(opt, res, source);
    if (map->container == Container::kCsv) {
      read_csv(text, *map, res.trace, sink, res);
    } else {
      read_json(text, *map, res.trace, sink, res);
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Nothing above throws by design; this is a last line so callers never see one.
    res.error = source + ": " + e.what();
  }
  return res;
}

namespace {

// A read-only view of a whole file: mapped when possible (no copy, no zeroed pages
// for a 150 MB trace), else read into memory.
class FileText {
 public:
  explicit FileText(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error_ = path + ": cannot open file";
      return;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p =
          ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        map_ = p;
        size_ = static_cast<std::size_t>(st.st_size);
        ::madvise(p, size_, MADV_SEQUENTIAL);
        ::close(fd);
        return;
      }
    }
    ::close(fd);
    try {
      copy_ = read_text_file(path);
    } catch (const TraceError& e) {
      error_ = e.what();
    }
  }
  ~FileText() {
    if (map_) ::munmap(map_, size_);
  }
  FileText(const FileText&) = delete;
  FileText& operator=(const FileText&) = delete;
  std::string_view text() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : copy_;
  }
  const std::string& error() const { return error_; }

 private:
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::string copy_;
  std::string error_;
};

}  // namespace

ReadResult read_trace_file(const std::string& path, Format format, const ReadOptions& opt,
                           const ColumnMap* columns) {
  const FileText file(path);
  if (!file.error().empty()) {
    ReadResult res;
    res.error = file.error();
    return res;
  }
  return read_trace_text(file.text(), format, path, opt, columns);
}

}  // namespace faultline::traces
