// tests/support/shared_data.h: a real trace that is missing skips a test on a workstation
// and fails it under CI (the CI variable set, as .ci/run does), where ../shared is always
// beside the clone and a missing file is a broken path that a skip would hide.
#include "tests/support/shared_data.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace faultline::testing {
namespace {

constexpr const char* kMissing = "/nonexistent/faultline-shared/fault_trace.json";

// Sets CI for the scope of one test and puts the old value back.
class ScopedCi {
 public:
  explicit ScopedCi(const char* value) {
    if (const char* old = std::getenv("CI")) old_ = old;
    if (value)
      ::setenv("CI", value, 1);
    else
      ::unsetenv("CI");
  }
  ~ScopedCi() {
    if (old_)
      ::setenv("CI", old_->c_str(), 1);
    else
      ::unsetenv("CI");
  }

 private:
  std::optional<std::string> old_;
};

void require_missing() { FAULTLINE_REQUIRE_SHARED(kMissing); }

void have_missing() {
  SharedFiles files;
  EXPECT_FALSE(files.have(kMissing));
}

TEST(SharedData, CiIsSetByAnyValueButZeroOrFalse) {
  {
    ScopedCi ci("1");
    EXPECT_TRUE(under_ci());
  }
  {
    ScopedCi ci("true");
    EXPECT_TRUE(under_ci());
  }
  for (const char* off : {"", "0", "false"}) {
    ScopedCi ci(off);
    EXPECT_FALSE(under_ci()) << "CI=" << off;
  }
  ScopedCi unset(nullptr);
  EXPECT_FALSE(under_ci());
}

TEST(SharedData, MissingFileFailsUnderCi) {
  ScopedCi ci("1");
  EXPECT_FATAL_FAILURE(require_missing(), "is missing: CI runs with ../shared/traces");
  EXPECT_NONFATAL_FAILURE(have_missing(), "is missing: CI runs with ../shared/traces");
}

TEST(SharedData, MissingFileSaysHowToGetItOutsideCi) {
  ScopedCi ci(nullptr);
  EXPECT_EQ(shared_missing(kMissing),
            std::string(kMissing) + " is missing: run traces/fetch.sh to get it");
  SharedFiles files;
  EXPECT_FALSE(files.have(kMissing));  // remembered for the skip at the test's end, no failure
  EXPECT_EQ(files.missing(), kMissing);
}

}  // namespace
}  // namespace faultline::testing
