// Entry points of the `faultline` subcommands that belong to analysis/: the analytic
// models and their check against the simulator, and the HTML report. Each takes the
// arguments after its own name, prints its --help, and returns the process exit code:
// 0 success, 1 runtime failure, 2 bad input or usage. Neither links the simulator: `analyze
// check` runs `faultline sim run` as a child process.
#pragma once

#include <string>
#include <vector>

namespace faultline::cli {

// faultline analyze daly|young|meta-ettr|standby|check ... (analyze_cmd.cc)
int analyze(const std::vector<std::string>& args);
// faultline report DIR... -o report.html (report_cmd.cc)
int report(const std::vector<std::string>& args);

// Path of the running executable (/proc/self/exe), for re-running it in a child process.
std::string self_exe();
// The directory of the running executable: its sibling programs (faultline-live,
// faultline-probe, faultline-mpi, the report script) are installed beside it.
std::string exe_dir();
// Replaces this process with the sibling program `name` given `args` (argv[1...]).
// Returns only when it cannot: prints why and returns exit code 2.
int exec_sibling(const std::string& name, const std::vector<std::string>& args);

}  // namespace faultline::cli
