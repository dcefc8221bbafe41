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
// The built-in modules; built once, immutable. A stack's choice parameters list them.
const ModuleRegistry& builtin_modules();

}  // namespace faultline::policies
