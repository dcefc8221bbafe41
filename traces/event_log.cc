#include "traces/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include "traces/config.h"
#include "traces/stats.h"

namespace faultline::traces {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------- scalars

// JSON has no infinities or NaN: they travel as strings.
json real_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

// Seconds as the correctly rounded quotient, so decoding can find the exact ns back.
double to_s(Duration d) { return static_cast<double>(d.ns) / 1e9; }

Duration from_s(double x) {
  if (x >= 9.2e9) return Duration::infinite();
  if (x <= -9.2e9) return Duration{std::numeric_limits<std::int64_t>::min()};
  const std::int64_t n = std::llround(x * 1e9);
  for (std::int64_t d : {0, -1, 1, -2, 2})
    if (static_cast<double>(n + d) / 1e9 == x) return Duration{n + d};
  return Duration{n};
}

// Reads one JSON object, remembering which keys were read so unknown keys are errors.
class In {
 public:
  In(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_, "expected an object, got " + json_type_of(j_));
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw EventLogError(path + ": " + what);
  }
  std::string at(const std::string& key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json* get(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  const json& need(const std::string& key, const char* what) {
    const json* v = get(key);
    if (!v) fail(at(key), std::string("required ") + what + " is missing");
    return *v;
  }
  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi,
                       bool required = false) {
    const json* v = required ? &need(key, "integer") : get(key);
    if (!v) return def;
    return as_integer(*v, at(key), lo, hi);
  }
  std::int64_t as_integer(const json& v, const std::string& where, std::int64_t lo,
                          std::int64_t hi) const {
    if (!v.is_number_integer() && !v.is_number_unsigned())
      fail(where, "expected an integer, got " + json_type_of(v) + " " + json_brief(v));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(where, "expected an integer <= " + std::to_string(hi) + ", got " + json_brief(v));
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi)
      fail(where, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "], got " + json_brief(v));
    return x;
  }
  std::uint64_t unsigned_integer(const std::string& key, std::uint64_t def, bool required = false) {
    const json* v = required ? &need(key, "integer") : get(key);
    if (!v) return def;
    if (v->is_number_unsigned()) return v->get<std::uint64_t>();
    if (v->is_number_integer() && v->get<std::int64_t>() >= 0)
      return static_cast<std::uint64_t>(v->get<std::int64_t>());
    fail(at(key), "expected an integer >= 0, got " + json_type_of(*v) + " " + json_brief(*v));
  }
  // A number, or "inf", "-inf", "nan".
  double real(const std::string& key, double def, bool required = false) {
    const json* v = required ? &need(key, "number") : get(key);
    if (!v) return def;
    return as_real(*v, at(key));
  }
  double as_real(const json& v, const std::string& where) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    fail(where, "expected a number (or \"inf\", \"-inf\", \"nan\"), got " + json_type_of(v) + " " +
                    json_brief(v));
  }
  // A finite number within [lo, hi].
  double finite(const std::string& key, double def, double lo, double hi, bool required = false) {
    const json* v = required ? &need(key, "number") : get(key);
    if (!v) return def;
    if (!v->is_number())
      fail(at(key), "expected a number, got " + json_type_of(*v) + " " + json_brief(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      std::ostringstream o;
      o << "expected a finite number in [" << lo << ", " << hi << "], got " << json_brief(*v);
      fail(at(key), o.str());
    }
    return x;
  }
  Duration duration(const std::string& key, Duration def) {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_number())
      fail(at(key), "expected seconds (a number), got " + json_type_of(*v) + " " + json_brief(*v));
    return from_s(v->get<double>());
  }
  std::string string(const std::string& key, const std::string& def, bool required = false) {
    const json* v = required ? &need(key, "string") : get(key);
    if (!v) return def;
    if (!v->is_string())
      fail(at(key), "expected a string, got " + json_type_of(*v) + " " + json_brief(*v));
    return v->get<std::string>();
  }
  bool boolean(const std::string& key, bool def, bool required = false) {
    const json* v = required ? &need(key, "boolean") : get(key);
    if (!v) return def;
    if (!v->is_boolean())
      fail(at(key), "expected true or false, got " + json_type_of(*v) + " " + json_brief(*v));
    return v->get<bool>();
  }
  std::vector<std::int32_t> ids(const json& v, const std::string& where) const {
    if (!v.is_array())
      fail(where, "expected an array of integers, got " + json_type_of(v) + " " + json_brief(v));
    std::vector<std::int32_t> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(static_cast<std::int32_t>(as_integer(
          v[i], where + "[" + std::to_string(i) + "]", std::numeric_limits<std::int32_t>::min(),
          std::numeric_limits<std::int32_t>::max())));
    return out;
  }
  std::vector<std::int32_t> ids(const std::string& key) {
    const json* v = get(key);
    if (!v) return {};
    return ids(*v, at(key));
  }
  std::vector<std::string> strings(const std::string& key) {
    const json* v = get(key);
    if (!v) return {};
    if (!v->is_array())
      fail(at(key), "expected an array of strings, got " + json_type_of(*v) + " " + json_brief(*v));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string())
        fail(at(key) + "[" + std::to_string(i) + "]",
             "expected a string, got " + json_type_of((*v)[i]));
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }
  std::vector<bool> bools(const std::string& key) {
    const json* v = get(key);
    if (!v) return {};
    if (!v->is_array())
      fail(at(key),
           "expected an array of booleans, got " + json_type_of(*v) + " " + json_brief(*v));
    std::vector<bool> out;
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_boolean())
        fail(at(key) + "[" + std::to_string(i) + "]",
             "expected true or false, got " + json_type_of((*v)[i]));
      out.push_back((*v)[i].get<bool>());
    }
    return out;
  }
  template <class E>
  E enumerated(const std::string& key, E def, std::optional<E> (*from)(std::string_view),
               const std::vector<const char*>& names) {
    const json* v = get(key);
    if (!v) return def;
    if (v->is_string())
      if (auto e = from(v->get_ref<const std::string&>())) return *e;
    std::string all;
    for (const char* n : names) all += (all.empty() ? "" : "|") + std::string(n);
    fail(at(key), "expected one of " + all + ", got " + json_brief(*v));
  }
  // Fails on the first key that was never read.
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!seen_.count(it.key())) {
        std::string known;
        for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
        fail(at(it.key()), "unknown key; expected one of: " + known);
      }
    }
  }

 private:
  const json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

