#include "plugins/python_modules.h"

#include <pybind11/stl.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <utility>

#include "plugins/python_host.h"
#include "policies/builtin.h"
#include "policies/module.h"

namespace faultline::plugins::python {

namespace {

using namespace faultline::policies;

FailureMode g_mode = FailureMode::kStop;
std::function<void(const std::string&)> g_report;

// A registered class: what every module built from it shares.
struct Meta {
  ModuleInfo info;
  Identity who;
  PyObject* cls = nullptr;  // a reference held for the life of the process
};

// The types of faultline.policy a module answers with, held for the life of the process.
struct Types {
  PyObject *run_probe, *run_replay, *located, *checkpoint_plan, *standby_pool, *acquire, *strike,
      *probe_result, *replay_result;
};
const Types& types() {
  static const Types t = [] {
    py::module_ m = policy_module();
    auto held = [&](const char* name) { return py::object(m.attr(name)).inc_ref().ptr(); };
    return Types{held("RunProbe"),       held("RunReplay"),   held("Located"),
                 held("CheckpointPlan"), held("StandbyPool"), held("AcquireMachines"),
                 held("Strike"),         held("ProbeResult"), held("ReplayResult")};
  }();
  return t;
}

// ---------------------------------------------------------------- reading answers

// Reads field `name` of an answer as T; a Failure naming the call and the field otherwise.
template <class T>
T field(const py::handle& r, const char* name, const char* method, const char* expected) {
  try {
    return r.attr(name).cast<T>();
  } catch (const std::exception&) {
    throw Failure{std::string(method) + "() answered " +
                  py::str(py::type::of(r).attr("__name__")).cast<std::string>() + " with " + name +
                  " that is not " + expected};
  }
}

void check_range(const std::vector<int>& ids, int lo, int n, const char* method, const char* what) {
  for (int id : ids)
    if (id < lo || id >= n)
      throw Failure{std::string(method) + "() answered " + what + " " + std::to_string(id) +
                    " outside [" + std::to_string(lo) + ", " + std::to_string(n) + ")"};
}

// A mechanism's name (a built-in's or the module's own, action.h); a Failure when empty.
Mechanism credit_named(const std::string& name, const char* method, const char* what) {
  if (name.empty())
    throw Failure{std::string(method) + "() answered " + what + " '', expected a name"};
  return Mechanism::named(name);
}

// The enum value whose name is `name` among n values; a Failure listing them otherwise.
template <class E>
E named(const std::string& name, int n, const char* (*name_of)(E), const char* method,
        const char* what) {
  std::string all;
  for (int i = 0; i < n; ++i) {
    const E e = static_cast<E>(i);
    if (name == name_of(e)) return e;
    all += (all.empty() ? "" : ", ") + std::string(name_of(e));
  }
  throw Failure{std::string(method) + "() answered " + what + " '" + name + "', expected one of " +
                all};
}

std::string type_name(const py::handle& r) {
  return py::str(py::type::of(r).attr("__name__")).cast<std::string>();
}

LocalizationStep to_step(const py::object& r, const ClusterView& view, const char* method) {
  const Types& t = types();
  if (py::isinstance(r, t.run_probe)) {
    RunProbe p;
    p.test = named(field<std::string>(r, "test", method, "a str"), kProbeKinds, probe_name, method,
                   "RunProbe with test");
    p.machines = field<std::vector<int>>(r, "machines", method, "a list of machine ids");
    check_range(p.machines, 0, view.machine_count(), method, "RunProbe with machine");
    p.deadline = Duration::seconds(field<double>(r, "deadline_s", method, "a number"));
    p.reason = field<std::string>(r, "reason", method, "a str");
    for (auto& g : field<std::vector<std::vector<int>>>(r, "groups", method, "a list of lists"))
      check_range(g, 0, view.machine_count(), method, "RunProbe with machine"),
          p.groups.push_back(std::move(g));
    return LocalizationTest{std::move(p)};
  }
  if (py::isinstance(r, t.run_replay)) {
    RunReplay p;
    for (auto& g : field<std::vector<std::vector<int>>>(r, "groups", method, "a list of lists"))
      check_range(g, -1, view.machine_count(), method, "RunReplay with machine"),
          p.groups.push_back(std::move(g));
    p.reason = field<std::string>(r, "reason", method, "a str");
    return LocalizationTest{std::move(p)};
  }
  if (py::isinstance(r, t.located)) {
    Located l;
    l.evict = field<std::vector<int>>(r, "evict", method, "a list of slots");
    check_range(l.evict, 0, view.slots(), method, "Located with slot");
    l.code_at_fault = field<bool>(r, "code_at_fault", method, "a bool");
    l.credit = credit_named(field<std::string>(r, "credit", method, "a str"), method,
                            "Located with credit");
    l.reason = field<std::string>(r, "reason", method, "a str");
    return l;
  }
  throw Failure{std::string(method) + "() answered " + type_name(r) +
                ", expected RunProbe, RunReplay or Located"};
}

py::object event_object(const Event& e) {
  const Types& t = types();
  if (const auto* p = std::get_if<ProbeResult>(&e))
    return py::reinterpret_borrow<py::object>(t.probe_result)(
        probe_name(p->test), p->failed, p->timed_out, p->group_failed, p->group_seconds);
  if (const auto* r = std::get_if<ReplayResult>(&e))
    return py::reinterpret_borrow<py::object>(t.replay_result)(r->group_failed);
  return py::none();
}

SetCheckpointPlan to_plan(const py::object& r, const char* method) {
  if (!py::isinstance(r, types().checkpoint_plan))
    throw Failure{std::string(method) + "() answered " + type_name(r) +
                  ", expected CheckpointPlan"};
  SetCheckpointPlan p;
  const double interval = field<double>(r, "interval_s", method, "a number");
  const double blocking = field<double>(r, "blocking_s", method, "a number");
  const double remote = field<double>(r, "remote_interval_s", method, "a number");
  if (!(interval >= 0) || !(blocking >= 0) || !(remote > 0))
    throw Failure{std::string(method) +
                  "() answered a CheckpointPlan with interval_s or blocking_s < 0, or "
                  "remote_interval_s <= 0"};
  p.interval = Duration::seconds(interval);
  p.blocking = Duration::seconds(blocking);
  p.remote_interval = Duration::seconds(remote);
  p.tier = named(field<std::string>(r, "tier", method, "a str"), 3, tier_name, method,
                 "CheckpointPlan with tier");
  p.reason = field<std::string>(r, "reason", method, "a str");
  return p;
}

AcquireMachines to_acquire(const py::object& r, const char* method) {
  if (!py::isinstance(r, types().acquire))
    throw Failure{std::string(method) + "() answered " + type_name(r) +
                  ", expected AcquireMachines"};
  AcquireMachines a;
  a.slots = field<std::vector<int>>(r, "slots", method, "a list of slots");
  check_range(a.slots, 0, 1 << 30, method, "AcquireMachines with slot");
  a.mode = named(field<std::string>(r, "mode", method, "a str"), 4, mode_name, method,
                 "AcquireMachines with mode");
  a.mechanism = credit_named(field<std::string>(r, "mechanism", method, "a str"), method,
                             "AcquireMachines with mechanism");
  a.reason = field<std::string>(r, "reason", method, "a str");
  a.same_domain = field<bool>(r, "same_domain", method, "a bool");
  return a;
}

// ---------------------------------------------------------------- the adapters

// The kind's built-in default (its first module), with its default parameters: what decides
// in live mode once a Python module failed.
template <class M>
std::unique_ptr<M> make_default(ModuleKind kind, std::string* name) {
  const ModuleInfo* def = modules().of(kind).front();
  *name = def->name;
  Params p;
  Params::resolve(def->params, {}, &p);
  if constexpr (std::is_same_v<M, Localizer>) return modules().make_localizer(def->name, p);
  if constexpr (std::is_same_v<M, Recovery>) return modules().make_recovery(def->name, p);
  if constexpr (std::is_same_v<M, CheckpointPlanner>)
    return modules().make_checkpoint(def->name, p);
  if constexpr (std::is_same_v<M, StopVerdict>) return modules().make_verdict(def->name, p);
}

// What every adapter shares: the Python object, its calls, and the fallback after a failure.
template <class M>
class Adapter : public M {
 public:
  Adapter(std::shared_ptr<const Meta> meta, py::object obj)
      : meta_(std::move(meta)), obj_(std::move(obj)) {}
  const ModuleInfo& info() const override { return meta_->info; }

