// What `faultline sim sweep` and `faultline sim tune` share (sweep_cmd.cc, tune_cmd.cc): the
// scenario beside the shared simulation options, the sweep spec they make, a temporary store
// for a run without --out, and number parsing.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "cli/flags.h"
#include "policies/module.h"
#include "sim/sweep.h"

namespace faultline::cli {

inline bool parse_double(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// A temporary store removed when the command ends (when no --out is given).
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "faultline-sweep-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The shared simulation options (cli/flags.h) and the scenario.
struct CommonArgs : SimFlags {
  std::string scenario;
};

inline sim::SweepSpec make_spec(const CommonArgs& c) {
  sim::SweepSpec spec;
  spec.scenario_path = c.scenario;
  spec.base.sets = c.sets;
  if (c.allow_unused) spec.base.sets.push_back("policy.allow_unused_params=true");
  spec.base.seed = c.seed;
  spec.base.replicas = c.replicas;
  return spec;
}

// Runs a command's work after its arguments were checked and returns its exit code: a policy
// module's error is the user's (2), any other failure the run's (1), each one line on stderr.
template <class Body>
int run_reporting_errors(Body&& body) {
  try {
    return body();
  } catch (const faultline::policies::ModuleError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 1;
  }
}

}  // namespace faultline::cli