template <class E, int N>
std::optional<E> lookup(std::string_view name, const char* (*to)(E)) {
  for (int i = 0; i < N; ++i)
    if (name == to(static_cast<E>(i))) return static_cast<E>(i);
  return std::nullopt;
}

template <class E, int N>
std::vector<const char*> names_of(const char* (*to)(E)) {
  std::vector<const char*> out;
  for (int i = 0; i < N; ++i) out.push_back(to(static_cast<E>(i)));
  return out;
}

constexpr int kModes = 4, kTiers = 3, kProbes = 5, kMitigations = 2, kFaultKinds = 10,
              kRecordKinds = 9;

// ---------------------------------------------------------------- type names

template <class V>
struct TypeNames;
template <>
struct TypeNames<faultline::Event> {
  static constexpr std::array<const char*, std::variant_size_v<faultline::Event>> kNames = {
      "ProcessExit", "StartFailed",   "InspectionAlert",     "StepSample",  "JobStarted",
      "JobStopped",  "MachinesReady", "CodeUpdateRequested", "TimerFired",  "ActionFailed",
      "OracleFault", "ProbeResult",   "StacksCaptured",      "ReplayResult"};
};
template <>
struct TypeNames<faultline::Action> {
  static constexpr std::array<const char*, std::variant_size_v<faultline::Action>> kNames = {
      "StopJob",       "StartJob",         "EvictMachines", "AcquireMachines",  "SetCheckpointPlan",
      "WatchSteps",    "EnableOracle",     "Note",          "EnableInspection", "RunProbe",
      "CaptureStacks", "RunReplay",        "HotUpdate",     "RollBack",         "SetStandbyPool",
      "EndRun",        "MitigateSlowdown", "AvoidMachines"};
};

// ---------------------------------------------------------------- encoders

struct EventEncoder {
  json& o;
  void operator()(const ProcessExit& x) {
    o["machine"] = x.machine;
    o["exit_code"] = x.exit_code;
    o["signature"] = x.signature;
    if (x.step >= 0) o["step"] = x.step;
  }
  void operator()(const StartFailed& x) {
    o["action"] = x.action;
    o["machine"] = x.machine;
    o["signature"] = x.signature;
    if (x.step >= 0) o["step"] = x.step;
  }
  void operator()(const InspectionAlert& x) {
    o["machine"] = x.machine;
    o["kind"] = x.kind;
    o["detail"] = x.detail;
  }
  void operator()(const StepSample& x) {
    o["step"] = x.step;
    o["step_time_s"] = real_json(x.step_time_s);
    if (x.loss) o["loss"] = real_json(*x.loss);
    if (x.grad_norm) o["grad_norm"] = real_json(*x.grad_norm);
    o["nan"] = x.nan;
    o["steady"] = x.steady;
  }
  void operator()(const JobStarted& x) {
    o["action"] = x.action;
    o["step"] = x.step;
  }
  void operator()(const JobStopped& x) { o["action"] = x.action; }
  void operator()(const MachinesReady& x) {
    o["action"] = x.action;
    o["machines"] = x.machines;
  }
  void operator()(const CodeUpdateRequested& x) {
    o["version"] = x.version;
    o["urgent"] = x.urgent;
  }
  void operator()(const TimerFired& x) {
    o["timer"] = x.timer;
    o["tag"] = x.tag;
  }
  void operator()(const ActionFailed& x) {
    o["action"] = x.action;
    o["reason"] = x.reason;
  }
  void operator()(const OracleFault& x) {
    o["machines"] = x.machines;
    o["category"] = x.category;
    o["persistent"] = x.persistent;
    o["code_bug"] = x.code_bug;
    o["data_bug"] = x.data_bug;
  }
  void operator()(const ProbeResult& x) {
    o["action"] = x.action;
    o["test"] = probe_name(x.test);
    o["failed"] = x.failed;
    o["timed_out"] = x.timed_out;
    if (!x.group_failed.empty() || !x.group_seconds.empty()) {
      json f = json::array(), t = json::array();
      for (bool b : x.group_failed) f.push_back(b);
      for (double d : x.group_seconds) t.push_back(real_json(d));
      o["group_failed"] = std::move(f);
      o["group_seconds"] = std::move(t);
    }
  }
  void operator()(const StacksCaptured& x) {
    o["action"] = x.action;
    o["by_slot"] = x.stacks.strings();
  }
  void operator()(const ReplayResult& x) {
    o["action"] = x.action;
    json a = json::array();
    for (bool b : x.group_failed) a.push_back(b);
    o["group_failed"] = std::move(a);
  }
};

