// Tests that read the real traces, never copied into the repository: from the folder
// $FAULTLINE_TRACES when set, else ../shared/traces beside the clone, where
// traces/fetch.sh puts them (traces/FORMAT.md, "Where the real traces come from").
//
// A missing file skips the test, in one line that names the file and says how to get it.
// Under CI (the CI environment variable set, as .ci/run does) it fails the test instead:
// every CI run has ../shared beside the clone, so a missing file there is a broken path,
// and a skip would hide it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::testing {

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::strcmp(ci, "0") != 0 && std::strcmp(ci, "false") != 0;
}

// The folder of the real traces: $FAULTLINE_TRACES, else ../shared/traces beside the clone.
inline std::string traces_dir() {
  const char* env = std::getenv("FAULTLINE_TRACES");
  const std::filesystem::path dir =
      env && *env ? std::filesystem::absolute(env)
                  : std::filesystem::path(FAULTLINE_SOURCE_DIR) / ".." / "shared" / "traces";
  return dir.lexically_normal().string();
}

// A file under traces_dir(), e.g. shared_trace("infinitehbd/fault_trace.json").
inline std::string shared_trace(const std::string& relative) {
  return (std::filesystem::path(traces_dir()) / relative).string();
}

// The one line a missing file gets: a failure under CI, a skip elsewhere.
inline std::string shared_missing(const std::string& path) {
  return path + (under_ci() ? " is missing: CI runs with ../shared/traces beside the clone"
                            : " is missing: run traces/fetch.sh to get it");
}

// The real trace a shipped scenario reads: for one whose $.faults.trace.file lies under
// ../shared/traces/, that file under traces_dir(); "" for any other scenario.
inline std::string shipped_scenario_trace(const std::string& scenario) {
  std::ifstream in(scenario);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc.contains("faults") || !doc["faults"].is_object() ||
      !doc["faults"].contains("trace") || !doc["faults"]["trace"].is_object())
    return "";
  const std::string file = doc["faults"]["trace"].value("file", "");
  const std::string under = "shared/traces/";
  const std::size_t at = file.find(under);
  return at == std::string::npos ? "" : shared_trace(file.substr(at + under.size()));
}

// The --set values that point a shipped scenario at `trace` (from shipped_scenario_trace):
// faults.trace.file=TRACE when $FAULTLINE_TRACES moves the traces, none otherwise (the
// scenario then reads its own path, the same file).
inline std::vector<std::string> shipped_trace_sets(const std::string& trace) {
  const char* env = std::getenv("FAULTLINE_TRACES");
  if (trace.empty() || !env || !*env) return {};
  return {"faults.trace.file=" + trace};
}

// For a test that loops over files, some of which need a real trace: have(path) is true
// when the file exists; otherwise it fails the test under CI, or else remembers the file
// for FAULTLINE_SKIP_IF_MISSING at the test's end (the other files still run).
class SharedFiles {
 public:
  bool have(const std::string& path) {
    if (std::filesystem::exists(path)) return true;
    if (under_ci())
      ADD_FAILURE() << shared_missing(path);
    else if (missing_.empty())
      missing_ = path;
    return false;
  }
  const std::string& missing() const { return missing_; }

 private:
  std::string missing_;
};

}  // namespace faultline::testing

// Inside a TEST body: skips the test (fails it under CI) when `path` does not exist.
#define FAULTLINE_REQUIRE_SHARED(path)                                              \
  do {                                                                              \
    const std::string faultline_shared_path_ = (path);                              \
    if (!std::filesystem::exists(faultline_shared_path_)) {                         \
      if (::faultline::testing::under_ci())                                         \
        FAIL() << ::faultline::testing::shared_missing(faultline_shared_path_);     \
      GTEST_SKIP() << ::faultline::testing::shared_missing(faultline_shared_path_); \
    }                                                                               \
  } while (0)

// At the end of a TEST body that used a SharedFiles: skips the test (whose other files ran)
// when one was missing; a failure recorded before stays a failure.
#define FAULTLINE_SKIP_IF_MISSING(files)                                      \
  do {                                                                        \
    if (!(files).missing().empty())                                           \
      GTEST_SKIP() << ::faultline::testing::shared_missing((files).missing()) \
                   << " (the files that do not need it ran)";                 \
  } while (0)
