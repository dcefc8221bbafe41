// The Policy contract, declared parameters and parameter values.
//
// A policy is a deterministic single-threaded reactor: on each event it may act, set
// timers and note reasons through the World, and nothing else. Parameters are declared
// (name, help, unit, default, range) so scenarios are validated against them and
// `--help` output and reports can list them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policies/api/event.h"
#include "policies/api/world.h"

namespace faultline {

struct ParamSpec {
  std::string name;
  std::string help;
  std::string unit;  // "s", "bytes", "ratio", "count", ...
  double default_value = 0;
  double min = 0;
  double max = 0;
  // A choice among named modules: the value is the index of the name, a scenario may
  // give the name instead, and min/max are 0 and choices.size() - 1.
  std::vector<std::string> choices = {};
  // When the stack reads this parameter: "CHOICE=MODULE" conditions on its choice
  // parameters, any of which will do ("checkpoint=memory"); empty: always. A scenario
  // that sets a parameter its stack will not read is refused (policy.allow_unused_params).
  std::vector<std::string> read_when = {};

  // The index of `name` among the choices, or -1.
  int choice_index(const std::string& name) const {
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i] == name) return static_cast<int>(i);
    return -1;
  }
};

struct PolicyInfo {
  std::string name;
  std::string version;
  std::string summary;
  std::vector<ParamSpec> params;

  const ParamSpec* find_param(const std::string& n) const {
    for (const auto& p : params)
      if (p.name == n) return &p;
    return nullptr;
  }
};

class Params;
// Whether a stack with these resolved values reads `spec` (its read_when holds).
bool param_is_read(const PolicyInfo& info, const ParamSpec& spec, const Params& values);

// Resolved parameter values: every declared parameter has a value.
class Params {
 public:
  Params() = default;
  // Resolves overrides against the specs. Returns an error message naming the
  // parameter and what was expected, or nullopt when all overrides are valid.
  static std::optional<std::string> resolve(const std::vector<ParamSpec>& specs,
                                            const std::map<std::string, double>& overrides,
                                            Params* out);
  // Requires `name` to be declared. (A string_view: policies ask by literal on hot paths,
  // and the map compares without building a std::string.)
  double get(std::string_view name) const;
  // Just the parameters `specs` declares, each with its value here (its default where this
  // holds none): what a policy module built from a stack's parameters is handed, so that
  // reading a parameter it does not declare throws.
  Params only(const std::vector<ParamSpec>& specs) const;
  const std::map<std::string, double, std::less<>>& values() const { return values_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::map<std::string, double, std::less<>> values_;
  // The same values hashed by name: get() runs on policies' hot paths (a tree walk of
  // string compares cost ~2% of a simulated replica).
  std::unordered_map<std::string, double, Hash, std::equal_to<>> index_;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const PolicyInfo& info() const = 0;
  // Called once before the first event, with the job placed and not yet started.
  virtual void start(World&) {}
  virtual void on_event(const Event& e, World& w) = 0;
};

}  // namespace faultline