struct ActionEncoder {
  json& o;
  void operator()(const StopJob& x) { o["reason"] = x.reason; }
  void operator()(const StartJob& x) {
    o["reason"] = x.reason;
    o["mechanism"] = mechanism_name(x.mechanism);
    if (!x.version.empty()) o["version"] = x.version;
  }
  void operator()(const EvictMachines& x) {
    if (x.retire) o["retire"] = true;
    o["machines"] = x.machines;
    o["reason"] = x.reason;
    o["mechanism"] = mechanism_name(x.mechanism);
  }
  void operator()(const AcquireMachines& x) {
    o["mode"] = mode_name(x.mode);
    o["slots"] = x.slots;
    o["reason"] = x.reason;
    o["mechanism"] = mechanism_name(x.mechanism);
    if (x.same_domain) o["same_domain"] = true;
  }
  void operator()(const SetCheckpointPlan& x) {
    o["interval_s"] = to_s(x.interval);
    o["blocking_s"] = to_s(x.blocking);
    o["tier"] = tier_name(x.tier);
    o["reason"] = x.reason;
    o["remote_interval_s"] = to_s(x.remote_interval);
  }
  void operator()(const WatchSteps& x) {
    o["every_s"] = to_s(x.every);
    o["reason"] = x.reason;
  }
  void operator()(const EnableOracle& x) { o["reason"] = x.reason; }
  void operator()(const Note& x) {
    o["text"] = x.text;
    if (x.fruitless_round > 0) o["fruitless_round"] = x.fruitless_round;
  }
  void operator()(const EnableInspection& x) {
    o["kind"] = x.kind;
    o["interval_s"] = to_s(x.interval);
    o["reason"] = x.reason;
  }
  void operator()(const RunProbe& x) {
    o["test"] = probe_name(x.test);
    o["machines"] = x.machines;
    o["deadline_s"] = to_s(x.deadline);
    o["reason"] = x.reason;
    if (!x.groups.empty()) o["groups"] = x.groups;
  }
  void operator()(const CaptureStacks& x) { o["reason"] = x.reason; }
  void operator()(const RunReplay& x) {
    o["groups"] = x.groups;
    o["reason"] = x.reason;
  }
  void operator()(const HotUpdate& x) {
    o["version"] = x.version;
    o["reason"] = x.reason;
  }
  void operator()(const RollBack& x) { o["reason"] = x.reason; }
  void operator()(const SetStandbyPool& x) {
    o["size"] = x.size;
    o["reason"] = x.reason;
  }
  void operator()(const EndRun& x) {
    o["verdict"] = x.verdict;
    o["reason"] = x.reason;
  }
  void operator()(const MitigateSlowdown& x) {
    o["slot"] = x.slot;
    o["how"] = mitigation_name(x.how);
    o["reason"] = x.reason;
  }
  void operator()(const AvoidMachines& x) {
    o["machines"] = x.machines;
    o["reason"] = x.reason;
  }
};

// ---------------------------------------------------------------- decoders

constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

MachineId machine(In& in, const char* key = "machine") {
  return static_cast<MachineId>(in.integer(key, kNoMachine, kI32Min, kI32Max));
}

Mechanism mechanism(In& in) {
  return in.enumerated<Mechanism>("mechanism", Mechanism::kNone, mechanism_from_name,
                                  names_of<Mechanism, kMechanisms>(mechanism_name));
}

