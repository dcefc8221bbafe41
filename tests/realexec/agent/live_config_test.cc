// The live config's keys added for operators: the start timeout and the read-only credential.
#include "realexec/live_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "policies/builtin.h"

namespace faultline::live {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class LiveConfigKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("faultline-live-config-" + std::to_string(getpid()))).string();
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Loads {"machines": [m0], "job": job, ...extra}; returns the error, or "" with *out set.
  std::string load(json job, json extra = json::object(), LiveConfig* out = nullptr) {
    json doc{{"token_file", "token"},
             {"machines", {{{"name", "m0"}}}},
             {"job", job},
             {"trainjob_bin", "/bin/true"}};
    for (auto& [k, v] : extra.items()) doc[k] = v;
    const std::string path = dir_ + "/live.json";
    std::ofstream(path) << doc.dump();
    try {
      LiveConfig c = load_live_config(path, policies::builtin_registry());
      if (out) *out = c;
      return "";
    } catch (const LiveConfigError& e) {
      return e.what();
    }
  }
  std::string dir_;
};

TEST_F(LiveConfigKeys, StartupTimeoutIsConfigurable) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json::object(), &c), "");
  EXPECT_EQ(c.job.startup_timeout_s, 120) << "the default";
  json slow = job;
  slow["startup_timeout_s"] = 130;  // the job of the review that needed 130 s
  ASSERT_EQ(load(slow, json::object(), &c), "");
  EXPECT_EQ(c.job.startup_timeout_s, 130);
  slow["startup_timeout_s"] = 0;
  const std::string err = load(slow);
  EXPECT_NE(err.find("job.startup_timeout_s"), std::string::npos) << err;
}

TEST_F(LiveConfigKeys, TheReadOnlyCredentialIsAFileOfItsOwn) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json{{"status_token_file", "status-token"}}, &c), "");
  EXPECT_EQ(c.status_token_file, dir_ + "/status-token");
  const std::string err = load(job, json{{"status_token_file", "token"}});
  EXPECT_NE(err.find("status_token_file: expected a file other than token_file"), std::string::npos) << err;
}

}  // namespace
}  // namespace faultline::live
