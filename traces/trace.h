// A fault trace in memory: what every reader produces and every analysis consumes.
//
// A trace is a list of timestamped events on named nodes: a fault starts (the node is
// unavailable), a fault ends (repaired), a fault with a known duration, or a node joins
// the fleet. Each fault carries a category hierarchy (level / class / desc, as in the
// InfiniteHBD release), a scope (one node, its rack, its switch, the whole job) and free
// attributes. Node names, categories and scope ids are interned, so a million-event
// trace costs about 48 bytes an event. The canonical on-disk form is described in
// traces/FORMAT.md.
//
// Times are seconds from the trace's own origin (double: traces carry fractional days
// or milliseconds, and a float day count converts to seconds without integer rounding).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline::traces {

enum class EventKind : std::uint8_t {
  kFaultStart,  // node unavailable from here
  kFaultEnd,    // repaired; pairs with an earlier start on the same node
  kFault,       // a whole fault in one record, with duration_s when known
  kNodeJoin,    // the node enters the fleet (membership traces); not a fault
};

// What a fault takes down. kRack and kSwitch (a ToR switch) take every machine under it.
enum class Scope : std::uint8_t { kNode, kRack, kSwitch, kJob };

// How fault_end records find their fault_start (see pair_faults).
enum class Pairing : std::uint8_t { kByCategory, kFifo, kLifo };

const char* event_kind_name(EventKind k);
const char* scope_name(Scope s);
const char* pairing_name(Pairing p);
// Parses the canonical names; false when unknown.
bool parse_event_kind(std::string_view s, EventKind* out);
bool parse_scope(std::string_view s, Scope* out);
bool parse_pairing(std::string_view s, Pairing* out);

struct Category {
  std::string level;  // e.g. "Hardware Failure"
  std::string cls;    // e.g. "GPU"
  std::string desc;   // e.g. "GPU DBE(Double Bit ECC) > Threshold"
  bool operator==(const Category&) const = default;
};

struct Event {
  double time_s = 0;
  double duration_s = NAN;    // kFault only; NaN = unknown
  std::int32_t node = 0;      // index into Trace::nodes
  std::int32_t category = 0;  // index into Trace::categories
  std::int32_t group = -1;    // scope id (rack or switch name) index into Trace::groups, -1 = none
  std::int32_t attrs = -1;    // index into Trace::attrs, -1 = none
  EventKind kind = EventKind::kFault;
  Scope scope = Scope::kNode;
  std::uint32_t line = 0;  // source line of the record (0 = generated)
};

using Attributes = std::vector<std::pair<std::string, std::string>>;

// A trace and its interning tables. Readers append; analyses read. Not thread-safe.
class Trace {
 public:
  std::string source;  // file name, for messages
  std::string format;  // reader that produced it
  std::vector<Event> events;
  std::vector<std::string> nodes;
  std::vector<Category> categories;
  std::vector<std::string> groups;
  std::vector<Attributes> attrs;
  // Metadata. fleet_nodes: servers observed, including those that never failed (0 =
  // unknown). origin: what time zero is, free text (e.g. an ISO-8601 date). window: the
  // observation window when the trace declares one (else the span of its events).
  int fleet_nodes = 0;
  std::string origin;
  std::optional<std::pair<double, double>> window;
  Pairing pairing = Pairing::kByCategory;

  std::int32_t intern_node(std::string_view name);
  std::int32_t intern_category(std::string_view level, std::string_view cls, std::string_view desc);
  std::int32_t intern_group(std::string_view name);
  std::int32_t add_attributes(Attributes a);

  // Stable sort by time: records at the same time keep their file order, so a fault
  // that starts and ends in the same second still pairs.
  void sort_by_time();
  bool sorted_by_time() const;
  // First and last event time; {0, 0} when empty.
  std::pair<double, double> span() const;
  // The declared window, else the span.
  std::pair<double, double> observation_window() const;

 private:
  // Open-addressing index from a hash to an interned id; the caller compares the
  // candidates (a million-event trace interns two names per event).
  class Index {
   public:
    template <class Same>
    std::int32_t find(std::uint64_t h, Same same) const {
      if (slots_.empty()) return -1;
      for (std::size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i].id < 0) return -1;
        if (slots_[i].hash == h && same(slots_[i].id)) return slots_[i].id;
      }
    }
    void insert(std::uint64_t h, std::int32_t id);

   private:
    struct Slot {
      std::uint64_t hash = 0;
      std::int32_t id = -1;
    };
    std::vector<Slot> slots_;
    std::size_t count_ = 0;
  };
  Index node_index_, category_index_, group_index_;
};

// One fault as an interval, after pairing starts with ends.
struct FaultSpan {
  double start_s = 0;
  double end_s = NAN;  // NaN: still open at the end of the trace, or duration unknown
  std::int32_t node = 0;
  std::int32_t category = 0;
  std::int32_t group = -1;
  Scope scope = Scope::kNode;
  std::uint32_t line = 0;
  bool open() const { return std::isnan(end_s); }
  double duration_s() const { return end_s - start_s; }
};

struct PairingResult {
  std::vector<FaultSpan> faults;  // in start-time order
  std::size_t unmatched_ends = 0;
  std::size_t open = 0;                        // starts never ended
  std::vector<std::uint32_t> unmatched_lines;  // first few, for messages
};

// Pairs fault_start with fault_end per node, in time order (ties in record order):
// kByCategory takes the oldest open fault of the same category on the node, else the
// oldest; kFifo the oldest; kLifo the newest. kFault records are spans already. A
// fault_end with nothing open is counted, not an error (traces start mid-fault).
PairingResult pair_faults(const Trace& t);
PairingResult pair_faults(const Trace& t, Pairing p);

// Number formatting shared by writers and reports: shortest text that parses back to
// the same double.
std::string format_double(double v);

}  // namespace faultline::traces