faultline::Event decode_event(std::size_t index, In& in) {
  switch (index) {
    case 0: {
      ProcessExit x;
      x.machine = machine(in);
      x.exit_code = static_cast<int>(in.integer("exit_code", x.exit_code, kI32Min, kI32Max));
      x.signature = in.string("signature", "");
      x.step = in.integer("step", -1, -1, std::numeric_limits<std::int64_t>::max());
      return x;
    }
    case 1: {
      StartFailed x;
      x.action = in.unsigned_integer("action", 0);
      x.machine = machine(in);
      x.signature = in.string("signature", "");
      x.step = in.integer("step", -1, -1, std::numeric_limits<std::int64_t>::max());
      return x;
    }
    case 2: {
      InspectionAlert x;
      x.machine = machine(in);
      x.kind = in.string("kind", "");
      x.detail = in.string("detail", "");
      return x;
    }
    case 3: {
      StepSample x;
      x.step = in.integer("step", 0, kI64Min, kI64Max);
      x.step_time_s = in.real("step_time_s", 0);
      if (in.get("loss")) x.loss = in.real("loss", 0);
      if (in.get("grad_norm")) x.grad_norm = in.real("grad_norm", 0);
      x.nan = in.boolean("nan", false);
      x.steady = in.boolean("steady", false);
      return x;
    }
    case 4: {
      JobStarted x;
      x.action = in.unsigned_integer("action", 0);
      x.step = in.integer("step", 0, kI64Min, kI64Max);
      return x;
    }
    case 5:
      return JobStopped{in.unsigned_integer("action", 0)};
    case 6: {
      MachinesReady x;
      x.action = in.unsigned_integer("action", 0);
      x.machines = in.ids("machines");
      return x;
    }
    case 7: {
      CodeUpdateRequested x;
      x.version = in.string("version", "");
      x.urgent = in.boolean("urgent", true);
      return x;
    }
    case 8: {
      TimerFired x;
      x.timer = in.unsigned_integer("timer", 0);
      x.tag = in.unsigned_integer("tag", 0);
      return x;
    }
    case 9: {
      ActionFailed x;
      x.action = in.unsigned_integer("action", 0);
      x.reason = in.string("reason", "");
      return x;
    }
    case 10: {
      OracleFault x;
      x.machines = in.ids("machines");
      x.category = in.string("category", "");
      x.persistent = in.boolean("persistent", false);
      x.code_bug = in.boolean("code_bug", false);
      x.data_bug = in.boolean("data_bug", false);
      return x;
    }
    case 11: {
      ProbeResult x;
      x.action = in.unsigned_integer("action", 0);
      x.test = in.enumerated<ProbeKind>("test", x.test, probe_from_name,
                                        names_of<ProbeKind, kProbes>(probe_name));
      x.failed = in.ids("failed");
      x.timed_out = in.boolean("timed_out", false);
      x.group_failed = in.bools("group_failed");
      if (const json* t = in.get("group_seconds")) {
        if (!t->is_array())
          in.fail(in.at("group_seconds"), "expected an array of numbers, got " + json_type_of(*t));
        for (std::size_t i = 0; i < t->size(); ++i)
          x.group_seconds.push_back(
              in.as_real((*t)[i], in.at("group_seconds") + "[" + std::to_string(i) + "]"));
      }
      if (x.group_seconds.size() != x.group_failed.size())
        in.fail(in.at("group_seconds"), "expected one entry per group_failed entry (" +
                                            std::to_string(x.group_failed.size()) + "), got " +
                                            std::to_string(x.group_seconds.size()));
      return x;
    }
    case 12: {
      StacksCaptured x;
      x.action = in.unsigned_integer("action", 0);
      x.stacks = StackSignatures(in.strings("by_slot"));
      return x;
    }
    default: {
      ReplayResult x;
      x.action = in.unsigned_integer("action", 0);
      x.group_failed = in.bools("group_failed");
      return x;
    }
  }
}

faultline::Action decode_action(std::size_t index, In& in) {
  switch (index) {
    case 0:
      return StopJob{in.string("reason", "")};
    case 1: {
      StartJob x;
      x.reason = in.string("reason", "");
      x.mechanism = mechanism(in);
      x.version = in.string("version", "");
      return x;
    }
    case 2: {
      EvictMachines x;
      x.machines = in.ids("machines");
      x.reason = in.string("reason", "");
      x.mechanism = mechanism(in);
      x.retire = in.boolean("retire", false);
      return x;
    }
    case 3: {
      AcquireMachines x;
      x.mode = in.enumerated<AcquireMode>("mode", x.mode, mode_from_name,
                                          names_of<AcquireMode, kModes>(mode_name));
      x.slots = in.ids("slots");
      x.reason = in.string("reason", "");
      x.mechanism = mechanism(in);
      x.same_domain = in.boolean("same_domain", false);
      return x;
    }
    case 4: {
      SetCheckpointPlan x;
      x.interval = in.duration("interval_s", x.interval);
      x.blocking = in.duration("blocking_s", x.blocking);
      x.tier = in.enumerated<CheckpointTier>("tier", x.tier, tier_from_name,
                                             names_of<CheckpointTier, kTiers>(tier_name));
      x.reason = in.string("reason", "");
      x.remote_interval = in.duration("remote_interval_s", x.remote_interval);
      return x;
    }
    case 5: {
      WatchSteps x;
      x.every = in.duration("every_s", x.every);
      x.reason = in.string("reason", "");
      return x;
    }
    case 6:
      return EnableOracle{in.string("reason", "")};
    case 7:
      return Note{in.string("text", ""),
                  static_cast<int>(in.integer("fruitless_round", 0, 0, 1000000))};
    case 8: {
      EnableInspection x;
      x.kind = in.string("kind", "");
      x.interval = in.duration("interval_s", x.interval);
      x.reason = in.string("reason", "");
      return x;
    }
    case 9: {
      RunProbe x;
      x.test = in.enumerated<ProbeKind>("test", x.test, probe_from_name,
                                        names_of<ProbeKind, kProbes>(probe_name));
      x.machines = in.ids("machines");
      x.deadline = in.duration("deadline_s", x.deadline);
      x.reason = in.string("reason", "");
      if (const json* g = in.get("groups")) {
        if (!g->is_array())
          in.fail(in.at("groups"), "expected an array of machine arrays, got " + json_type_of(*g));
        for (std::size_t i = 0; i < g->size(); ++i)
          x.groups.push_back(in.ids((*g)[i], in.at("groups") + "[" + std::to_string(i) + "]"));
      }
      return x;
    }
    case 10:
      return CaptureStacks{in.string("reason", "")};
    case 11: {
      RunReplay x;
      if (const json* g = in.get("groups")) {
        if (!g->is_array())
          in.fail(in.at("groups"), "expected an array of machine arrays, got " + json_type_of(*g));
        for (std::size_t i = 0; i < g->size(); ++i)
          x.groups.push_back(in.ids((*g)[i], in.at("groups") + "[" + std::to_string(i) + "]"));
      }
      x.reason = in.string("reason", "");
      return x;
    }
    case 12: {
      HotUpdate x;
      x.version = in.string("version", "");
      x.reason = in.string("reason", "");
      return x;
    }
    case 13:
      return RollBack{in.string("reason", "")};
    case 14: {
      SetStandbyPool x;
      x.size = static_cast<int>(in.integer("size", 0, kI32Min, kI32Max));
      x.reason = in.string("reason", "");
      return x;
    }
    case 15:
      return EndRun{in.string("verdict", "", true), in.string("reason", "")};
    case 17: {
      AvoidMachines x;
      x.machines = in.ids("machines");
      x.reason = in.string("reason", "");
      return x;
    }
    default: {
      MitigateSlowdown x;
      x.slot = static_cast<SlotId>(in.integer("slot", 0, 0, kI32Max, true));
      x.how = in.enumerated<Mitigation>("how", x.how, mitigation_from_name,
                                        names_of<Mitigation, kMitigations>(mitigation_name));
      x.reason = in.string("reason", "");
      return x;
    }
  }
}

