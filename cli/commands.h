// Entry points of the `faultline` subcommands that live outside main.cc. Each takes the
// arguments after its own name, prints its --help, and returns the process exit code:
// 0 success, 1 runtime failure, 2 bad input or usage.
#pragma once

#include <string>
#include <vector>

#include "cli/analysis_commands.h"  // self_exe, exe_dir

namespace faultline::cli {

// faultline ARGS (plugins already loaded): the whole command line after the program's name
// (dispatch.cc). The program's main and the faultline._core Python extension module call it.
int dispatch(const std::vector<std::string>& args);

// faultline sim sweep SCENARIO --grid key=v1,v2 ... (sweep_cmd.cc)
int sim_sweep(const std::vector<std::string>& args);
// faultline sim tune SCENARIO --param key=lo:hi ... (tune_cmd.cc)
int sim_tune(const std::vector<std::string>& args);
// faultline sim compare SCENARIO --stacks A,B,... (compare_cmd.cc)
int sim_compare(const std::vector<std::string>& args);
// faultline sim replay EVENTLOG --stack NAME (replay_cmd.cc)
int sim_replay(const std::vector<std::string>& args);

}  // namespace faultline::cli