 protected:
  // Asks the module; its answer through `convert`, or nullopt after a failure in live mode
  // (fallback() decides from then on). In the simulator a failure throws ModuleError.
  template <class Convert>
  auto ask(const char* method, const py::tuple& args, Convert convert) const
      -> std::optional<decltype(convert(std::declval<py::object>()))> {
    if (fallback_) return std::nullopt;
    try {
      py::object r = call(meta_->who, obj_, method, args);
      return convert(r);
    } catch (const Failure& f) {
      failed(f);
    }
    return std::nullopt;
  }
  M& fallback() const { return *fallback_; }
  bool fell_back() const { return fallback_ != nullptr; }

 private:
  void failed(const Failure& f) const {
    const std::string line = "policy module " + meta_->who.label + ": " + f.what;
    if (g_mode == FailureMode::kStop) throw ModuleError(line);
    std::string name;
    fallback_ = make_default<M>(meta_->info.kind, &name);
    if (g_report)
      g_report(line + "; the built-in " + module_kind_name(meta_->info.kind) + " module '" + name +
               "' decides for the rest of the run");
  }
  std::shared_ptr<const Meta> meta_;
  py::object obj_;
  mutable std::unique_ptr<M> fallback_;
};

class PyLocalizer final : public Adapter<Localizer> {
 public:
  using Adapter::Adapter;
  LocalizationStep begin(const std::string& why, const ClusterView& view) override {
    fallback_search_ = false;
    if (!fell_back()) {
      ScopedView v(view);
      const auto step = ask("begin", py::make_tuple(why, v.object()),
                            [&](const py::object& r) { return to_step(r, view, "begin"); });
      if (step) return *step;
    }
    fallback_search_ = true;
    return fallback().begin(why, view);
  }
  LocalizationStep answer(const Event& outcome, const ClusterView& view) override {
    if (fallback_search_) return fallback().answer(outcome, view);
    ScopedView v(view);
    const auto step = ask("answer", py::make_tuple(event_object(outcome), v.object()),
                          [&](const py::object& r) { return to_step(r, view, "answer"); });
    if (step) return *step;
    return Located{{}, false, Mechanism::kReplay, "the Python localizer failed: nothing located"};
  }