template <class V>
V decode_variant(const json& j, const std::string& path, V (*decode)(std::size_t, In&)) {
  In in(j, path);
  const std::string type = in.string("type", "", true);
  const auto& names = TypeNames<V>::kNames;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (type != names[i]) continue;
    V v = decode(i, in);
    in.finish();
    return v;
  }
  std::string all;
  for (const char* n : names) all += (all.empty() ? "" : "|") + std::string(n);
  in.fail(in.at("type"), "expected one of " + all + ", got \"" + type + "\"");
}

// ---------------------------------------------------------------- records

json base_record(double t_s, RecordKind k) {
  json o = json::object();
  o["t_s"] = t_s;
  o["kind"] = record_kind_name(k);
  return o;
}

json loss_json(const std::optional<double>& loss) {
  return loss ? real_json(*loss) : json(nullptr);
}

bool default_persistent(FaultKind k) {
  switch (k) {
    case FaultKind::kMachineDown:
    case FaultKind::kStop:
    case FaultKind::kSlow:
    case FaultKind::kSdc:
    case FaultKind::kNicDown:
      return true;
    default:
      return false;
  }
}

EventLogHeader decode_header(In& in) {
  EventLogHeader h;
  const std::string format = in.string("format", "", true);
  if (format != "faultline-eventlog")
    in.fail(in.at("format"), "expected \"faultline-eventlog\", got \"" + format + "\"");
  in.integer("version", 0, 1, 1, true);
  h.stack = in.string("stack", "", true);
  if (h.stack.empty()) in.fail(in.at("stack"), "expected a policy stack name, got \"\"");
  if (const json* p = in.get("params")) {
    if (!p->is_object())
      in.fail(in.at("params"), "expected an object of numbers, got " + json_type_of(*p));
    for (auto it = p->begin(); it != p->end(); ++it) {
      const std::string where = in.at("params") + "." + it.key();
      if (it->is_boolean())
        h.params[it.key()] = it->get<bool>() ? 1 : 0;
      else if (it->is_number() && std::isfinite(it->get<double>()))
        h.params[it.key()] = it->get<double>();
      else
        in.fail(where,
                "expected a finite number, got " + json_type_of(*it) + " " + json_brief(*it));
    }
  }
  h.seed = in.unsigned_integer("seed", 0);
  {
    In c(in.need("cluster", "object"), in.at("cluster"));
    h.machines = static_cast<int>(c.integer("machines", 0, 1, 1'000'000, true));
    h.gpus_per_machine = static_cast<int>(c.integer("gpus_per_machine", 1, 1, 64, true));
    h.tp = static_cast<int>(c.integer("tp", 1, 1, 1 << 20, true));
    h.pp = static_cast<int>(c.integer("pp", 1, 1, 1 << 20, true));
    h.dp = static_cast<int>(c.integer("dp", 1, 1, 1 << 24, true));
    h.standby_machines = static_cast<int>(c.integer("standby_machines", 0, 0, 100'000));
    const std::int64_t ranks = static_cast<std::int64_t>(h.tp) * h.pp * h.dp;
    const std::int64_t gpus = static_cast<std::int64_t>(h.machines) * h.gpus_per_machine;
    if (ranks != gpus)
      c.fail(c.path(), "expected tp*pp*dp == machines*gpus_per_machine (" + std::to_string(gpus) +
                           "), got " + std::to_string(ranks));
    if (h.gpus_per_machine % h.tp != 0)
      c.fail(c.at("tp"), "expected a divisor of gpus_per_machine (" +
                             std::to_string(h.gpus_per_machine) + "), got " + std::to_string(h.tp));
    c.finish();
  }
  h.nominal_step_time_s = in.finite("nominal_step_time_s", 0, 1e-6, 1e6, true);
  h.checkpoint_every_steps = in.integer("checkpoint_every_steps", 0, 0, kI64Max);
  h.config_file = in.string("config_file", "");
  return h;
}

}  // namespace

// ---------------------------------------------------------------- public vocabulary

json to_json(const faultline::Event& e) {
  json o = json::object();
  o["type"] = TypeNames<faultline::Event>::kNames[e.index()];
  std::visit(EventEncoder{o}, e);
  return o;
}

json to_json(const faultline::Action& a) {
  json o = json::object();
  o["type"] = TypeNames<faultline::Action>::kNames[a.index()];
  std::visit(ActionEncoder{o}, a);
  return o;
}

faultline::Event event_from_json(const json& j, const std::string& path) {
  return decode_variant<faultline::Event>(j, path, decode_event);
}

faultline::Action action_from_json(const json& j, const std::string& path) {
  return decode_variant<faultline::Action>(j, path, decode_action);
}

std::optional<Mechanism> mechanism_from_name(std::string_view name) {
  return lookup<Mechanism, kMechanisms>(name, mechanism_name);
}
std::optional<AcquireMode> mode_from_name(std::string_view name) {
  return lookup<AcquireMode, kModes>(name, mode_name);
}
std::optional<CheckpointTier> tier_from_name(std::string_view name) {
  return lookup<CheckpointTier, kTiers>(name, tier_name);
}
std::optional<ProbeKind> probe_from_name(std::string_view name) {
  return lookup<ProbeKind, kProbes>(name, probe_name);
}
std::optional<Mitigation> mitigation_from_name(std::string_view name) {
  return lookup<Mitigation, kMitigations>(name, mitigation_name);
}

const char* record_kind_name(RecordKind k) {
  switch (k) {
    case RecordKind::kHeader:
      return "header";
    case RecordKind::kEvent:
      return "event";
    case RecordKind::kAction:
      return "action";
    case RecordKind::kOutcome:
      return "outcome";
    case RecordKind::kNote:
      return "note";
    case RecordKind::kFault:
      return "fault";
    case RecordKind::kProgress:
      return "progress";
    case RecordKind::kRestart:
      return "restart";
    case RecordKind::kSummary:
      return "summary";
  }
  return "?";
}
std::optional<RecordKind> record_kind_from_name(std::string_view name) {
  return lookup<RecordKind, kRecordKinds>(name, record_kind_name);
}

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kMachineDown:
      return "machine_down";
    case FaultKind::kCrash:
      return "crash";
    case FaultKind::kHang:
      return "hang";
    case FaultKind::kStop:
      return "stop";
    case FaultKind::kNan:
      return "nan";
    case FaultKind::kSlow:
      return "slow";
    case FaultKind::kSdc:
      return "sdc";
    case FaultKind::kNicDown:
      return "nic_down";
    case FaultKind::kUpdate:
      return "update";
  }
  return "?";
}
std::optional<FaultKind> fault_kind_from_name(std::string_view name) {
  return lookup<FaultKind, kFaultKinds>(name, fault_kind_name);
}

