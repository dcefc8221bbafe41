// The mapping table: a trace's fault classes to the simulator's fault categories.
//
// A trace says "Hardware Failure / GPU / GPU Lost"; the simulator needs a category
// with a symptom (crash, hang, slowdown, nan), a scope, persistence, the inspection
// alert that can see it and the log signature. The table lists those categories, in
// exactly the scenario's category format minus the rates (a trace supplies them), and
// first-match rules from (level, class, desc, scope) patterns to category names. It
// is a JSON file (traces/mappings/infinitehbd.json is the shipped one; FORMAT.md §5):
//
//   {"description": "...",
//    "categories": [{"name": "gpu_fatal", "symptom": "crash", "persistent": true, ...}],
//    "rules": [{"class": "GPU", "desc": "GPU Lost", "category": "gpu_fatal"},
//              {"scope": "switch", "category": "tor_switch"}],
//    "default": "unknown"}
//
// Patterns are exact text or globs with '*'; an omitted key matches anything.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace faultline::traces {

struct MatchRule {
  std::string level, cls, desc, scope;  // glob patterns; empty = any
  int category = -1;
};

struct CategoryMap {
  std::string file;
  std::vector<nlohmann::json> categories;  // scenario category objects without rates
  std::vector<std::string> names;
  std::vector<Scope> scopes;  // each category's scope: machine -> kNode, rack -> kRack, job -> kJob
  std::vector<MatchRule> rules;
  int default_category = -1;

  // First matching category for a trace category seen with an event scope, else the
  // default, else -1.
  int match(const Category& c, Scope event_scope) const;
  int find(const std::string& name) const;
};

// Throws TraceError "file: $.rules[2].category: expected ...".
CategoryMap parse_category_map(const std::string& json_text, const std::string& file);
CategoryMap load_category_map(const std::string& path);
// Without a table: one crash category per trace class (name from the class, e.g.
// "Power Supply" -> "power_supply"), machine scope, persistent; rack, switch and job
// scope events get rack / job categories of their own.
CategoryMap identity_category_map(const Trace& t);

// The category of every fault of a pairing, through a mapping table.
struct MappedFaults {
  std::vector<int>
      category;  // per fault: the mapping category, or -1 (unmapped, merged, mismatched)
  std::size_t mapped = 0, unmapped = 0, merged = 0, scope_mismatch = 0;
  std::vector<std::uint32_t> unmapped_lines, mismatch_lines;  // first few source lines
};
// Maps faults to categories. A rack-, switch- or job-scope event recorded once per
// affected node is one incident: events of the same category and scope_id (job scope:
// any) that start within `merge_window_s` of the first are merged into it. A rack or
// switch event needs a rack-scope category and a job event a job-scope one; any other
// pairing is a scope mismatch (the fault is left out and counted).
MappedFaults map_faults(const Trace& t, const std::vector<FaultSpan>& faults,
                        const CategoryMap& map, double merge_window_s = 60);

// '*' matches any run of characters; everything else matches itself.
bool glob_match(std::string_view pattern, std::string_view text);
// "Power Supply" -> "power_supply".
std::string slug(std::string_view s);

}  // namespace faultline::traces
