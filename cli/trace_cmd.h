// `faultline trace ...`: statistics, fits, conversion, published mixes and synthetic
// traces from the command line. The `faultline` program (cli/main.cc) hands
// everything after "trace" to trace_command.
#pragma once

#include <string>
#include <vector>

namespace faultline::traces {

// Runs one trace subcommand; `args` excludes "faultline trace". Returns the exit code:
// 0 success, 1 runtime failure (e.g. cannot write), 2 bad input or usage (including a
// bad record under --strict).
int trace_command(const std::vector<std::string>& args);

}  // namespace faultline::traces
