// Registers the built-in policy stacks: requeue, oracle (and, as they land, byterobust,
// reschedule and the module alternatives).
#pragma once

#include "policies/api/registry.h"
#include "policies/module.h"

namespace faultline::policies {

// Registers the built-in stacks; those that compose modules (byterobust) choose among
// `modules` and build from it, so it outlives `r`.
void register_builtin(Registry& r, const ModuleRegistry& modules);
// A registry with every built-in stack, composing `modules`.
Registry builtin_registry(const ModuleRegistry& modules);
// The same, composing the modules of this process (modules()).
Registry builtin_registry();

// Registers the built-in modules (policies/module.h), one line each.
void register_builtin_modules(ModuleRegistry& m);
// The modules of this program: the built-in ones, then those plugins registered
// (policies/plugin.h). The program hands them to the stacks it builds (builtin_registry());
// a stack's choice parameters list them, so plugins load before the first stack is
// described, and after that the registry is frozen. No stack reads it itself.
const ModuleRegistry& modules();
// For the plugin loader: the registry to add to. Throws std::logic_error once frozen.
ModuleRegistry& modules_for_registration();

}  // namespace faultline::policies
