// The `reschedule` stack (Pathways-style cold replacement): evicts the machine a crash
// names and replaces it cold, otherwise requeues; restarts from the last periodic remote
// checkpoint.
#pragma once

#include <memory>

#include "policies/api/policy.h"

namespace faultline::policies {

const PolicyInfo& reschedule_info();
std::unique_ptr<Policy> make_reschedule(const Params& p);

}  // namespace faultline::policies
