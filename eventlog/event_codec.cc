// The Event/Action codec (see event_codec.h): one encoder and one decoder per alternative
// of faultline::Event and faultline::Action, the type-name tables, and the inverses of the
// enums' name functions. Apart from the event log's framing (event_log.cc) so that adding
// an Event or Action touches this file only; the variant's order is its table order.
#include "eventlog/event_codec.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "eventlog/event_json.h"
#include "traces/config.h"

namespace faultline::traces {

using nlohmann::json;

namespace {

using internal::JsonIn;
using internal::kI32Max;
using internal::kI32Min;
using internal::kI64Max;
using internal::kI64Min;
using internal::names_of;
using internal::read_duration;
using internal::real_json;
using internal::to_s;

constexpr int kModes = 4, kTiers = 3, kProbes = 5, kMitigations = 2;

// ---------------------------------------------------------------- type names

template <class V>
struct TypeNames;
template <>
struct TypeNames<faultline::Event> {
  static constexpr std::array<const char*, std::variant_size_v<faultline::Event>> kNames = {
      "ProcessExit",     "StartFailed",   "InspectionAlert",     "StepSample",   "JobStarted",
      "JobStopped",      "MachinesReady", "CodeUpdateRequested", "TimerFired",   "ActionFailed",
      "OracleFault",     "ProbeResult",   "StacksCaptured",      "ReplayResult", "ReplicaDropped",
      "ReplicaRejoined", "FailureWarning"};
};
template <>
struct TypeNames<faultline::Action> {
  static constexpr std::array<const char*, std::variant_size_v<faultline::Action>> kNames = {
      "StopJob",           "StartJob",      "EvictMachines",       "AcquireMachines",
      "SetCheckpointPlan", "WatchSteps",    "EnableOracle",        "Note",
      "EnableInspection",  "RunProbe",      "CaptureStacks",       "RunReplay",
      "HotUpdate",         "RollBack",      "SetStandbyPool",      "EndRun",
      "MitigateSlowdown",  "AvoidMachines", "EnableReplicaGroups", "RejoinReplica",
      "MigrateMachines"};
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
    o["lead_s"] = to_s(x.lead);
    o["slowdown"] = x.slowdown;
    o["replica"] = x.replica;
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
  void operator()(const ReplicaDropped& x) {
    o["replica"] = x.replica;
    o["machine"] = x.machine;
    o["exit_code"] = x.exit_code;
    o["signature"] = x.signature;
    if (x.step >= 0) o["step"] = x.step;
    o["live"] = x.live;
  }
  void operator()(const ReplicaRejoined& x) {
    o["action"] = x.action;
    o["replica"] = x.replica;
    o["live"] = x.live;
  }
  void operator()(const FailureWarning& x) {
    o["machine"] = x.machine;
    o["kind"] = x.kind;
    o["lead_s"] = to_s(x.lead);
    o["detail"] = x.detail;
  }
};

struct ActionEncoder {
  json& o;
  void operator()(const StopJob& x) { o["reason"] = x.reason; }
  void operator()(const StartJob& x) {
    o["reason"] = x.reason;
    o["mechanism"] = mechanism_name(x.mechanism);
    if (!x.version.empty()) o["version"] = x.version;
    if (x.in_place) o["in_place"] = true;  // absent in older logs: a standard start
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
  void operator()(const EnableReplicaGroups& x) {
    o["min_replicas"] = x.min_replicas;
    o["quorum_change_s"] = to_s(x.quorum_change);
    o["timeout_s"] = to_s(x.timeout);
    o["reason"] = x.reason;
  }
  void operator()(const RejoinReplica& x) {
    o["replica"] = x.replica;
    o["reason"] = x.reason;
  }
  void operator()(const MigrateMachines& x) {
    o["machines"] = x.machines;
    o["reason"] = x.reason;
    o["mechanism"] = mechanism_name(x.mechanism);
    o["pause_s"] = to_s(x.pause);
  }
};

// ---------------------------------------------------------------- decoders

// One decoder per alternative, chosen by type (the tag) so that a decoder can never be
// filed under another alternative's index. Each reads its fields in a fixed order: the
// first malformed field is the one reported.
template <class T>
using Tag = std::type_identity<T>;

MachineId machine(JsonIn& in, const char* key = "machine") {
  return static_cast<MachineId>(in.integer(key, kNoMachine, kI32Min, kI32Max));
}

// Any name: a built-in stack's or a module's own (action.h); "none" when absent.
Mechanism mechanism(JsonIn& in) {
  const std::string name = in.string("mechanism", mechanism_name(Mechanism::kNone));
  if (name.empty()) in.fail(in.at("mechanism"), "expected a mechanism's name, got \"\"");
  return Mechanism::named(name);
}

ProbeKind probe(JsonIn& in, ProbeKind def) {
  return in.enumerated<ProbeKind>("test", def, probe_from_name,
                                  names_of<ProbeKind, kProbes>(probe_name));
}

// "groups": an array of machine arrays, appended to `groups`.
void read_groups(JsonIn& in, std::vector<MachineSet>& groups) {
  if (const json* g = in.get("groups")) {
    if (!g->is_array())
      in.fail(in.at("groups"), "expected an array of machine arrays, got " + json_type_of(*g));
    for (std::size_t i = 0; i < g->size(); ++i)
      groups.push_back(in.ids((*g)[i], in.at("groups") + "[" + std::to_string(i) + "]"));
  }
}

// ---------------------------------------------------------------- events

ProcessExit decode(JsonIn& in, Tag<ProcessExit>) {
  ProcessExit x;
  x.machine = machine(in);
  x.exit_code = static_cast<int>(in.integer("exit_code", x.exit_code, kI32Min, kI32Max));
  x.signature = in.string("signature", "");
  x.step = in.integer("step", -1, -1, std::numeric_limits<std::int64_t>::max());
  return x;
}

StartFailed decode(JsonIn& in, Tag<StartFailed>) {
  StartFailed x;
  x.action = in.unsigned_integer("action", 0);
  x.machine = machine(in);
  x.signature = in.string("signature", "");
  x.step = in.integer("step", -1, -1, std::numeric_limits<std::int64_t>::max());
  return x;
}

InspectionAlert decode(JsonIn& in, Tag<InspectionAlert>) {
  InspectionAlert x;
  x.machine = machine(in);
  x.kind = in.string("kind", "");
  x.detail = in.string("detail", "");
  return x;
}

StepSample decode(JsonIn& in, Tag<StepSample>) {
  StepSample x;
  x.step = in.integer("step", 0, kI64Min, kI64Max);
  x.step_time_s = in.real("step_time_s", 0);
  if (in.get("loss")) x.loss = in.real("loss", 0);
  if (in.get("grad_norm")) x.grad_norm = in.real("grad_norm", 0);
  x.nan = in.boolean("nan", false);
  x.steady = in.boolean("steady", false);
  return x;
}

JobStarted decode(JsonIn& in, Tag<JobStarted>) {
  JobStarted x;
  x.action = in.unsigned_integer("action", 0);
  x.step = in.integer("step", 0, kI64Min, kI64Max);
  return x;
}

JobStopped decode(JsonIn& in, Tag<JobStopped>) {
  return JobStopped{in.unsigned_integer("action", 0)};
}

MachinesReady decode(JsonIn& in, Tag<MachinesReady>) {
  MachinesReady x;
  x.action = in.unsigned_integer("action", 0);
  x.machines = in.ids("machines");
  return x;
}

CodeUpdateRequested decode(JsonIn& in, Tag<CodeUpdateRequested>) {
  CodeUpdateRequested x;
  x.version = in.string("version", "");
  x.urgent = in.boolean("urgent", true);
  return x;
}

TimerFired decode(JsonIn& in, Tag<TimerFired>) {
  TimerFired x;
  x.timer = in.unsigned_integer("timer", 0);
  x.tag = in.unsigned_integer("tag", 0);
  return x;
}

ActionFailed decode(JsonIn& in, Tag<ActionFailed>) {
  ActionFailed x;
  x.action = in.unsigned_integer("action", 0);
  x.reason = in.string("reason", "");
  return x;
}

OracleFault decode(JsonIn& in, Tag<OracleFault>) {
  OracleFault x;
  x.machines = in.ids("machines");
  x.category = in.string("category", "");
  x.persistent = in.boolean("persistent", false);
  x.code_bug = in.boolean("code_bug", false);
  x.data_bug = in.boolean("data_bug", false);
  x.lead = read_duration(in, "lead_s", x.lead);
  x.slowdown = in.boolean("slowdown", false);
  x.replica = static_cast<int>(in.integer("replica", -1, -1, kI32Max));
  return x;
}

ProbeResult decode(JsonIn& in, Tag<ProbeResult>) {
  ProbeResult x;
  x.action = in.unsigned_integer("action", 0);
  x.test = probe(in, x.test);
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

StacksCaptured decode(JsonIn& in, Tag<StacksCaptured>) {
  StacksCaptured x;
  x.action = in.unsigned_integer("action", 0);
  x.stacks = StackSignatures(in.strings("by_slot"));
  return x;
}

ReplayResult decode(JsonIn& in, Tag<ReplayResult>) {
  ReplayResult x;
  x.action = in.unsigned_integer("action", 0);
  x.group_failed = in.bools("group_failed");
  return x;
}

ReplicaDropped decode(JsonIn& in, Tag<ReplicaDropped>) {
  ReplicaDropped x;
  x.replica = static_cast<int>(in.integer("replica", 0, 0, kI32Max, true));
  x.machine = machine(in);
  x.exit_code = static_cast<int>(in.integer("exit_code", x.exit_code, kI32Min, kI32Max));
  x.signature = in.string("signature", "");
  x.step = in.integer("step", -1, -1, std::numeric_limits<std::int64_t>::max());
  x.live = static_cast<int>(in.integer("live", 0, 0, kI32Max));
  return x;
}

ReplicaRejoined decode(JsonIn& in, Tag<ReplicaRejoined>) {
  ReplicaRejoined x;
  x.action = in.unsigned_integer("action", 0);
  x.replica = static_cast<int>(in.integer("replica", 0, 0, kI32Max, true));
  x.live = static_cast<int>(in.integer("live", 0, 0, kI32Max));
  return x;
}

FailureWarning decode(JsonIn& in, Tag<FailureWarning>) {
  FailureWarning x;
  x.machine = machine(in);
  x.kind = in.string("kind", "");
  x.lead = read_duration(in, "lead_s", x.lead);
  x.detail = in.string("detail", "");
  return x;
}

// ---------------------------------------------------------------- actions

StopJob decode(JsonIn& in, Tag<StopJob>) { return StopJob{in.string("reason", "")}; }

StartJob decode(JsonIn& in, Tag<StartJob>) {
  StartJob x;
  x.reason = in.string("reason", "");
  x.mechanism = mechanism(in);
  x.version = in.string("version", "");
  x.in_place = in.boolean("in_place", false);
  return x;
}

EvictMachines decode(JsonIn& in, Tag<EvictMachines>) {
  EvictMachines x;
  x.machines = in.ids("machines");
  x.reason = in.string("reason", "");
  x.mechanism = mechanism(in);
  x.retire = in.boolean("retire", false);
  return x;
}

AcquireMachines decode(JsonIn& in, Tag<AcquireMachines>) {
  AcquireMachines x;
  x.mode = in.enumerated<AcquireMode>("mode", x.mode, mode_from_name,
                                      names_of<AcquireMode, kModes>(mode_name));
  x.slots = in.ids("slots");
  x.reason = in.string("reason", "");
  x.mechanism = mechanism(in);
  x.same_domain = in.boolean("same_domain", false);
  return x;
}

SetCheckpointPlan decode(JsonIn& in, Tag<SetCheckpointPlan>) {
  SetCheckpointPlan x;
  x.interval = read_duration(in, "interval_s", x.interval);
  x.blocking = read_duration(in, "blocking_s", x.blocking);
  x.tier = in.enumerated<CheckpointTier>("tier", x.tier, tier_from_name,
                                         names_of<CheckpointTier, kTiers>(tier_name));
  x.reason = in.string("reason", "");
  x.remote_interval = read_duration(in, "remote_interval_s", x.remote_interval);
  return x;
}

WatchSteps decode(JsonIn& in, Tag<WatchSteps>) {
  WatchSteps x;
  x.every = read_duration(in, "every_s", x.every);
  x.reason = in.string("reason", "");
  return x;
}

EnableOracle decode(JsonIn& in, Tag<EnableOracle>) { return EnableOracle{in.string("reason", "")}; }

Note decode(JsonIn& in, Tag<Note>) {
  return Note{in.string("text", ""),
              static_cast<int>(in.integer("fruitless_round", 0, 0, 1000000))};
}

EnableInspection decode(JsonIn& in, Tag<EnableInspection>) {
  EnableInspection x;
  x.kind = in.string("kind", "");
  x.interval = read_duration(in, "interval_s", x.interval);
  x.reason = in.string("reason", "");
  return x;
}

RunProbe decode(JsonIn& in, Tag<RunProbe>) {
  RunProbe x;
  x.test = probe(in, x.test);
  x.machines = in.ids("machines");
  x.deadline = read_duration(in, "deadline_s", x.deadline);
  x.reason = in.string("reason", "");
  read_groups(in, x.groups);
  return x;
}

CaptureStacks decode(JsonIn& in, Tag<CaptureStacks>) {
  return CaptureStacks{in.string("reason", "")};
}

RunReplay decode(JsonIn& in, Tag<RunReplay>) {
  RunReplay x;
  read_groups(in, x.groups);
  x.reason = in.string("reason", "");
  return x;
}

HotUpdate decode(JsonIn& in, Tag<HotUpdate>) {
  HotUpdate x;
  x.version = in.string("version", "");
  x.reason = in.string("reason", "");
  return x;
}

RollBack decode(JsonIn& in, Tag<RollBack>) { return RollBack{in.string("reason", "")}; }

SetStandbyPool decode(JsonIn& in, Tag<SetStandbyPool>) {
  SetStandbyPool x;
  x.size = static_cast<int>(in.integer("size", 0, kI32Min, kI32Max));
  x.reason = in.string("reason", "");
  return x;
}

EndRun decode(JsonIn& in, Tag<EndRun>) {
  return EndRun{in.string("verdict", "", true), in.string("reason", "")};
}

MitigateSlowdown decode(JsonIn& in, Tag<MitigateSlowdown>) {
  MitigateSlowdown x;
  x.slot = static_cast<SlotId>(in.integer("slot", 0, 0, kI32Max, true));
  x.how = in.enumerated<Mitigation>("how", x.how, mitigation_from_name,
                                    names_of<Mitigation, kMitigations>(mitigation_name));
  x.reason = in.string("reason", "");
  return x;
}

AvoidMachines decode(JsonIn& in, Tag<AvoidMachines>) {
  AvoidMachines x;
  x.machines = in.ids("machines");
  x.reason = in.string("reason", "");
  return x;
}

EnableReplicaGroups decode(JsonIn& in, Tag<EnableReplicaGroups>) {
  EnableReplicaGroups x;
  x.min_replicas = static_cast<int>(in.integer("min_replicas", 1, 0, kI32Max));
  x.quorum_change = read_duration(in, "quorum_change_s", x.quorum_change);
  x.timeout = read_duration(in, "timeout_s", x.timeout);
  x.reason = in.string("reason", "");
  return x;
}

RejoinReplica decode(JsonIn& in, Tag<RejoinReplica>) {
  RejoinReplica x;
  x.replica = static_cast<int>(in.integer("replica", 0, 0, kI32Max, true));
  x.reason = in.string("reason", "");
  return x;
}

MigrateMachines decode(JsonIn& in, Tag<MigrateMachines>) {
  MigrateMachines x;
  x.machines = in.ids("machines");
  x.reason = in.string("reason", "");
  x.mechanism = mechanism(in);
  x.pause = read_duration(in, "pause_s", x.pause);
  return x;
}

// ---------------------------------------------------------------- variants

// The decoder of alternative I of V.
template <class V, std::size_t I>
V decode_alternative(JsonIn& in) {
  return V(std::in_place_index<I>, decode(in, Tag<std::variant_alternative_t<I, V>>{}));
}

// V's decoders in alternative order, so the index of a type name is its decoder's.
template <class V, std::size_t... I>
constexpr std::array<V (*)(JsonIn&), sizeof...(I)> decoders(std::index_sequence<I...>) {
  return {&decode_alternative<V, I>...};
}

template <class V>
V decode_variant(const json& j, const std::string& path) {
  static constexpr auto kDecoders = decoders<V>(std::make_index_sequence<std::variant_size_v<V>>{});
  JsonIn in(j, path);
  const std::string type = in.string("type", "", true);
  const auto& names = TypeNames<V>::kNames;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (type != names[i]) continue;
    V v = kDecoders[i](in);
    in.finish();
    return v;
  }
  in.fail(in.at("type"), "expected one of " + join_names(names) + ", got \"" + type + "\"");
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
  return decode_variant<faultline::Event>(j, path);
}

faultline::Action action_from_json(const json& j, const std::string& path) {
  return decode_variant<faultline::Action>(j, path);
}

std::optional<AcquireMode> mode_from_name(std::string_view name) {
  return internal::lookup<AcquireMode, kModes>(name, mode_name);
}
std::optional<CheckpointTier> tier_from_name(std::string_view name) {
  return internal::lookup<CheckpointTier, kTiers>(name, tier_name);
}
std::optional<ProbeKind> probe_from_name(std::string_view name) {
  return internal::lookup<ProbeKind, kProbes>(name, probe_name);
}
std::optional<Mitigation> mitigation_from_name(std::string_view name) {
  return internal::lookup<Mitigation, kMitigations>(name, mitigation_name);
}

}  // namespace faultline::traces
