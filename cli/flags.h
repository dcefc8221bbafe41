// The options every simulation command shares (sim run, compare, sweep, tune, replay): one
// call adds them to the command's flag table (flag_table.h), with one set of messages.
#pragma once

#include <string>
#include <vector>

#include "cli/flag_table.h"

namespace faultline::cli {

struct SimFlags {
  std::vector<std::string> sets;  // --set PATH=VALUE, in order
  long long replicas = -1;        // -1: the scenario's
  long long seed = -1;            // -1: the scenario's
  long long jobs = 1;
  std::string out_dir;
  std::string format = "table";
  bool quiet = false;
  bool progress = false;      // --progress: the progress bar also when stderr is no terminal
  bool allow_unused = false;  // --allow-unused: policy.allow_unused_params=true

  // --seed, --replicas and --allow-unused as scenario overrides, after the --sets.
  std::vector<std::string> scenario_sets() const;
};

// The flag table of a `faultline` command: its messages begin "faultline: ".
FlagTable command_table(const std::string& usage, const std::string& about = "");

// Adds the shared options to `t`, applied into `f`. `formats` lists the values --format
// takes (the first is the default), `format_help` says what they are, `out_help` what --out
// DIR receives.
void add_sim_flags(FlagTable& t, SimFlags& f, const std::vector<std::string>& formats,
                   const std::string& format_help, const std::string& out_help);
// The run-time switches of the shared options (--quiet, --progress, --allow-unused), which
// --help lists after a command's own.
void add_sim_switches(FlagTable& t, SimFlags& f);

// Prints "faultline: MESSAGE (see --help)" and returns 2, the usage exit code.
int usage_error(const std::string& msg);

}  // namespace faultline::cli