// ---------------------------------------------------------------- record encoders

json header_record(double t_s, const EventLogHeader& h) {
  json o = base_record(t_s, RecordKind::kHeader);
  o["format"] = "faultline-eventlog";
  o["version"] = 1;
  o["stack"] = h.stack;
  json params = json::object();
  for (const auto& [k, v] : h.params) params[k] = v;
  o["params"] = std::move(params);
  o["seed"] = h.seed;
  o["cluster"] = {{"machines", h.machines},
                  {"gpus_per_machine", h.gpus_per_machine},
                  {"tp", h.tp},
                  {"pp", h.pp},
                  {"dp", h.dp},
                  {"standby_machines", h.standby_machines}};
  o["nominal_step_time_s"] = h.nominal_step_time_s;
  o["checkpoint_every_steps"] = h.checkpoint_every_steps;
  o["config_file"] = h.config_file;
  return o;
}

json event_record(double t_s, const faultline::Event& e) {
  json o = base_record(t_s, RecordKind::kEvent);
  o["event"] = to_json(e);
  return o;
}

json action_record(double t_s, ActionId id, const faultline::Action& a) {
  json o = base_record(t_s, RecordKind::kAction);
  o["id"] = id;
  o["action"] = to_json(a);
  return o;
}

json outcome_record(double t_s, const OutcomeRecord& r) {
  json o = base_record(t_s, RecordKind::kOutcome);
  o["id"] = r.id;
  o["ok"] = r.ok;
  o["detail"] = r.detail;
  o["duration_s"] = r.duration_s;
  return o;
}

json note_record(double t_s, std::string_view text) {
  json o = base_record(t_s, RecordKind::kNote);
  o["text"] = std::string(text);
  return o;
}

json fault_record(double t_s, const FaultRecord& f) {
  json o = base_record(t_s, RecordKind::kFault);
  o["machine"] = f.machine;
  o["slot"] = f.slot;
  o["fault"] = fault_kind_name(f.fault);
  o["detail"] = f.detail;
  o["persistent"] = f.persistent;
  return o;
}

json progress_record(double t_s, const ProgressRecord& p) {
  json o = base_record(t_s, RecordKind::kProgress);
  o["step"] = p.step;
  o["loss"] = loss_json(p.loss);
  o["restart"] = p.restart;
  return o;
}

json restart_record(double t_s, std::string_view reason) {
  json o = base_record(t_s, RecordKind::kRestart);
  o["reason"] = std::string(reason);
  return o;
}

json summary_record(double t_s, const SummaryRecord& s) {
  json o = base_record(t_s, RecordKind::kSummary);
  o["elapsed_s"] = s.elapsed_s;
  o["final_step"] = s.final_step;
  o["first_step"] = s.first_step;
  o["productive_s"] = s.productive_s;
  o["ettr"] = s.ettr;
  o["step_time_s"] = s.step_time_s;
  return o;
}

// ---------------------------------------------------------------- live ETTR

std::optional<double> healthy_step_time(const std::vector<Timed<ProgressRecord>>& progress) {
  std::vector<double> per_step;
  for (std::size_t i = 1; i < progress.size(); ++i) {
    const auto& a = progress[i - 1];
    const auto& b = progress[i];
    if (b.value.restart || b.value.step <= a.value.step || !(b.t_s > a.t_s)) continue;
    per_step.push_back((b.t_s - a.t_s) / static_cast<double>(b.value.step - a.value.step));
  }
  if (per_step.empty()) return std::nullopt;
  return median(std::move(per_step));
}