 private:
  bool fallback_search_ = false;  // the search under way is the fallback's
};

class PyVerdict final : public Adapter<StopVerdict> {
 public:
  using Adapter::Adapter;
  Verdict judge(const Recurrence& r) const override {
    const auto v =
        ask("judge", py::make_tuple(r.identical, r.runs_without_progress), [](const py::object& x) {
          if (!py::isinstance<py::str>(x))
            throw Failure{"judge() answered " + type_name(x) +
                          ", expected a str (carry_on, roll_back or stop)"};
          return named(x.cast<std::string>(), 3, verdict_name, "judge", "verdict");
        });
    return v ? *v : fallback().judge(r);
  }
};

class PyCheckpoint final : public Adapter<CheckpointPlanner> {
 public:
  using Adapter::Adapter;
  SetCheckpointPlan plan(const ClusterView& view) const override {
    ScopedView v(view);
    const auto p = ask("plan", py::make_tuple(v.object()),
                       [](const py::object& r) { return to_plan(r, "plan"); });
    return p ? *p : fallback().plan(view);
  }
  std::optional<SetCheckpointPlan> replan(int interruptions, Duration running,
                                          const ClusterView& view) override {
    ScopedView v(view);
    const auto p = ask("replan", py::make_tuple(interruptions, running.to_seconds(), v.object()),
                       [](const py::object& r) -> std::optional<SetCheckpointPlan> {
                         if (r.is_none()) return std::nullopt;
                         return to_plan(r, "replan");
                       });
    return p ? *p : fallback().replan(interruptions, running, view);
  }
};

class PyRecovery final : public Adapter<Recovery> {
 public:
  using Adapter::Adapter;
  std::optional<SetStandbyPool> start(const ClusterView& view) const override {
    ScopedView v(view);
    const auto s = ask(
        "start", py::make_tuple(v.object()),
        [](const py::object& r) -> std::optional<SetStandbyPool> {
          if (r.is_none()) return std::nullopt;
          if (!py::isinstance(r, types().standby_pool))
            throw Failure{"start() answered " + type_name(r) + ", expected StandbyPool or None"};
          const int size = field<int>(r, "size", "start", "an int");
          if (size < 0) throw Failure{"start() answered a StandbyPool of size < 0"};
          return SetStandbyPool{size, field<std::string>(r, "reason", "start", "a str")};
        });
    return s ? *s : fallback().start(view);
  }
  AcquireMachines replace(const std::vector<SlotId>& slots, const std::string& why,
                          Mechanism credit) const override {
    const auto a = ask("replace", py::make_tuple(slots, why, mechanism_name(credit)),
                       [](const py::object& r) { return to_acquire(r, "replace"); });
    return a ? *a : fallback().replace(slots, why, credit);
  }
  Strike struck(MachineId m) override {
    const auto s = ask("struck", py::make_tuple(m), [](const py::object& r) {
      if (r.is_none()) return Strike{};
      if (!py::isinstance(r, types().strike))
        throw Failure{"struck() answered " + type_name(r) + ", expected Strike or None"};
      return Strike{field<bool>(r, "retire", "struck", "a bool"),
                    field<bool>(r, "avoid", "struck", "a bool")};
    });
    return s ? *s : fallback().struck(m);
  }
  MachineSet avoided() const override {
    const auto a = ask("avoided", py::make_tuple(), [](const py::object& r) {
      try {
        return r.cast<MachineSet>();
      } catch (const std::exception&) {
        throw Failure{"avoided() answered " + type_name(r) + ", expected a list of machine ids"};
      }
    });
    return a ? *a : fallback().avoided();
  }
};

// ---------------------------------------------------------------- registration

// Builds the module object for `meta` with the stack's values of its parameters.
template <class A, class M>
std::unique_ptr<M> build(const std::shared_ptr<const Meta>& meta, const Params& p) {
  py::dict values;
  for (const auto& [name, v] : p.values()) values[py::str(name)] = v;
  for (const auto& [name, module] : p.choices()) values[py::str(name)] = module;  // by name
  try {
    py::object obj = call(meta->who, py::reinterpret_borrow<py::object>(meta->cls), "__init__",
                          py::make_tuple(values));
    return std::make_unique<A>(meta, std::move(obj));
  } catch (const Failure& f) {
    const std::string line = "policy module " + meta->who.label + ": " + f.what;
    if (g_mode == FailureMode::kStop) throw ModuleError(line);
    std::string name;
    auto fb = make_default<M>(meta->info.kind, &name);
    if (g_report)
      g_report(line + "; the built-in " + module_kind_name(meta->info.kind) + " module '" + name +
               "' decides for the rest of the run");
    return fb;
  }
}

struct KindSpec {
  const char* base;  // faultline.policy's class
  ModuleKind kind;
  std::vector<const char*> required;  // methods a module must define
};
const std::vector<KindSpec>& kinds() {
  static const std::vector<KindSpec> k = {
      {"Localizer", ModuleKind::kLocalization, {"begin", "answer"}},
      {"Recovery", ModuleKind::kRecovery, {"replace"}},
      {"CheckpointPlanner", ModuleKind::kCheckpoint, {"plan"}},
      {"StopVerdict", ModuleKind::kVerdict, {"judge"}},
  };
  return k;
}

// A refusal naming where the class came from and the field.
struct Refusal {
  std::string what;
};

bool valid_name(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return false;
  return true;
}

template <class T>
T info_field(const py::handle& obj, const char* name, const std::string& path,
             const char* expected) {
  try {
    return obj.attr(name).cast<T>();
  } catch (const std::exception&) {
    throw Refusal{path + "." + name + ": expected " + expected};
  }
}

ParamSpec param_spec(const py::handle& p, const std::string& path) {
  if (!py::isinstance(p, policy_module().attr("Param")))
    throw Refusal{path + ": expected a faultline.Param"};
  ParamSpec s;
  s.name = info_field<std::string>(p, "name", path, "a str");
  if (!valid_name(s.name))
    throw Refusal{path + ".name: expected lower-case letters, digits, _ or -"};
  s.help = info_field<std::string>(p, "help", path, "a str");
  s.unit = info_field<std::string>(p, "unit", path, "a str");
  s.default_value = info_field<double>(p, "default", path, "a number");
  s.min = info_field<double>(p, "min", path, "a number");
  s.max = info_field<double>(p, "max", path, "a number");
  if (!(s.min <= s.default_value && s.default_value <= s.max))
    throw Refusal{path + ": expected min <= default <= max, got " + std::to_string(s.min) + ", " +
                  std::to_string(s.default_value) + ", " + std::to_string(s.max)};
  return s;
}

// The module's identity from the class's info (its kind from its base).
ModuleInfo module_info(const py::handle& cls, const KindSpec& k, const std::string& cname) {
  const py::object info = cls.attr("info");
  if (!py::isinstance(info, policy_module().attr("Info")))
    throw Refusal{cname + ".info: expected a faultline.Info"};
  ModuleInfo m;
  m.kind = k.kind;
  m.name = info_field<std::string>(info, "name", cname + ".info", "a str");
  if (!valid_name(m.name))
    throw Refusal{cname + ".info.name: expected lower-case letters, digits, _ or -, got '" +
                  m.name + "'"};
  m.version = info_field<std::string>(info, "version", cname + ".info", "a str");
  if (m.version.empty()) throw Refusal{cname + ".info.version: expected a non-empty str"};
  m.summary = info_field<std::string>(info, "summary", cname + ".info", "a str");
  const py::list params = info_field<py::list>(info, "params", cname + ".info", "a list of Param");
  for (std::size_t i = 0; i < params.size(); ++i)
    m.params.push_back(param_spec(params[i], cname + ".info.params[" + std::to_string(i) + "]"));
  return m;
}

const KindSpec& kind_of(const py::handle& cls, const std::string& cname) {
  const py::module_ pm = policy_module();
  if (PyType_Check(cls.ptr()))
    for (const auto& k : kinds())
      if (PyObject_IsSubclass(cls.ptr(), pm.attr(k.base).ptr()) == 1) {
        for (const char* m : k.required)
          if (cls.attr(m).is(pm.attr(k.base).attr(m)))
            throw Refusal{cname + ": a " + k.base + " must define " + m + "()"};
        return k;
      }
  throw Refusal{cname +
                ": expected a class derived from faultline.Localizer, Recovery, "
                "CheckpointPlanner or StopVerdict"};
}

template <class A, class M, class Factory>
void add_factory(ModuleRegistry& r, const std::shared_ptr<const Meta>& meta) {
  r.add(meta->info, Factory([meta](const Params& p) { return build<A, M>(meta, p); }));
}

// Adds the class to `r`; throws Refusal.
std::string add_class(ModuleRegistry& r, const py::handle& cls, const std::string& where) {
  std::string cname = "class";
  try {
    cname = "class " + py::str(cls.attr("__qualname__")).cast<std::string>();
  } catch (...) {
  }
  const KindSpec& k = kind_of(cls, cname);
  auto meta = std::make_shared<Meta>();
  meta->info = module_info(cls, k, cname);
  meta->who.deadline_s = info_field<double>(cls, "deadline_s", cname, "a number of seconds");
  if (!(meta->who.deadline_s > 0)) throw Refusal{cname + ".deadline_s: expected > 0"};
  meta->who.label = std::string(module_kind_name(k.kind)) + "/" + meta->info.name + " (" +
                    std::filesystem::path(where).filename().string() + ")";
  meta->cls = cls.inc_ref().ptr();
  using R = ModuleRegistry;
  switch (k.kind) {
    case ModuleKind::kLocalization:
      add_factory<PyLocalizer, Localizer, R::LocalizerFactory>(r, meta);
      break;
    case ModuleKind::kRecovery:
      add_factory<PyRecovery, Recovery, R::RecoveryFactory>(r, meta);
      break;
    case ModuleKind::kCheckpoint:
      add_factory<PyCheckpoint, CheckpointPlanner, R::CheckpointFactory>(r, meta);
      break;
    default:
      add_factory<PyVerdict, StopVerdict, R::VerdictFactory>(r, meta);
      break;
  }
  return std::string(module_kind_name(k.kind)) + "/" + meta->info.name;
}

// Merges `scratch` into the process's modules; the refusal otherwise.
std::optional<std::string> merge(const ModuleRegistry& scratch, const std::string& where) {
  try {
    modules_for_registration().merge(scratch);
  } catch (const std::invalid_argument& e) {
    return where + ": " + e.what() + " (a built-in module or an earlier plugin has that name)";
  } catch (const std::logic_error& e) {
    return where + ": " + e.what();
  }
  return std::nullopt;
}

// Runs FILE as module faultline_plugin_<stem>, its classes left pending in faultline.policy.
std::optional<std::string> run_file(const std::string& path) {
  const py::module_ pm = policy_module();
  const py::object was = pm.attr("_embedded");
  pm.attr("_embedded") = true;
  std::optional<std::string> err;
  try {
    const std::filesystem::path p = std::filesystem::absolute(path);
    py::module_::import("sys").attr("path").attr("insert")(0, p.parent_path().string());
    py::module_ util = py::module_::import("importlib.util");
    const std::string name = "faultline_plugin_" + p.stem().string();
    py::object spec = util.attr("spec_from_file_location")(name, p.string());
    py::object mod = util.attr("module_from_spec")(spec);
    py::module_::import("sys").attr("modules")[py::str(name)] = mod;
    spec.attr("loader").attr("exec_module")(mod);
  } catch (py::error_already_set& e) {
    err = path + ": " + failure_of("running the file: exec", e).what;
  }
  pm.attr("_embedded") = was;
  return err;
}

}  // namespace

std::optional<std::string> load_file(const std::string& path, std::vector<std::string>* names) {
  if (const std::string err = ensure_interpreter(); !err.empty()) return path + ": " + err;
  py::gil_scoped_acquire gil;
  if (auto err = run_file(path)) {
    policy_module().attr("_take_pending")();
    return err;
  }
  const py::list pending = policy_module().attr("_take_pending")();
  if (pending.empty())
    return path + ": registers no module (call faultline.register(YourClass) in it)";
  ModuleRegistry scratch;
  std::vector<std::string> added;
  try {
    for (const auto& cls : pending) added.push_back(add_class(scratch, cls, path));
  } catch (const Refusal& r) {
    return path + ": " + r.what;
  } catch (const std::invalid_argument& e) {
    return path + ": " + e.what();
  }
  if (auto err = merge(scratch, path)) return err;
  if (names) *names = std::move(added);
  return std::nullopt;
}

std::optional<std::string> register_class(PyObject* cls, const std::string& where,
                                          std::string* name) {
  if (const std::string err = ensure_interpreter(); !err.empty()) return where + ": " + err;
  py::gil_scoped_acquire gil;
  ModuleRegistry scratch;
  std::string added;
  try {
    added = add_class(scratch, py::handle(cls), where);
  } catch (const Refusal& r) {
    return where + ": " + r.what;
  } catch (const std::invalid_argument& e) {
    return where + ": " + e.what();
  }
  if (auto err = merge(scratch, where)) return err;
  if (name) *name = added;
  return std::nullopt;
}

void set_failure_mode(FailureMode mode, std::function<void(const std::string&)> report) {
  g_mode = mode;
  g_report = std::move(report);
}

}  // namespace faultline::plugins::python
