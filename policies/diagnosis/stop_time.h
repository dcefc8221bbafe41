// Stop-time diagnosis (ByteRobust §4.2): which tests a crash's log signature and exit
// code call for, and whether it points at the job's own code.
#pragma once

#include <string>
#include <vector>

#include "policies/api/action.h"

namespace faultline::policies {

enum class CrashKind { kMachine, kNetwork, kNumeric, kUserCode, kEnvironment, kUnknown };

CrashKind classify_crash(const std::string& signature, int exit_code);
// Tests in the order the hierarchy runs them; empty when no machine test applies.
std::vector<ProbeKind> test_plan(CrashKind kind);

}  // namespace faultline::policies
