// Policy modules written in Python (python/faultline/policy.py): a class per module, run
// through an embedded interpreter in `faultline` and `faultline-live` (--plugin FILE.py),
// or through the interpreter of the process when the simulator runs from Python (the
// faultline._core extension module, faultline.register).
//
// Each class becomes a module of its kind in the process's ModuleRegistry, chosen by name
// like a built-in one; an adapter (a Localizer, Recovery, CheckpointPlanner or StopVerdict)
// calls its methods, converting the stack's values to Python and its answers back. Every
// call runs under the module's deadline (its deadline_s) and is checked: an exception, an
// answer of the wrong type or out of range, or a missed deadline is a module failure,
// reported in one line naming the module, its file and the call. What follows depends on
// the process (set_failure_mode): the simulator stops with a policies::ModuleError (exit
// 2); live mode reports it and hands the rest of the run to the kind's built-in default
// module, so the controller keeps running.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

struct _object;  // PyObject, without Python.h in every includer

namespace faultline::plugins::python {

// Loads FILE.py: starts the embedded interpreter when this process has none (the
// faultline package found beside the program), runs the file as a module, and registers
// every class it passed to faultline.register(). Returns nullopt (the "kind/name" of each
// module in `names`), or a one-line refusal naming the file: it does not load or raises,
// registers no class, or a class is refused (see register_class).
std::optional<std::string> load_file(const std::string& path, std::vector<std::string>* names);

// Registers one class: it derives from a kind of faultline.policy, declares a valid `info`
// (name, version, parameters with default in [min, max]) and defines the methods its kind
// requires. Returns nullopt, or the refusal naming `where` (the file, or "faultline.register")
// and the field. The module's "kind/name" goes to `name`.
std::optional<std::string> register_class(_object* cls, const std::string& where,
                                          std::string* name);

enum class FailureMode {
  kStop,      // throw policies::ModuleError (the simulator: exit 2)
  kFallBack,  // report, then the kind's built-in default module decides (live mode)
};
// How this process answers a module failure; `report` gets the one line (kFallBack), e.g.
// to the controller's log. The default: kStop.
void set_failure_mode(FailureMode mode, std::function<void(const std::string&)> report = {});

}  // namespace faultline::plugins::python
