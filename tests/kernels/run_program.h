#pragma once

// Test helper: runs a program (the built faultline-probe) as a child process with extra
// environment variables, captures stdout and stderr, and measures how long it took. A program
// still running after `timeout_s` is killed (the test then fails on timed_out).

#include <map>
#include <string>
#include <vector>

namespace faultline::kernels::testing {

struct ProgramRun {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  double elapsed_s = 0;
};

// `env` entries override (or, with an empty value, set empty) variables of this process's
// environment.
ProgramRun run_program(const std::string& program, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}, double timeout_s = 60);

// The path of faultline-probe under test (compiled in by CMake).
std::string probe_binary();

}  // namespace faultline::kernels::testing
