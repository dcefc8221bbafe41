// The Policy contract, declared parameters and parameter values.
//
// A policy is a deterministic single-threaded reactor: on each event it may act, set
// timers and note reasons through the World, and nothing else. Parameters are declared
// (name, help, unit, default, range) so scenarios are validated against them and
// `--help` output and reports can list them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
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
  // A choice among named modules: the value is a module's name (Params::choice), from the
  // scenario through Params to the stack that builds it. default_value is the index of the
  // default among these names and min/max are 0 and choices.size() - 1, so that a scenario
  // may still give an index, which is turned into the name at once.
  std::vector<std::string> choices = {};
  // When the stack reads this parameter: "CHOICE=MODULE" conditions on its choice
  // parameters, any of which will do ("checkpoint=memory"); empty: always. A scenario
  // that sets a parameter its stack will not read is refused (policy.allow_unused_params).
  std::vector<std::string> read_when = {};
  // A choice among modules: each choice's module version, in the choices' order (empty where
  // the stack does not say), which result.json reports beside the chosen module's name.
  std::vector<std::string> choice_versions = {};

  // The index of `name` among the choices, or -1.
  int choice_index(const std::string& name) const {
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i] == name) return static_cast<int>(i);
    return -1;
  }
  // A choice's default module name ("" for a parameter that is no choice).
  std::string default_choice() const {
    const auto i = static_cast<std::size_t>(default_value);
    return default_value >= 0 && i < choices.size() ? choices[i] : std::string();
  }
};

// A parameter's value as a scenario, a config or a command line gives it: a number, or the
// module name of a choice parameter. (A number for a choice is its index among the
// choices, as a scenario may write it; Params::resolve turns it into the name.)
class ParamValue {
 public:
  // Implicit, so that overrides read as they are written: {{"recovery", "requeue"}}.
  ParamValue() = default;
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  ParamValue(T number) : number_(static_cast<double>(number)) {}
  ParamValue(std::string name) : name_(std::move(name)), is_name_(true) {}
  ParamValue(const char* name) : ParamValue(std::string(name)) {}
  bool is_name() const { return is_name_; }
  double number() const { return number_; }
  const std::string& name() const { return name_; }
  bool operator==(const ParamValue& o) const {
    return is_name_ == o.is_name_ && (is_name_ ? name_ == o.name_ : number_ == o.number_);
  }

 private:
  double number_ = 0;
  std::string name_;
  bool is_name_ = false;
};
using ParamValues = std::map<std::string, ParamValue>;

// What of the World a stack may use that a scenario field configures: an action whose
// duration or outcome a field sets, or an event detail a field shapes. A scenario field
// that only stacks using one of these read (scenarios/stack_fields.h holds the table) is
// refused for a stack that never uses any of them, as an unread parameter is.
enum class Facility : std::uint8_t {
  kRequeue,              // AcquireMachines kRequeue: the scheduler's whole-job requeue
  kReschedule,           // AcquireMachines kReschedule: cold machines from the scheduler
  kStandby,              // the warm standby pool: AcquireMachines kStandby, SetStandbyPool,
                         // MigrateMachines
  kInspections,          // EnableInspection: InspectionAlert
  kProbeGpuDiag,         // RunProbe kGpuDiag
  kProbeIntraAllToAll,   // RunProbe kIntraAllToAll
  kProbeInterAllGather,  // RunProbe kInterAllGather (across machines or in groups)
  kProbeGroups,          // RunProbe kInterAllGather with groups (the pairwise check)
  kProbeBitwise,         // RunProbe kBitwise
  kProbeStress,          // RunProbe kStress
  kCaptureStacks,        // CaptureStacks
  kReplay,               // RunReplay
  kMitigation,           // MitigateSlowdown
  kReplicaGroups,        // EnableReplicaGroups (and RejoinReplica)
  kInPlaceRestart,       // StartJob::in_place
  kMigration,            // acts on FailureWarning (MigrateMachines)
  kEndRun,               // EndRun: the on-call's fix
  kPeerCheckpoint,       // SetCheckpointPlan kMemoryWithPeer with blocking (its throughput cost)
  kCrashCulprit,         // acts on the machine a crash log names (ProcessExit, StartFailed)
};
inline constexpr int kFacilities = 19;
static_assert(static_cast<int>(Facility::kCrashCulprit) + 1 == kFacilities, "one per facility");
// A stable snake_case word for messages and docs ("standby", "probe_gpu_diag", ...).
const char* facility_name(Facility f);
// What it is, for messages: "the warm standby pool (AcquireMachines standby, ...)".
const char* facility_summary(Facility f);

