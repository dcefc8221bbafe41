#include <algorithm>
#include <stdexcept>

#include "policies/module.h"

namespace faultline::policies {

const char* module_kind_name(ModuleKind k) {
  switch (k) {
    case ModuleKind::kDetection:
      return "detection";
    case ModuleKind::kLocalization:
      return "localization";
    case ModuleKind::kRecovery:
      return "recovery";
    case ModuleKind::kCheckpoint:
      return "checkpoint";
    case ModuleKind::kFailSlow:
      return "failslow";
    case ModuleKind::kVerdict:
      return "verdict";
  }
  return "?";
}

namespace {
// recovery=flash: only the replaced ranks restart, from a peer's memory, while the others
// keep their processes and communicators. recovery=migrate: a machine's work moves to a
// standby while the job trains. Live, the first needs ranks that re-form their process group
// in place, the second a job that hands a running rank's state to a new process.
constexpr const char* kFlashLive =
    "live only with job.in_place (a faultline.Job built with rebuild= that re-forms its "
    "process group in place); replica groups restart no one in place";
constexpr const char* kMigrateLive =
    "live only with job.replica_groups (a joiner on a standby takes a live peer's state, "
    "then the warned machine leaves); a faultline.Job cannot hand a running rank's state "
    "to a new process";
}  // namespace

std::string live_limit(std::string_view kind, std::string_view name) {
  if (kind == "recovery" && name == "flash") return kFlashLive;
  if (kind == "recovery" && name == "migrate") return kMigrateLive;
  return {};
}

std::optional<std::string> live_refusal(std::string_view kind, std::string_view name,
                                        bool replica_groups, bool in_place) {
  if (kind == "recovery" && name == "flash" && (replica_groups || !in_place))
    return std::string(kFlashLive);
  if (kind == "recovery" && name == "migrate" && !replica_groups) return std::string(kMigrateLive);
  return std::nullopt;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kCarryOn:
      return "carry_on";
    case Verdict::kRollBack:
      return "roll_back";
    case Verdict::kStop:
      return "stop";
  }
  return "?";
}

const char* slowdown_level_name(SlowdownLevel l) {
  switch (l) {
    case SlowdownLevel::kTolerate:
      return "tolerate";
    case SlowdownLevel::kRebalance:
      return "rebalance";
    case SlowdownLevel::kReconfigure:
      return "reconfigure";
    case SlowdownLevel::kEvict:
      return "evict";
  }
  return "?";
}

void ModuleRegistry::insert(ModuleInfo info, ModuleKind want, decltype(Entry::make) make) {
  if (info.kind != want)
    throw std::invalid_argument(std::string(module_kind_name(info.kind)) + " module '" + info.name +
                                "' registered with a " + module_kind_name(want) + " factory");
  if (find(info.kind, info.name))
    throw std::invalid_argument(std::string(module_kind_name(info.kind)) + " module '" + info.name +
                                "' is registered twice");
  entries_.push_back({std::move(info), std::move(make)});
}

void ModuleRegistry::add(ModuleInfo info, DetectorFactory make) {
  insert(std::move(info), ModuleKind::kDetection, std::move(make));
}
void ModuleRegistry::add(ModuleInfo info, LocalizerFactory make) {
  insert(std::move(info), ModuleKind::kLocalization, std::move(make));
}
void ModuleRegistry::add(ModuleInfo info, RecoveryFactory make) {
  insert(std::move(info), ModuleKind::kRecovery, std::move(make));
}
void ModuleRegistry::add(ModuleInfo info, CheckpointFactory make) {
  insert(std::move(info), ModuleKind::kCheckpoint, std::move(make));
}
void ModuleRegistry::add(ModuleInfo info, FailSlowFactory make) {
  insert(std::move(info), ModuleKind::kFailSlow, std::move(make));
}
void ModuleRegistry::add(ModuleInfo info, VerdictFactory make) {
  insert(std::move(info), ModuleKind::kVerdict, std::move(make));
}

void ModuleRegistry::merge(const ModuleRegistry& other) {
  for (const auto& e : other.entries_)
    if (find(e.info.kind, e.info.name))
      throw std::invalid_argument(std::string(module_kind_name(e.info.kind)) + " module '" +
                                  e.info.name + "' is already registered");
  for (const auto& e : other.entries_) entries_.push_back(e);
}

std::vector<const ModuleInfo*> ModuleRegistry::all() const {
  std::vector<const ModuleInfo*> out;
  for (const auto& e : entries_) out.push_back(&e.info);
  return out;
}

std::vector<const ModuleInfo*> ModuleRegistry::of(ModuleKind kind) const {
  std::vector<const ModuleInfo*> out;
  for (const auto& e : entries_)
    if (e.info.kind == kind) out.push_back(&e.info);
  return out;
}