SummaryRecord summarize_progress(const std::vector<Timed<ProgressRecord>>& progress,
                                 double elapsed_s, double nominal_step_time_s) {
  SummaryRecord s;
  s.elapsed_s = elapsed_s;
  s.step_time_s = healthy_step_time(progress).value_or(nominal_step_time_s);
  if (!progress.empty()) {
    // Samples are completed steps: the run started from the step before its first one.
    s.first_step = progress.front().value.step - 1;
    s.final_step = progress.back().value.step;
  }
  s.productive_s =
      static_cast<double>(std::max<std::int64_t>(0, s.final_step - s.first_step)) * s.step_time_s;
  s.ettr = elapsed_s > 0 ? s.productive_s / elapsed_s : 0;
  return s;
}

// ---------------------------------------------------------------- reading

EventLog parse_event_log(std::string_view text, const std::string& file) {
  EventLog log;
  log.file = file;
  // Split into lines; the last one may lack its newline.
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  auto fail_at = [&](std::size_t line, const std::string& what) -> EventLogError {
    return EventLogError(file + ":" + std::to_string(line) + ": " + what);
  };
  bool have_header = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t line_no = i + 1;
    std::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      if (i + 1 == lines.size() && !line.empty()) {
        // A crash mid-write leaves at most the last line cut short.
        log.torn_tail = true;
        log.torn_line = line_no;
        break;
      }
      std::string what = e.what();
      const auto p = what.find("parse error");
      throw fail_at(line_no, line.empty()
                                 ? "$: expected a JSON object, got an empty line"
                                 : "$: invalid JSON (" +
                                       (p == std::string::npos ? what : what.substr(p)) + ")");
    }
    try {
      In in(j, "$");
      const std::string kind_name = in.string("kind", "", true);
      const auto kind = record_kind_from_name(kind_name);
      if (!kind) {
        std::string all;
        for (const char* n : names_of<RecordKind, kRecordKinds>(record_kind_name))
          all += (all.empty() ? "" : "|") + std::string(n);
        in.fail("$.kind", "expected one of " + all + ", got \"" + kind_name + "\"");
      }
      const double t_s = in.finite("t_s", 0, 0, 1e12, true);
      if (!have_header && *kind != RecordKind::kHeader)
        in.fail("$.kind", "expected \"header\" on the first line, got \"" + kind_name + "\"");
      if (have_header && *kind == RecordKind::kHeader)
        in.fail("$.kind", "expected one header, on the first line; got a second one");
      switch (*kind) {
        case RecordKind::kHeader:
          log.header = decode_header(in);
          have_header = true;
          break;
        case RecordKind::kEvent:
          log.events.push_back(
              {t_s, line_no, event_from_json(in.need("event", "object"), "$.event")});
          break;
        case RecordKind::kAction: {
          LoggedAction a;
          a.id = in.unsigned_integer("id", 0, true);
          a.action = action_from_json(in.need("action", "object"), "$.action");
          log.actions.push_back({t_s, line_no, std::move(a)});
          break;
        }
        case RecordKind::kOutcome: {
          OutcomeRecord o;
          o.id = in.unsigned_integer("id", 0, true);
          o.ok = in.boolean("ok", true, true);
          o.detail = in.string("detail", "");
          o.duration_s = in.finite("duration_s", 0, 0, 1e12, true);
          log.outcomes.push_back({t_s, line_no, std::move(o)});
          break;
        }
        case RecordKind::kNote:
          log.notes.push_back({t_s, line_no, in.string("text", "", true)});
          break;
        case RecordKind::kFault: {
          FaultRecord f;
          f.fault = in.enumerated<FaultKind>("fault", FaultKind::kKill, fault_kind_from_name,
                                             names_of<FaultKind, kFaultKinds>(fault_kind_name));
          if (!in.has("fault")) in.need("fault", "string");
          const bool job_wide = f.fault == FaultKind::kUpdate;
          f.machine =
              static_cast<MachineId>(in.integer("machine", kNoMachine, -1, kI32Max, !job_wide));
          f.slot = static_cast<SlotId>(in.integer("slot", -1, -1, kI32Max, !job_wide));
          f.detail = in.string("detail", "");
          f.persistent = in.boolean("persistent", default_persistent(f.fault));
          if (f.fault == FaultKind::kSlow) {
            char* end = nullptr;
            const double factor = std::strtod(f.detail.c_str(), &end);
            if (f.detail.empty() || *end || !(factor >= 1) || !(factor <= 100))
              in.fail(
                  "$.detail",
                  "expected the slowdown factor of a \"slow\" fault, a number in [1, 100], got \"" +
                      f.detail + "\"");
          }
          log.faults.push_back({t_s, line_no, std::move(f)});
          break;
        }
        case RecordKind::kProgress: {
          ProgressRecord p;
          p.step = in.integer("step", 0, kI64Min, kI64Max, true);
          if (const json* l = in.get("loss"); l && !l->is_null()) p.loss = in.as_real(*l, "$.loss");
          p.restart = in.boolean("restart", false);
          log.progress.push_back({t_s, line_no, p});
          break;
        }
        case RecordKind::kRestart:
          log.restarts.push_back({t_s, line_no, in.string("reason", "")});
          break;
        case RecordKind::kSummary: {
          SummaryRecord s;
          s.elapsed_s = in.finite("elapsed_s", 0, 0, 1e12, true);
          s.final_step = in.integer("final_step", 0, kI64Min, kI64Max, true);
          s.first_step = in.integer("first_step", 0, kI64Min, kI64Max, true);
          s.productive_s = in.finite("productive_s", 0, 0, 1e12, true);
          s.ettr = in.finite("ettr", 0, 0, 1e6, true);
          s.step_time_s = in.finite("step_time_s", 0, 0, 1e6, true);
          log.summary = Timed<SummaryRecord>{t_s, line_no, s};
          break;
        }
      }
      in.finish();
      log.records.push_back({*kind, t_s, line_no, std::move(j)});
    } catch (const EventLogError& e) {
      throw fail_at(line_no, e.what());
    }
  }
  if (!have_header)
    throw EventLogError(file + ":1: $.kind: expected a \"header\" record, the log is empty");
  return log;
}

