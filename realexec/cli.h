// The live-mode subcommands of the `faultline` program: `faultline live CONFIG` (the
// controller) and `faultline agent CONFIG --name NAME` (one per machine). The program
// (cli/main.cc) hands everything after the subcommand name to these functions.
#pragma once

#include <string>
#include <vector>

namespace faultline::live {

// `faultline agent CONFIG --name NAME`; `args` excludes "faultline agent". Returns the
// exit code: 0 after a shutdown request, 137 after an injected machine_down, 2 for bad
// usage, configuration or token, 1 for runtime failures, 128+N after signal N.
int agent_main(const std::vector<std::string>& args);

// `faultline live CONFIG ...`; `args` excludes "faultline live" (realexec/controller/live_cli.cc).
int live_main(const std::vector<std::string>& args);

}  // namespace faultline::live
