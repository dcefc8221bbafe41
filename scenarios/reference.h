// The scenario reference, generated from the parser and the registered stacks' declared
// parameters (docs/scenario-reference.md; `faultline sim schema` prints it).
#pragma once

#include <string>

#include "policies/api/registry.h"

namespace faultline::scenarios {

// Markdown: every scenario field (type, unit, default, allowed values, meaning) and every
// registered stack's parameters. Throws std::logic_error when the parser reads a field
// that has no documentation line, or a documented field is no longer read.
std::string scenario_reference(const Registry& registry);

}  // namespace faultline::scenarios
