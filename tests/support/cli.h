// Runs the built `faultline` binary in a child process (SimGrid allows one engine per
// process, so every simulation in the tests gets its own).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace faultline::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Path of the faultline binary (set by CMake).
std::string faultline_binary();
// Runs faultline with `args`; captures stdout and stderr.
CliResult run_cli(const std::vector<std::string>& args);
// Runs any program (argv[0], looked up on PATH when it has no '/'); captures stdout and stderr.
CliResult run_argv(const std::vector<std::string>& argv);
// Directory of the repository's scenarios (set by CMake).
std::string scenarios_dir();
std::string tests_dir();
// A scratch path of this test process: the temporary directory's faultline-<name>-<pid>, so
// that tests ctest runs at once never share (and remove) each other's files.
std::filesystem::path scratch_dir(const std::string& name);

}  // namespace faultline::testing