EventLog read_event_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EventLogError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw EventLogError(path + ": read error");
  return parse_event_log(ss.str(), path);
}

// ---------------------------------------------------------------- writing

EventLogWriter::EventLogWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw EventLogError(path + ": cannot open for append: " + std::strerror(errno));
  // A previous writer that crashed mid-line left a torn tail; appending after it would
  // glue the next record onto it. Cut it off (it was lost anyway).
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') {
      off_t end = st.st_size;
      off_t keep = 0;
      char buf[4096];
      while (end > 0 && keep == 0) {
        const off_t from = std::max<off_t>(0, end - static_cast<off_t>(sizeof buf));
        const ssize_t n = ::pread(fd_, buf, static_cast<size_t>(end - from), from);
        if (n <= 0) break;
        for (ssize_t k = n - 1; k >= 0; --k)
          if (buf[k] == '\n') {
            keep = from + k + 1;
            break;
          }
        end = from;
      }
      if (::ftruncate(fd_, keep) != 0) {
        ::close(fd_);
        fd_ = -1;
        throw EventLogError(path + ": cannot cut the torn last line: " + std::strerror(errno));
      }
    }
  }
}

EventLogWriter::~EventLogWriter() {
  if (fd_ >= 0) {
    flush();  // a last chance for what waits in the backlog
    ::close(fd_);
  }
}

EventLogWriter::EventLogWriter(EventLogWriter&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      backlog_(std::move(o.backlog_)),
      backlog_bytes_(std::exchange(o.backlog_bytes_, 0)),
      backlog_limit_bytes_(o.backlog_limit_bytes_),
      backlog_limit_records_(o.backlog_limit_records_),
      cut_at_(std::exchange(o.cut_at_, std::nullopt)),
      health_(std::move(o.health_)) {}

EventLogWriter& EventLogWriter::operator=(EventLogWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    backlog_ = std::move(o.backlog_);
    backlog_bytes_ = std::exchange(o.backlog_bytes_, 0);
    backlog_limit_bytes_ = o.backlog_limit_bytes_;
    backlog_limit_records_ = o.backlog_limit_records_;
    cut_at_ = std::exchange(o.cut_at_, std::nullopt);
    health_ = std::move(o.health_);
  }
  return *this;
}

void EventLogWriter::failed(int err) { health_.failed(path_ + ": " + std::strerror(err)); }

bool EventLogWriter::append(const std::string& line) {
  if (fd_ < 0) {
    failed(EBADF);
    return false;
  }
  // A line that could not be cut off earlier is cut first: nothing may follow a torn line.
  if (cut_at_) {
    if (::ftruncate(fd_, *cut_at_) != 0) {
      failed(errno);
      return false;
    }
    cut_at_.reset();
  }
  // One write(2) per line; a short write is finished by further writes, and when those
  // fail (disk full) what was written is cut off again: the file holds whole lines only.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      const std::size_t written = line.size() - left;
      if (written > 0) {
        // O_APPEND: the offset is the end of our own bytes.
        const off_t end = ::lseek(fd_, 0, SEEK_CUR);
        const off_t begin = end - static_cast<off_t>(written);
        if (end < 0 || ::ftruncate(fd_, begin) != 0)
          cut_at_ = end < 0 ? std::nullopt : std::optional<off_t>(begin);
      }
      failed(err);
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

bool EventLogWriter::flush() {
  bool wrote = false;
  while (!backlog_.empty()) {
    if (!append(backlog_.front())) {
      health_.pending = backlog_.size();
      return false;
    }
    backlog_bytes_ -= backlog_.front().size();
    backlog_.pop_front();
    ++health_.written_late;
    wrote = true;
  }
  health_.pending = 0;
  if (wrote) health_.failing = false;  // recovered: a write went through and nothing waits
  return true;
}

bool EventLogWriter::write(const json& record) {
  std::string line;
  try {
    line = record.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    ++health_.failed_writes;
    return false;
  }
  line += '\n';
  // Order is kept: the backlog goes first, and while it cannot, the line waits behind it.
  if (flush() && append(line)) {
    health_.failing = false;
    return true;
  }
  if (backlog_.size() >= backlog_limit_records_ ||
      backlog_bytes_ + line.size() > backlog_limit_bytes_) {
    ++health_.lost;
    ++health_.outage_lost;
  } else {
    backlog_bytes_ += line.size();
    backlog_.push_back(std::move(line));
  }
  health_.pending = backlog_.size();
  return false;
}

}  // namespace faultline::traces
