// The sweep, tune and report CLI tests' helpers (tests/sweep/*_cli_test.cc): files and CSV
// read back, a temporary directory, any program run with its output captured, the shipped
// scenarios they sweep.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli.h"

namespace faultline::testing::sweep_cli {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// CSV without quoted fields (what these tests produce) as rows of fields.
inline std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& line : split(text, '\n'))
    if (!line.empty()) rows.push_back(split(line, ','));
  return rows;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("faultline-test-" + name)) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Runs any program; captures stdout and stderr.
inline CliResult run_program(const std::vector<std::string>& argv) { return run_argv(argv); }

inline const std::string kDaly = scenarios_dir() + "/daly-check.json";
inline const std::string kDense = scenarios_dir() + "/byterobust-dense-9600.json";

inline std::vector<std::string> sweep_args(const std::string& scenario, const std::string& out,
                                           std::vector<std::string> extra) {
  std::vector<std::string> a{"sim", "sweep", scenario, "--out", out, "--quiet"};
  // The dense scenario runs byterobust; these sweeps vary the requeue stack's interval.
  if (scenario == kDense) a.insert(a.end(), {"--set", "policy.stack=requeue"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

}  // namespace faultline::testing::sweep_cli
