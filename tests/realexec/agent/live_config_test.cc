// The live config's keys added for operators: the start timeout, the read-only credential and
// the metrics endpoint.
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

TEST_F(LiveConfigKeys, TheMetricsEndpointIsOptionalAndStrictlyChecked) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json::object(), &c), "");
  EXPECT_EQ(c.metrics_port, 0) << "none by default";
  ASSERT_EQ(load(job, json{{"metrics_listen", "0.0.0.0:9464"}, {"metrics_token_file", "metrics-token"},
                           {"metrics_linger_s", 5}},
                 &c),
            "");
  EXPECT_EQ(c.metrics_host, "0.0.0.0");
  EXPECT_EQ(c.metrics_port, 9464);
  EXPECT_EQ(c.metrics_token_file, dir_ + "/metrics-token");
  EXPECT_EQ(c.metrics_linger_s, 5);
  const auto error_of = [&](json extra) { return load(job, std::move(extra)); };
  EXPECT_EQ(error_of({{"metrics_listen", "9464"}}),
            dir_ + "/live.json: metrics_listen: expected \"host:port\" with a port in 1..65535, got \"9464\"");
  EXPECT_NE(error_of({{"metrics_listen", "h:0"}}).find("metrics_listen: expected \"host:port\""), std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:70000"}}).find("metrics_listen: expected"), std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", 9464}}).find("metrics_listen: expected a string"), std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "127.0.0.1:7700"}}).find("metrics_listen: expected a port other than"),
            std::string::npos)
      << "the controller's default port";
  EXPECT_NE(error_of({{"metrics_token_file", "metrics-token"}}).find("metrics_token_file: expected only together"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:9464"}, {"metrics_token_file", "token"}})
                .find("metrics_token_file: expected a file of its own"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:9464"}, {"metrics_linger_s", -1}}).find("metrics_linger_s: expected a number in"),
            std::string::npos);
}

}  // namespace
}  // namespace faultline::live
