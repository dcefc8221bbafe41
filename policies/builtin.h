// Registers the built-in policy stacks: requeue, oracle (and, as they land, byterobust,
// reschedule and the module alternatives).
#pragma once

#include "policies/api/registry.h"

namespace faultline::policies {

void register_builtin(Registry& r);
// A registry with every built-in stack.
Registry builtin_registry();

}  // namespace faultline::policies
