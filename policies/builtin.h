// Registers the built-in policy stacks: requeue, oracle (and, as they land, byterobust,
// reschedule and the module alternatives).
#pragma once

#include "policies/api/registry.h"
#include "policies/module.h"

namespace faultline::policies {

void register_builtin(Registry& r);
// A registry with every built-in stack.
Registry builtin_registry();

// Registers the built-in modules (policies/module.h), one line each.
void register_builtin_modules(ModuleRegistry& m);
// The modules of this process: the built-in ones, then those plugins registered
// (policies/plugin.h). A stack's choice parameters list them, so plugins load before the
// first stack is described; after that the registry is frozen.
const ModuleRegistry& modules();
// For the plugin loader: the registry to add to. Throws std::logic_error once frozen.
ModuleRegistry& modules_for_registration();

}  // namespace faultline::policies
