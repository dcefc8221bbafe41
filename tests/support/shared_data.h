// Tests that read the real traces in ../shared (beside the clone, never copied into the
// repository). Every developer checkout and every CI run has ../shared beside the
// clone, so a missing file is a failure that names the path, never a silent skip.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

// Inside a TEST body: fails the test when `path` does not exist.
#define FAULTLINE_REQUIRE_SHARED(path)                                        \
  do {                                                                        \
    const std::string faultline_shared_path_ = (path);                        \
    if (!std::filesystem::exists(faultline_shared_path_))                     \
      FAIL() << faultline_shared_path_                                        \
             << " is missing: the tests run with ../shared beside the clone"; \
  } while (0)
