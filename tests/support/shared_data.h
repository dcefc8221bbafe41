// Tests that read the real traces in ../shared (beside the clone, never copied into the
// repository). Where the data is missing a developer's run skips such a test; CI (the
// CI environment variable set) fails it, because CI always runs with ../shared beside
// the clone and a silent skip would hide a broken path.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace faultline::testing {

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::strcmp(ci, "0") != 0 && std::strcmp(ci, "false") != 0;
}

}  // namespace faultline::testing

// Inside a TEST body: skip (developer) or fail (CI) when `path` does not exist.
#define FAULTLINE_REQUIRE_SHARED(path)                                                                 \
  do {                                                                                                 \
    const std::string faultline_shared_path_ = (path);                                                 \
    if (!std::filesystem::exists(faultline_shared_path_)) {                                            \
      if (::faultline::testing::under_ci())                                                            \
        FAIL() << faultline_shared_path_ << " is missing: CI runs with ../shared beside the clone";    \
      GTEST_SKIP() << faultline_shared_path_ << " not present (../shared is not beside this clone)";   \
    }                                                                                                  \
  } while (0)
