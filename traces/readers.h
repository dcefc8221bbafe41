// Trace readers: the canonical format (JSON Lines and CSV, traces/FORMAT.md), the
// InfiniteHBD release (a JSON array), Oobleck's membership CSVs, the Failure Trace
// Archive's event traces (tab-separated, blank-padded), and a generic
// CSV / JSON Lines / JSON-array reader driven by a column map, so a new log needs a
// small JSON file and no code.
//
// All of them share one engine: a scanner yields records with their line numbers, and
// a ColumnMap says which field holds the time (and in what unit or date format), the
// node, the event kind, the category, the duration, the scope and the attributes. The
// built-in formats are column maps too (builtin_column_map).
//
// Readers never throw and never stop at a bad record unless asked to: each issue goes
// to ReadOptions::reporter with the line, the field and the reason, and the record is
// skipped. Garbage input gives an empty trace and issues, not a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/issues.h"
#include "traces/trace.h"

namespace faultline::traces {

enum class Format : std::uint8_t { kAuto, kJsonl, kCsv, kInfiniteHbd, kOobleck, kColumns, kFta };

// "auto", "jsonl" (canonical JSON Lines), "csv" (canonical CSV), "infinitehbd",
// "oobleck", "columns" (generic, with a column map), "fta" (the Failure Trace Archive's
// event_trace tables; read only, never detected).
const char* format_name(Format f);
bool parse_format(std::string_view s, Format* out);
// Guesses from the file name and the first bytes: .jsonl/.ndjson → jsonl; a JSON
// array → infinitehbd; "time_ms,add|remove,node" rows → oobleck; else csv.
Format detect_format(std::string_view text, const std::string& path);

// Where a field comes from: a key (dotted path into a JSON record) or a CSV header
// name, a 0-based CSV column, or a constant for every record.
struct FieldRef {
  std::string name;
  int index = -1;
  std::string constant;
  bool is_constant = false;
  bool set() const { return is_constant || index >= 0 || !name.empty(); }
  // For messages: the key, "column 3", "column 5 (event_type)" (a built-in format's
  // column, which has both) or "constant".
  std::string describe() const;
};

enum class Container : std::uint8_t { kCsv, kJsonl, kJsonArray };
enum class TimeOrigin : std::uint8_t { kAsIs, kFirstRecord, kFixed };

// The generic reader's configuration (the "column map" file, see FORMAT.md §4).
struct ColumnMap {
  std::string name = "columns";  // for messages
  Container container = Container::kCsv;
  char delimiter = ',';
  bool header = true;  // CSV: the first row names the columns
  char comment = '#';  // CSV: lines starting with it are skipped ('\0' = none)
  bool trim = false;   // CSV: blanks (spaces, tabs) around a value are padding, not part of it

  FieldRef time;
  double time_unit_s = 1;                 // numeric times: seconds per unit
  std::string date_format;                // non-empty: times are dates (timefmt.h syntax)
  TimeOrigin origin = TimeOrigin::kAsIs;  // dates default to kFirstRecord
  double origin_unix_s = 0;               // kFixed: time zero (Unix seconds)

  // The node: one field, or a composite key of several (`node_parts`, two or more; then
  // `node` is the first of them). A composite node id is its parts' values joined with
  // '/', a '/' or '\' inside a part escaped with a '\' ("2" + "17" -> "2/17",
  // "2" + "1/7" -> "2/1\/7"), so distinct keys never share an id.
  FieldRef node;
  std::vector<FieldRef> node_parts;
  // Set: a whole fault's end time in the same row, read like `time` (same unit or date
  // format and origin); the fault lasts end - start (end >= start, else a bad record).
  // An empty end leaves the duration unknown. Not with `duration`.
  FieldRef end_time;
  FieldRef event;  // unset: every record is a whole fault
  // Event value → kind; kinds outside EventKind mean "ignore the record" (kIgnore), checked
  // before any other field, and an ignored "" matches an empty or missing value (blank
  // rows), or "the node was up" (kUp, record_interpreter.h): no event, but the node is in
  // the fleet and [time, end_time] in the observation window (the Failure Trace Archive's
  // availability intervals). Empty: the canonical names (fault_start, fault_end, fault,
  // node_join).
  std::vector<std::pair<std::string, int>> event_values;
  // A node_join on a node with an open fault ends that fault (membership traces
  // where a replaced node comes back).
  bool join_ends_fault = false;

  FieldRef duration;  // whole faults: how long the node was down
  double duration_unit_s = 1;
  FieldRef level, cls, desc;
  FieldRef scope;  // values: node|machine|rack|switch|job, or scope_values
  std::vector<std::pair<std::string, Scope>> scope_values;
  FieldRef scope_id;
  std::vector<FieldRef> attributes;  // kept as attributes, named by their key/header
  std::string attributes_object;     // canonical: every key under "attrs."
  Pairing pairing = Pairing::kByCategory;
  int fleet_nodes = 0;
  bool canonical = false;  // accepts the canonical meta record and checks kinds strictly
};

// The column maps of the built-in formats (kJsonl, kCsv, kInfiniteHbd, kOobleck, kFta).
ColumnMap builtin_column_map(Format f);
// Parses a column-map file; throws TraceError "file: $.path: expected ...".
ColumnMap parse_column_map(const std::string& json_text, const std::string& file);
ColumnMap load_column_map(const std::string& path);

struct ReadResult {
  Trace trace;
  std::size_t records = 0;  // records kept
  std::size_t skipped = 0;  // bad records skipped
  std::size_t issues = 0;   // issues reported (skipped records and warnings)
  bool stopped = false;     // strict mode stopped at the first issue
  std::string error;        // the input could not be read at all; empty when fine
  std::string first_issue;  // text of the first issue, for one-line messages
  bool ok() const { return error.empty() && !stopped; }
};

// Reads a trace from memory. `columns` is required for Format::kColumns and ignored
// otherwise; kAuto detects with `source` as the file name. Never throws except
// std::bad_alloc.
ReadResult read_trace_text(std::string_view text, Format format, const std::string& source,
                           const ReadOptions& opt, const ColumnMap* columns = nullptr);
// Reads a file (error set when it cannot be opened).
ReadResult read_trace_file(const std::string& path, Format format, const ReadOptions& opt,
                           const ColumnMap* columns = nullptr);

}  // namespace faultline::traces