// A facility a stack may use, and when: "CHOICE=MODULE" conditions on its choice
// parameters as in ParamSpec::read_when (any of them will do); empty: always.
struct FacilityUse {
  Facility facility = Facility::kRequeue;
  std::vector<std::string> when = {};
};

struct PolicyInfo {
  std::string name;
  std::string version;
  std::string summary;
  std::vector<ParamSpec> params;
  // Every facility the stack may use, with its module choices: declared beside the stack
  // so that a scenario field only an unused facility reads is refused. nullopt: the stack
  // declares nothing (a plugin's, by default) and may use every facility, so that no field
  // is refused for it wrongly.
  std::optional<std::vector<FacilityUse>> uses = std::nullopt;

  const ParamSpec* find_param(const std::string& n) const {
    for (const auto& p : params)
      if (p.name == n) return &p;
    return nullptr;
  }
};

class Params;
// Whether a stack with these resolved values reads `spec` (its read_when holds).
bool param_is_read(const PolicyInfo& info, const ParamSpec& spec, const Params& values);
// Whether "CHOICE=MODULE" conditions hold for these values (any of them; empty: always).
// A condition on a parameter the stack does not declare as a choice is taken to hold.
bool conditions_hold(const PolicyInfo& info, const std::vector<std::string>& when,
                     const Params& values);
// Whether a stack with these resolved values may use `f`: always when it declares nothing.
bool may_use(const PolicyInfo& info, Facility f, const Params& values);

// Resolved parameter values: every declared parameter has a value, a number or, for a
// choice parameter, the name of the module it picks (never its index: the order in which
// modules are registered differs between processes, plugins loaded or not).
class Params {
 public:
  Params() = default;
  // Resolves overrides against the specs. Returns an error message naming the
  // parameter and what was expected, or nullopt when all overrides are valid.
  static std::optional<std::string> resolve(const std::vector<ParamSpec>& specs,
                                            const ParamValues& overrides, Params* out);
  // The same from numbers only, as tests hold them (a choice by its index among the specs'
  // choices, as a scenario may write it). A template, so that braced overrides ({} or
  // {{"recovery", "requeue"}}) take the overload above.
  template <class Numbers,
            std::enable_if_t<std::is_same_v<Numbers, std::map<std::string, double>>, int> = 0>
  static std::optional<std::string> resolve(const std::vector<ParamSpec>& specs,
                                            const Numbers& overrides, Params* out) {
    return resolve(specs, ParamValues(overrides.begin(), overrides.end()), out);
  }
  // A number parameter's value. Requires `name` declared and no choice (logic_error).
  // (A string_view: policies ask by literal on hot paths, and the map compares without
  // building a std::string.)
  double get(std::string_view name) const;
  // The module name a choice parameter picks. Requires `name` a declared choice.
  const std::string& choice(std::string_view name) const;
  // Just the parameters `specs` declares, each with its value here (its default where this
  // holds none): what a policy module built from a stack's parameters is handed, so that
  // reading a parameter it does not declare throws.
  Params only(const std::vector<ParamSpec>& specs) const;
  // The number parameters, and the choice parameters with their module names.
  const std::map<std::string, double, std::less<>>& values() const { return values_; }
  const std::map<std::string, std::string, std::less<>>& choices() const { return choices_; }
  // The version of the module a choice parameter picks, as its spec declared it (nullptr:
  // no choice of that name, or its spec gave no versions): the module that was built.
  const std::string* version(std::string_view choice) const {
    const auto it = versions_.find(choice);
    return it == versions_.end() ? nullptr : &it->second;
  }
  bool operator==(const Params& o) const { return values_ == o.values_ && choices_ == o.choices_; }
  bool operator!=(const Params& o) const { return !(*this == o); }

 private:
  // versions_ from the specs' choice_versions, for the modules choices_ names.
  void note_versions(const std::vector<ParamSpec>& specs);
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::map<std::string, double, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> choices_;
  std::map<std::string, std::string, std::less<>> versions_;  // of choices_' modules
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
