// `faultline-live`: live mode's program, the controller (`faultline-live live ...`) and
// the per-machine agent (`faultline-live agent ...`). `faultline live|agent` execs it. It
// links the policy stacks, the wire protocol and the reactor, and neither the simulator
// (SimGrid) nor the fitting code (Eigen): a tests checks its ldd and symbols.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "plugins/loader.h"
#include "plugins/python_modules.h"
#include "realexec/cli.h"
#include "realexec/fleet/fleet.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto err = faultline::plugins::load_plugins(args)) {
    std::fprintf(stderr, "faultline: plugin %s\n", err->c_str());
    return 2;
  }
  // A Python module that fails in live mode is reported and the kind's built-in default
  // decides from then on: the controller keeps running (docs/writing-a-policy-module.md).
  faultline::plugins::python::set_failure_mode(
      faultline::plugins::python::FailureMode::kFallBack, [](const std::string& line) {
        std::fprintf(stderr, "faultline-live: %s\n", line.c_str());
        std::fflush(stderr);
      });
  if (!args.empty() && args[0] == "fleet")
    return faultline::live::fleet_main({args.begin() + 1, args.end()});
  if (args.empty() || faultline::cli::is_help(args[0])) {
    std::fputs(
        "usage: faultline-live live run|inject|update|status|stop|launch|slurm-config CONFIG "
        "[options]\n"
        "       faultline-live agent CONFIG --name NAME\n"
        "       faultline-live fleet CONFIG [options] (virtual agents for scale tests)\n"
        "(the same as faultline live ... and faultline agent ...; --plugin FILE loads policy "
        "modules; `faultline-live COMMAND --help` lists a command's options)\n",
        stdout);
    return 0;
  }
  if (args[0] != "live" && args[0] != "agent")
    return faultline::cli::FlagTable("faultline-live", "faultline-live COMMAND ...")
        .usage_error("unknown command '" + args[0] + "'");
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  return args[0] == "live" ? faultline::live::live_main(rest) : faultline::live::agent_main(rest);
}