std::vector<std::string> ModuleRegistry::names(ModuleKind kind) const {
  std::vector<std::string> out;
  for (const ModuleInfo* m : of(kind)) out.push_back(m->name);
  return out;
}

const ModuleInfo* ModuleRegistry::find(ModuleKind kind, std::string_view name) const {
  for (const auto& e : entries_)
    if (e.info.kind == kind && e.info.name == name) return &e.info;
  return nullptr;
}

template <class F>
std::invoke_result_t<const F&, const Params&> ModuleRegistry::build(ModuleKind kind,
                                                                    std::string_view name,
                                                                    const Params& params) const {
  for (const auto& e : entries_)
    if (e.info.kind == kind && e.info.name == name)
      return std::get<F>(e.make)(params.only(e.info.params));
  throw std::invalid_argument(std::string("no ") + module_kind_name(kind) + " module '" +
                              std::string(name) + "'");
}

std::unique_ptr<Detector> ModuleRegistry::make_detector(std::string_view name,
                                                        const Params& params) const {
  return build<DetectorFactory>(ModuleKind::kDetection, name, params);
}
std::unique_ptr<Localizer> ModuleRegistry::make_localizer(std::string_view name,
                                                          const Params& params) const {
  return build<LocalizerFactory>(ModuleKind::kLocalization, name, params);
}
std::unique_ptr<Recovery> ModuleRegistry::make_recovery(std::string_view name,
                                                        const Params& params) const {
  return build<RecoveryFactory>(ModuleKind::kRecovery, name, params);
}
std::unique_ptr<CheckpointPlanner> ModuleRegistry::make_checkpoint(std::string_view name,
                                                                   const Params& params) const {
  return build<CheckpointFactory>(ModuleKind::kCheckpoint, name, params);
}
std::unique_ptr<FailSlowPolicy> ModuleRegistry::make_failslow(std::string_view name,
                                                              const Params& params) const {
  return build<FailSlowFactory>(ModuleKind::kFailSlow, name, params);
}
std::unique_ptr<StopVerdict> ModuleRegistry::make_verdict(std::string_view name,
                                                          const Params& params) const {
  return build<VerdictFactory>(ModuleKind::kVerdict, name, params);
}

ParamSpec module_choice(const ModuleRegistry& r, ModuleKind kind, std::string name,
                        std::string help) {
  std::vector<std::string> names, versions;
  const char* sep = ": ";
  for (const ModuleInfo* m : r.of(kind)) {
    help += sep + m->name + " (" + m->summary + ")";
    sep = "; ";
    names.push_back(m->name);
    versions.push_back(m->version);
  }
  return ParamSpec{std::move(name),
                   std::move(help),
                   "choice",
                   0,
                   0,
                   names.empty() ? 0 : static_cast<double>(names.size() - 1),
                   names,
                   {},
                   versions};
}

void add_module_params(const ModuleRegistry& r, std::vector<ParamSpec>& params) {
  for (ModuleKind kind : kModuleKinds)
    for (const ModuleInfo* m : r.of(kind))
      for (const ParamSpec& p : m->params) {
        // A module's own parameter is read when the stack's choice of that kind picks it.
        const std::string when = std::string(module_kind_name(kind)) + "=" + m->name;
        auto have = std::find_if(params.begin(), params.end(),
                                 [&](const ParamSpec& q) { return q.name == p.name; });
        if (have == params.end()) {
          params.push_back(p);
          params.back().read_when = {when};
        } else if (!have->read_when.empty() &&
                   std::find(have->read_when.begin(), have->read_when.end(), when) ==
                       have->read_when.end()) {
          have->read_when.push_back(when);  // declared by several modules: read when any is chosen
        }
      }
}

void add_module_uses(const ModuleRegistry& r, std::vector<FacilityUse>& uses) {
  for (ModuleKind kind : kModuleKinds)
    for (const ModuleInfo* m : r.of(kind)) {
      const std::string when = std::string(module_kind_name(kind)) + "=" + m->name;
      std::vector<Facility> fs;
      if (m->uses)
        fs = *m->uses;
      else
        for (int f = 0; f < kFacilities; ++f) fs.push_back(static_cast<Facility>(f));
      for (Facility f : fs) {
        auto have = std::find_if(uses.begin(), uses.end(),
                                 [&](const FacilityUse& u) { return u.facility == f; });
        if (have == uses.end())
          uses.push_back({f, {when}});
        else if (!have->when.empty() &&
                 std::find(have->when.begin(), have->when.end(), when) == have->when.end())
          have->when.push_back(when);
      }
    }
}

std::string module_list(std::initializer_list<const ModuleInfo*> modules) {
  std::string out;
  for (const ModuleInfo* m : modules)
    out += (out.empty() ? "" : ", ") + std::string(module_kind_name(m->kind)) + " " + m->name +
           " v" + m->version;
  return out;
}

}  // namespace faultline::policies
