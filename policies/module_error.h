// A policy module that failed at its own job: a Python module that raised, answered the
// wrong type or outlasted its deadline (plugins/python_modules.h). The module is the
// user's input, like a scenario, so the simulator stops with this one line and exit 2, not
// as a crash of its own; the fork pool carries it from a replica's process to the parent.
#pragma once

#include <stdexcept>

namespace faultline::policies {

struct ModuleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace faultline::policies
