// Internal to the trace readers (readers.cc, column_map.cc, record_interpreter.cc): the
// engine's middle. A container scanner (CSV or JSON, readers.cc) fills a RecordView with
// the raw text of each field the ColumnMap names; the Interpreter turns that view into a
// trace event, checking every field and reporting a bad one to the Sink. Kept apart from
// the scanners because it is the one place where what a field means is decided, the same
// for every container and format.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/readers.h"
#include "traces/scan.h"

namespace faultline::traces::internal {

inline constexpr double kMaxAbsTime = 1e12;  // seconds; ~31,700 years
// ColumnMap::event_values kind of a value whose records are skipped.
inline constexpr int kIgnore = -1;
// ColumnMap::event_values kind of a value whose records say the node was up (available)
// from the record's time to its end time: no event, but the node is in the fleet and the
// interval in the observation window.
inline constexpr int kUp = -3;

// `s` for a message: its first 40 bytes, control characters as '?'.
std::string shown(std::string_view s);

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

// One field of a record as found in the input: its text (a view into the input or the
// scanner's buffers), whether it was there at all, and whether it was a JSON null.
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

// The fields of one record that the column map names, whatever the container.
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
  // The steps of record(). Each either fills its output and returns nullopt, or returns
  // what record() returns: true for a record that is ignored, bad()'s answer for a bad one.
  using Verdict = std::optional<bool>;
  bool ignored(const RecordView& r) const;
  Verdict read_node(const RecordView& r, std::size_t line, std::string_view* node);
  Verdict read_kind(const RecordView& r, std::size_t line, EventKind* kind, bool* up);
  bool up_record(const RecordView& r, std::size_t line, double t, std::string_view node);
  Verdict read_duration(const RecordView& r, std::size_t line, EventKind kind, double* duration);
  Verdict read_end_time(const RecordView& r, std::size_t line, EventKind kind, double t,
                        double* duration);
  Verdict read_scope(const RecordView& r, std::size_t line, Scope* scope);
  Verdict read_attributes(const RecordView& r, std::size_t line, Event& e);

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
  // Up records (kUp): whether any was read, and the latest time or end time of every
  // record kept, the end of the observation window they declare.
  bool up_ = false;
  double max_time_ = -INFINITY;
  scan::JRecord attrs_rec_;
  std::string node_id_;  // composite node key being joined
};

}  // namespace faultline::traces::internal
