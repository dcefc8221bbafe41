// The live config's keys added for operators (the start timeout, the read-only credential, the
// ssh destination, the metrics endpoint) and the commands `faultline live launch` runs.
#include "realexec/live_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "realexec/launch/launcher.h"

namespace faultline::live {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class LiveConfigKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("faultline-live-config-" + std::to_string(getpid())))
               .string();
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

TEST_F(LiveConfigKeys, ReplicaGroupsAreForJobsOfOneProcessPerReplica) {
  json job{{"versions", {{"v1", {"/bin/true"}}}}, {"replica_groups", true}};
  LiveConfig c;
  ASSERT_EQ(load(job, json::object(), &c), "");
  EXPECT_TRUE(c.job.replica_groups);
  job["replica_groups"] = 1;
  EXPECT_EQ(load(job),
            dir_ + "/live.json: job.replica_groups: expected true or false, got an integer 1");
  job["replica_groups"] = true;
  job["gpus_per_machine"] = 2;
  EXPECT_EQ(load(job), dir_ +
                           "/live.json: job.replica_groups: expected gpus_per_machine = tp = "
                           "pp = 1 (the job library runs one process per replica)");
}

// A module live mode cannot run is refused when the config is read, in one line naming the
// field, rather than run as another (recovery=flash was run as an ordinary restart, noted).
// recovery=flash runs live on a job that re-forms its process group in place (job.in_place).
TEST_F(LiveConfigKeys, ARecoveryLiveModeCannotRunIsRefusedAtTheStart) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}};
  const auto with = [&](const char* recovery, bool replica_groups, bool in_place = false) {
    json j = job;
    j["replica_groups"] = replica_groups;
    j["in_place"] = in_place;
    return load(j, {{"policy", {{"stack", "byterobust"}, {"params", {{"recovery", recovery}}}}}});
  };
  const std::string flash = with("flash", false);
  EXPECT_EQ(flash.rfind(dir_ + "/live.json: policy.params.recovery: expected a module that runs "
                               "live, got \"flash\": live only with job.in_place",
                        0),
            0u)
      << flash;
  EXPECT_EQ(flash.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(with("flash", false, true), "") << "a job that re-forms in place runs it";
  EXPECT_NE(with("flash", true), "") << "replica groups restart no one in place";
  const std::string both = with("flash", true, true);
  EXPECT_EQ(both, dir_ +
                      "/live.json: job.in_place: expected false with job.replica_groups "
                      "(replica groups rejoin a peer, they restart no one in place)");
  json bad = job;
  bad["in_place"] = "yes";
  EXPECT_EQ(load(bad),
            dir_ + "/live.json: job.in_place: expected true or false, got a string \"yes\"");
  const std::string ddp = with("migrate", false);
  EXPECT_NE(ddp.find("policy.params.recovery: expected a module that runs live, got "
                     "\"migrate\": live only with job.replica_groups"),
            std::string::npos)
      << ddp;
  EXPECT_EQ(with("migrate", true), "") << "a replica moves to a standby live";
  EXPECT_EQ(with("standby", false), "");
  EXPECT_EQ(with("replica-drop", true), "");
}

TEST_F(LiveConfigKeys, TheReadOnlyCredentialIsAFileOfItsOwn) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json{{"status_token_file", "status-token"}}, &c), "");
  EXPECT_EQ(c.status_token_file, dir_ + "/status-token");
  const std::string err = load(job, json{{"status_token_file", "token"}});
  EXPECT_NE(err.find("status_token_file: expected a file other than token_file"), std::string::npos)
      << err;
}

// A machine's `ssh` destination becomes an argument of ssh: an option-like or shell-like
// value is refused with the field named.
TEST_F(LiveConfigKeys, TheSshDestinationIsAUserAndHostNothingMore) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json{{"machines", {{{"name", "m0"}, {"ssh", "ops@gpu01.example"}}}}}, &c),
            "");
  EXPECT_EQ(c.machines[0].ssh, "ops@gpu01.example");
  for (const std::string bad : {"-oProxyCommand=sh", "gpu01;reboot", "gpu 01", "", "a$(id)"}) {
    const std::string err = load(job, json{{"machines", {{{"name", "m0"}, {"ssh", bad}}}}});
    EXPECT_NE(err.find("machines[0].ssh: expected [user@]host"), std::string::npos)
        << bad << ": " << err;
  }
}

// A machine's address and work directory (issue 52): "10.0.0.5; reboot" or an empty workdir
// passed the checks and then showed up as machine failures at the first start.
TEST_F(LiveConfigKeys, AMachineAddressIsOneHostAndItsWorkdirAPath) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job,
                 json{{"machines",
                       {{{"name", "m0"}, {"addr", "10.0.0.5"}},
                        {{"name", "m1"}, {"addr", "fd00::7"}},
                        {{"name", "m2"}, {"addr", "gpu02.example"}}}}},
                 &c),
            "");
  EXPECT_EQ(c.machines[1].addr, "fd00::7");
  for (const std::string bad :
       {"10.0.0.5; reboot", "gpu01 gpu02", "", "-oProxyCommand=sh", "$(id)", "a,b"}) {
    const std::string err = load(job, json{{"machines", {{{"name", "m0"}, {"addr", bad}}}}});
    EXPECT_NE(err.find("machines[0].addr: expected one host name or IP address"), std::string::npos)
        << bad << ": " << err;
  }
  for (const std::string bad : {"", "work\nm0", "work\x01m0"}) {
    const std::string err = load(job, json{{"machines", {{{"name", "m0"}, {"workdir", bad}}}}});
    EXPECT_NE(err.find("machines[0].workdir: expected a non-empty path"), std::string::npos)
        << bad << ": " << err;
  }
}

TEST_F(LiveConfigKeys, LaunchCommandsLocallyAndOverSsh) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(
      load(job,
           json{{"machines",
                 {{{"name", "m0"}, {"addr", "10.0.0.5"}}, {{"name", "m1"}, {"ssh", "ops@gpu02"}}}}},
           &c),
      "");
  LaunchOptions o;
  o.agent_bin = "/opt/fl/bin/faultline-live";
  EXPECT_EQ(
      agent_command(c, c.machines[0], o),
      (std::vector<std::string>{"/opt/fl/bin/faultline-live", "agent", c.file, "--name", "m0"}));
  o.via = LaunchOptions::Via::kSsh;
  o.remote_config = "/etc/faultline/it's.json";
  o.identity_file = "/root/.ssh/id_fl";
  o.ssh_options = {"UserKnownHostsFile=/tmp/kh"};
  const std::vector<std::string> want = {"ssh",
                                         "-tt",
                                         "-o",
                                         "BatchMode=yes",
                                         "-o",
                                         "ConnectTimeout=5",
                                         "-o",
                                         "ServerAliveInterval=2",
                                         "-o",
                                         "ServerAliveCountMax=3",
                                         "-i",
                                         "/root/.ssh/id_fl",
                                         "-o",
                                         "UserKnownHostsFile=/tmp/kh",
                                         "--",
                                         "10.0.0.5",
                                         "'/opt/fl/bin/faultline-live'",
                                         "'agent'",
                                         "'/etc/faultline/it'\\''s.json'",
                                         "'--name'",
                                         "'m0'"};
  EXPECT_EQ(agent_command(c, c.machines[0], o), want)
      << "the machine's addr when it names no ssh host";
  EXPECT_EQ(agent_command(c, c.machines[1], o)[15], "ops@gpu02");
  EXPECT_EQ(shell_quote("a b'c"), "'a b'\\''c'");
}

TEST_F(LiveConfigKeys, ASessionsEndIsSaidInOneLine) {
  LaunchOptions ssh;
  ssh.via = LaunchOptions::Via::kSsh;
  EXPECT_EQ(describe_session_end(ssh, 255 << 8,
                                 "ssh: connect to host 10.0.0.5 port 22: No route to host"),
            "ssh failed (exit 255): ssh: connect to host 10.0.0.5 port 22: No route to host");
  EXPECT_EQ(describe_session_end(ssh, 2 << 8, "faultline agent: live.json: (file): cannot be read"),
            "its agent refused its command line, config or token (exit 2): faultline agent: "
            "live.json: (file): "
            "cannot be read");
  EXPECT_EQ(describe_session_end(ssh, 0, ""), "its agent shut down (the run was stopped)");
  EXPECT_EQ(
      describe_session_end(ssh, 127 << 8,
                           "bash: line 1: /opt/fl/bin/faultline-live: No such file or directory"),
      "no agent program there (exit 127): bash: line 1: /opt/fl/bin/faultline-live: No such file "
      "or directory");
  EXPECT_EQ(describe_session_end(LaunchOptions{}, 255 << 8, ""), "its agent ended: exit code 255");
  EXPECT_EQ(describe_session_end(LaunchOptions{}, SIGKILL, ""),
            "its agent ended: killed by signal 9 (SIGKILL)");
}

TEST_F(LiveConfigKeys, TheMetricsEndpointIsOptionalAndStrictlyChecked) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job, json::object(), &c), "");
  EXPECT_EQ(c.metrics_port, 0) << "none by default";
  ASSERT_EQ(load(job,
                 json{{"metrics_listen", "0.0.0.0:9464"},
                      {"metrics_token_file", "metrics-token"},
                      {"metrics_linger_s", 5}},
                 &c),
            "");
  EXPECT_EQ(c.metrics_host, "0.0.0.0");
  EXPECT_EQ(c.metrics_port, 9464);
  EXPECT_EQ(c.metrics_token_file, dir_ + "/metrics-token");
  EXPECT_EQ(c.metrics_linger_s, 5);
  const auto error_of = [&](json extra) { return load(job, std::move(extra)); };
  EXPECT_EQ(error_of({{"metrics_listen", "9464"}}),
            dir_ +
                "/live.json: metrics_listen: expected \"host:port\" with a port in 1..65535, got "
                "\"9464\"");
  EXPECT_NE(error_of({{"metrics_listen", "h:0"}}).find("metrics_listen: expected \"host:port\""),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:70000"}}).find("metrics_listen: expected"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", 9464}}).find("metrics_listen: expected a string"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "127.0.0.1:7700"}})
                .find("metrics_listen: expected a port other than"),
            std::string::npos)
      << "the controller's default port";
  EXPECT_NE(error_of({{"metrics_token_file", "metrics-token"}})
                .find("metrics_token_file: expected only together"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:9464"}, {"metrics_token_file", "token"}})
                .find("metrics_token_file: expected a file of its own"),
            std::string::npos);
  EXPECT_NE(error_of({{"metrics_listen", "h:9464"}, {"metrics_linger_s", -1}})
                .find("metrics_linger_s: expected a number in"),
            std::string::npos);
}

// --via slurm: one step per machine on its node; a slurm_node is one host name, never a list.
// Issue 52, broken item 4: job.master_port equal to the controller's port passed the start-up
// checks, then every start failed (rank 0 could not bind it) and the job was relaunched
// forever (generation 594 in 150 s). The controller's ports and the job's never meet: one line
// at config load naming both fields.
TEST_F(LiveConfigKeys, TheControllersPortsAndTheJobsAreNeverTheSame) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  auto with = [&](json extra_job, json extra = json::object()) {
    json j = job;
    for (auto& [k, v] : extra_job.items()) j[k] = v;
    return load(j, std::move(extra));
  };
  EXPECT_EQ(with({{"master_port", 7700}}),
            dir_ +
                "/live.json: job.master_port: expected the job's ports apart from the "
                "controller's: controller's port 7700 is one of job.master_port 7700");
  EXPECT_EQ(with({{"master_port", 29500}}, {{"controller", "10.0.0.1:29500"}}),
            dir_ +
                "/live.json: job.master_port: expected the job's ports apart from the "
                "controller's: controller's port 29500 is one of job.master_port 29500");
  EXPECT_NE(with({{"master_port", 29500}}, {{"metrics_listen", "0.0.0.0:29500"}})
                .find("job.master_port: expected the job's ports apart from the controller's: "
                      "metrics_listen's port 29500 is one of job.master_port 29500"),
            std::string::npos);
  // The grouped probes' ports (job.master_port + 100 + k), a replay's (job.master_port + 200 +
  // group) and, with replica groups, each replica's store (job.master_port + 1 + id).
  EXPECT_NE(with({{"master_port", 7600}}).find("is one of the grouped probes' ports"),
            std::string::npos);
  EXPECT_NE(with({{"master_port", 7500}})
                .find("is one of the replays' ports from "
                      "job.master_port + 200 (7700-"),
            std::string::npos);
  EXPECT_EQ(with({{"master_port", 7699}}), "") << "the store ports are only for replica groups";
  EXPECT_NE(with({{"master_port", 7699}, {"replica_groups", true}})
                .find("controller's port 7700 is one of the replicas' stores on "
                      "job.master_port + 1 + id (7700-7700)"),
            std::string::npos);
  EXPECT_EQ(with({{"master_port", 29500}}), "") << "the defaults stay apart";
}

TEST_F(LiveConfigKeys, SlurmStepsRunOnTheMachinesNodes) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(
      load(job, json{{"machines", {{{"name", "m0"}}, {{"name", "m1"}, {"slurm_node", "gpu-017"}}}}},
           &c),
      "");
  EXPECT_EQ(slurm_node_of(c.machines[0]), "m0");
  EXPECT_EQ(slurm_node_of(c.machines[1]), "gpu-017");
  LaunchOptions o;
  o.via = LaunchOptions::Via::kSlurm;
  o.agent_bin = "/opt/fl/bin/faultline-live";
  o.slurm_job = "4242";
  EXPECT_EQ(agent_command(c, c.machines[1], o),
            (std::vector<std::string>{
                "srun", "--jobid=4242", "--nodes=1", "--ntasks=1", "--nodelist=gpu-017",
                "--overlap", "--job-name=faultline-agent-m1", "--quiet",
                "/opt/fl/bin/faultline-live", "agent", c.file, "--name", "m1"}));
  for (const std::string bad : {"gpu[01-04]", "a,b", "-w", "", "gpu 1"}) {
    const std::string err = load(job, json{{"machines", {{{"name", "m0"}, {"slurm_node", bad}}}}});
    EXPECT_NE(err.find("machines[0].slurm_node: expected one Slurm node name"), std::string::npos)
        << bad << ": " << err;
  }
  EXPECT_EQ(drain_command("gpu-017", "evicted m1: machine lost"),
            (std::vector<std::string>{"scontrol", "update", "nodename=gpu-017", "state=drain",
                                      "reason=faultline: evicted m1: machine lost"}));
}

TEST_F(LiveConfigKeys, SlurmNodesMustBeInTheAllocationAndTheRestAreSpare) {
  // As `scontrol show hostnames n[0-1],gpu-7` prints them.
  const auto alloc = parse_hostnames("m0\nn1\n  gpu-7 \n\n");
  EXPECT_EQ(alloc, (std::vector<std::string>{"m0", "n1", "gpu-7"}));
  LiveMachine a, b, d;
  a.name = "m0";
  b.name = "m1";
  b.slurm_node = "gpu-7";
  d.name = "m2";
  d.slurm_node = "n9";
  std::vector<std::string> spare;
  EXPECT_EQ(check_slurm_nodes({&a, &b}, alloc, "17", &spare), "");
  EXPECT_EQ(spare, std::vector<std::string>{"n1"});
  EXPECT_EQ(check_slurm_nodes({&a, &d}, alloc, "17", &spare),
            "m2: slurm node \"n9\" is not in allocation 17 (its nodes: m0,n1,gpu-7)");
  d.slurm_node = "m0";
  EXPECT_EQ(check_slurm_nodes({&a, &d}, alloc, "17", &spare),
            "m2: slurm node \"m0\" is already machine m0's");
}

TEST_F(LiveConfigKeys, EvictionsAreReadFromTheEventLogByMachineName) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  LiveConfig c;
  ASSERT_EQ(load(job,
                 json{{"machines", {{{"name", "m0"}}, {{"name", "m1"}}}},
                      {"standby", {{{"name", "s0"}}}}},
                 &c),
            "");
  std::string why;
  EXPECT_EQ(
      evicted_by(
          c,
          R"({"action":{"machines":[1,2],"mechanism":"x","reason":"machine lost","type":"EvictMachines"},"id":3,"kind":"action","t_s":1.5})",
          &why),
      (std::vector<std::string>{"m1", "s0"}));
  EXPECT_EQ(why, "machine lost");
  EXPECT_TRUE(evicted_by(c, R"({"action":{"machines":[0],"type":"StopJob"},"kind":"action"})", &why)
                  .empty());
  EXPECT_TRUE(evicted_by(c, R"({"kind":"note","text":"EvictMachines"})", &why).empty());
  EXPECT_TRUE(
      evicted_by(c, R"({"action":{"machines":[7],"type":"EvictMachines"},"kind":"action"})", &why)
          .empty());
  EXPECT_TRUE(evicted_by(c, "{truncated EvictMachines", &why).empty());
}

TEST_F(LiveConfigKeys, SrunsRefusalIsSaidInOneLine) {
  LaunchOptions o;
  o.via = LaunchOptions::Via::kSlurm;
  EXPECT_EQ(describe_session_end(o, 1 << 8,
                                 "srun: error: Unable to create step for job 5: Requested node "
                                 "configuration is not available"),
            "srun failed (exit 1): Unable to create step for job 5: Requested node configuration "
            "is not available");
  EXPECT_EQ(describe_session_end(o, 137 << 8, "srun: error: m3: task 0: Exited with exit code 137"),
            "its agent ended: exit code 137: srun: error: m3: task 0: Exited with exit code 137");
}

// `faultline live slurm-config`: an allocation's spare nodes become standbys, after the
// config's template, in allocation order, so that every reader numbers the machines alike.
TEST_F(LiveConfigKeys, SpareNodesOfTheAllocationBecomeStandbysInAllocationOrder) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  // Ordered as an operator wrote it (token_file first), not sorted.
  nlohmann::ordered_json doc{
      {"token_file", "token"},
      {"machines", {{{"name", "m0"}}, {{"name", "m1"}, {"slurm_node", "gpu-7"}}}},
      {"standby", {{{"name", "s0"}, {"slurm_node", "n1"}}}},
      {"job", job},
      {"trainjob_bin", "/bin/true"},
      {"slurm_standby", {{"workdir", "/var/tmp/fl/{node}/w"}, {"nic", "ib0"}}}};
  const std::string file = dir_ + "/live.json";
  const auto& reg = policies::builtin_registry();
  const std::vector<SlurmNode> alloc = {
      {"n3", "10.0.0.3"}, {"m0", ""}, {"n1", ""}, {"gpu-7", ""}, {"n2", "10.0.0.2"}};
  std::vector<std::string> added;
  const std::string out = slurm_effective_config(doc.dump(), file, "", alloc, "17", reg, &added);
  EXPECT_EQ(added, (std::vector<std::string>{"n3", "n2"}));
  const LiveConfig c = parse_live_config(out, file, reg);
  ASSERT_EQ(c.standby.size(), 3u);
  EXPECT_EQ(c.standby[0].name, "s0");
  EXPECT_EQ(c.standby[1].name, "n3");
  EXPECT_EQ(c.standby[1].slurm_node, "n3");
  EXPECT_EQ(c.standby[1].addr, "10.0.0.3");
  EXPECT_EQ(c.standby[1].workdir, "/var/tmp/fl/n3/w");
  EXPECT_EQ(c.standby[1].nic, "ib0");
  EXPECT_EQ(c.standby[2].name, "n2");
  EXPECT_EQ(c.cluster_spec().standby_machines, 3);
  // The event log's machine ids (job machines, then standbys) name the new standbys.
  std::string why;
  EXPECT_EQ(
      evicted_by(
          c, R"({"action":{"machines":[4],"reason":"r","type":"EvictMachines"},"kind":"action"})",
          &why),
      std::vector<std::string>{"n2"});
  // The config as written comes first, in its own key order; a second run adds nothing.
  EXPECT_EQ(out.find("{\n  \"token_file\""), 0u) << out;
  EXPECT_EQ(slurm_effective_config(out, file, "", alloc, "17", reg, &added), out);
  EXPECT_TRUE(added.empty());
  // No spare node: the config unchanged (as JSON), no template needed.
  auto plain = doc;
  plain.erase("slurm_standby");
  const std::vector<SlurmNode> exact = {{"m0", ""}, {"gpu-7", ""}, {"n1", ""}};
  EXPECT_EQ(slurm_effective_config(plain.dump(), file, "", exact, "17", reg, &added),
            plain.dump(2) + "\n");

  const auto error_of = [&](const nlohmann::ordered_json& d, std::vector<SlurmNode> a,
                            const std::string& out_file = "") {
    try {
      slurm_effective_config(d.dump(), file, out_file, a, "17", reg, &added);
      return std::string();
    } catch (const LiveConfigError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(error_of(plain, alloc),
            file +
                ": slurm_standby: required: slurm job 17 has nodes no machine runs on "
                "(n3,n2), which become standbys after this template, e.g. {\"workdir\": "
                "\"/var/tmp/faultline/{node}\"}; or name them in machines or standby");
  EXPECT_EQ(error_of(doc, {{"m0", ""}, {"n1", ""}}),
            file +
                ": machines[1].slurm_node: expected a node of slurm job 17 (its nodes: m0,n1), got "
                "\"gpu-7\"");
  EXPECT_EQ(
      error_of(doc, {{"gpu-7", ""}, {"n1", ""}}),
      file +
          ": machines[0].name: expected a node of slurm job 17 (its nodes: gpu-7,n1), got \"m0\"");
  auto shared = doc;
  shared["standby"][0]["slurm_node"] = "gpu-7";
  EXPECT_EQ(error_of(shared, alloc), file +
                                         ": standby[0].slurm_node: expected a node no other "
                                         "machine runs on, got \"gpu-7\" (machines[1]'s)");
  auto taken = doc;
  taken["machines"][1]["name"] = "n2";  // on gpu-7; n2 is spare
  EXPECT_EQ(error_of(taken, alloc),
            file +
                ": machines[1].name: expected a name other than \"n2\": it is a spare "
                "node of slurm job 17, which becomes a standby of that name");
  EXPECT_EQ(error_of(doc, {{"m0", ""}, {"n1", ""}, {"gpu-7", ""}, {"n[4]", "10.0.0.4"}}),
            file +
                ": slurm_standby: spare node \"n[4]\" of slurm job 17 cannot name a standby: "
                "expected 1-64 "
                "characters of [A-Za-z0-9._-]");
  EXPECT_EQ(error_of(doc, {{"m0", ""}, {"n1", ""}, {"gpu-7", ""}, {"n4", ""}}),
            file + ": slurm_standby: spare node \"n4\" of slurm job 17: expected its NodeAddr");
  // Written elsewhere, a relative path would point elsewhere.
  EXPECT_EQ(
      error_of(doc, alloc, dir_ + "/sub/live.json"),
      file +
          ": token_file: a relative path (as written or by default), resolved against the config's "
          "directory: expected the output (" +
          dir_ + "/sub/live.json) in " + dir_ + ", or an absolute path here");
  auto absolute = doc;
  absolute["token_file"] = dir_ + "/token";
  // state_dir and the machines' workdirs have relative defaults ("state", "work/NAME").
  EXPECT_NE(error_of(absolute, alloc, dir_ + "/sub/live.json").find(": state_dir: a relative path"),
            std::string::npos);
  absolute["state_dir"] = dir_ + "/state";
  for (auto* list : {&absolute["machines"], &absolute["standby"]})
    for (auto& m : *list) m["workdir"] = dir_ + "/" + m["name"].get<std::string>();
  EXPECT_EQ(error_of(absolute, alloc, dir_ + "/sub/live.json"), "");
  EXPECT_EQ(error_of(doc, alloc, dir_ + "/live-slurm.json"), "");
  // The template's own errors, at load time.
  for (const json& bad : {json{{"workdir", "/w/{nodes}"}}, json{{"workdir", ""}},
                          json{{"addr", "x"}}, json{{"gpu_pci", "0000:01:00.0"}}}) {
    const std::string err = load(job, json{{"slurm_standby", bad}});
    EXPECT_EQ(err.rfind(dir_ + "/live.json: slurm_standby", 0), 0u) << bad << ": " << err;
  }
}

TEST_F(LiveConfigKeys, NodeAddrsAreReadFromScontrolsOneLiners) {
  const std::string text =
      "NodeName=m0 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 NodeAddr=10.77.1.10 NodeHostName=m0 "
      "Version=22.05.8 "
      "OS=Linux 6.1.0 #1 SMP Reason=was NodeAddr=1.2.3.4 [root@2026-11-26T06:00:00]\n"
      "NodeName=gpu-7 Arch=x86_64 NodeAddr=gpu-7.ib NodeHostName=gpu-7\n"
      "NodeName=n9 Arch=x86_64\n\n";
  EXPECT_EQ(parse_node_addrs(text),
            (std::map<std::string, std::string>{{"m0", "10.77.1.10"}, {"gpu-7", "gpu-7.ib"}}));
}

TEST_F(LiveConfigKeys, SlurmConfigRefusesBadUsageInOneLine) {
  const auto run = [](std::vector<std::string> args, std::string* err) {
    ::testing::internal::CaptureStderr();
    const int rc = slurm_config_main(args);
    *err = ::testing::internal::GetCapturedStderr();
    return rc;
  };
  std::string err;
  EXPECT_EQ(run({"slurm-config", dir_ + "/missing.json"}, &err), 2);
  EXPECT_EQ(err,
            "faultline live slurm-config: " + dir_ + "/missing.json: (file): cannot be read\n");
  const json job{{"versions", {{"v1", {"/bin/true"}}}}, {"version", "v1"}};
  ASSERT_EQ(load(job), "");
  EXPECT_EQ(run({"slurm-config", dir_ + "/live.json", "--slurm-job", "12;rm"}, &err), 2);
  EXPECT_EQ(err, "faultline live slurm-config: --slurm-job: expected a job id, got \"12;rm\"\n");
  EXPECT_EQ(run({"slurm-config", dir_ + "/live.json", "--out"}, &err), 2);
  EXPECT_EQ(err, "faultline live slurm-config: --out: expected FILE (see --help)\n");
  EXPECT_EQ(run({"slurm-config", dir_ + "/live.json", "--bogus", "1"}, &err), 2);
  EXPECT_EQ(err, "faultline live slurm-config: unknown option --bogus (see --help)\n");
  std::ofstream(dir_ + "/broken.json") << "{\"machines\": [";
  EXPECT_EQ(run({"slurm-config", dir_ + "/broken.json", "--slurm-job", "1"}, &err), 2);
  EXPECT_EQ(
      err.rfind("faultline live slurm-config: " + dir_ + "/broken.json: (top level): expected JSON",
                0),
      0u)
      << err;
}

// Issue 37, items 1 and 16: a number out of double range aborted `live run`, `live status` and
// `live launch` with an uncaught out_of_range (exit 134, and systemd restarted the controller
// every 5 s); a repeated key silently took its last value. Both are now the one-line error of
// any bad config, naming the field, with exit status 2.
TEST_F(LiveConfigKeys, NumbersOutOfRangeAndRepeatedKeysAreOneLineErrors) {
  const std::string base =
      R"({"token_file": "token", "machines": [{"name": "m0"}], "trainjob_bin": "/bin/true",
          "job": {"versions": {"v1": ["/bin/true"]}}, )";
  const auto load_text = [&](const std::string& rest) -> std::string {
    const std::string path = dir_ + "/live.json";
    std::ofstream(path) << base << rest;
    try {
      load_live_config(path, policies::builtin_registry());
      return "";
    } catch (const LiveConfigError& e) {
      return e.what();
    }
  };
  std::string err = load_text(R"("heartbeat_s": 1e999})");
  EXPECT_EQ(err.rfind(dir_ + "/live.json: (top level): expected numbers within double range", 0),
            0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  err = load_text(R"("heartbeat_s": 2, "heartbeat_s": 1})");
  EXPECT_EQ(err, dir_ +
                     "/live.json: heartbeat_s: repeated key (each key once: a repeat would "
                     "silently replace the "
                     "first)");
  err = load_text(R"("repair": {"max_checks": 2, "max_checks": 3}})");
  EXPECT_EQ(err.rfind(dir_ + "/live.json: repair.max_checks: repeated key", 0), 0u) << err;
  err = load_text(R"("standby": [{"name": "s0", "addr": "127.0.0.1", "addr": "10.0.0.1"}]})");
  EXPECT_EQ(err.rfind(dir_ + "/live.json: standby.addr: repeated key", 0), 0u) << err;
  // A key with a newline in it (the fuzzer's find): the error stays one line.
  err = load_text("\"repair\": {\"max_\\nchecks\": 2}}");
  EXPECT_EQ(err, dir_ +
                     "/live.json: repair.max_\\nchecks: unknown key; expected one of: "
                     "check_after_s, max_checks, retire_after, retry_after_s");
  // The same key in two different objects is no repeat.
  EXPECT_EQ(load_text(R"("standby": [{"name": "s0"}, {"name": "s1"}]})"), "");
  // The stalled-agent timeout cannot undercut the heartbeat timeout it extends; it follows a
  // heartbeat timeout raised above its default.
  EXPECT_EQ(load_text(R"("heartbeat_timeout_s": 10, "stalled_agent_timeout_s": 5})"),
            dir_ + "/live.json: stalled_agent_timeout_s: expected at least heartbeat_timeout_s");
  EXPECT_EQ(load_text(R"("heartbeat_timeout_s": 90})"), "");

  // Through a command: exit status 2 and one line, never an abort.
  std::ofstream(dir_ + "/live.json") << base << R"("heartbeat_s": -1e999})";
  ::testing::internal::CaptureStderr();
  const int rc = slurm_config_main({"slurm-config", dir_ + "/live.json", "--slurm-job", "1"});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(
      said.rfind(
          "faultline live slurm-config: " + dir_ + "/live.json: (top level): expected numbers", 0),
      0u)
      << said;
}

// The live config reads with the one strict reader (json/strict_object.h): an unknown key is
// refused naming the keys its object takes, before any field of that object is read (a
// misspelt heartbeat_timeout_s is reported as such, not as the default it left in place), and
// a value of the wrong type is named with what it is, in one line.
TEST_F(LiveConfigKeys, AnUnknownKeyOrAWrongTypeIsOneLineNamingTheFieldAndTheExpectation) {
  const json job{{"versions", {{"v1", {"/bin/true"}}}}};
  EXPECT_EQ(load(job, {{"heartbeat_s", 10}, {"heartbeat_timout_s", 30}}),
            dir_ +
                "/live.json: heartbeat_timout_s: unknown key; expected one of: controller, "
                "description, heartbeat_s, heartbeat_timeout_s, job, machines, "
                "metrics_linger_s, metrics_listen, metrics_token_file, policy, probe_bin, "
                "repair, seed, slurm_standby, stalled_agent_timeout_s, standby, state_dir, "
                "status_token_file, token_file, trainjob_bin");
  json typo = job;
  typo["gpus"] = 2;
  typo["tp"] = "two";
  EXPECT_EQ(load(typo).rfind(dir_ + "/live.json: job.gpus: unknown key; expected one of: ", 0), 0u)
      << load(typo);
  typo.erase("gpus");
  EXPECT_EQ(load(typo), dir_ + "/live.json: job.tp: expected an integer, got a string \"two\"");
  EXPECT_EQ(load(job, {{"machines", {{{"name", "m0"}, {"gpu_pci", "0000:17:00.0"}}}}}),
            dir_ +
                "/live.json: machines[0].gpu_pci: expected an array of PCI bus id strings, "
                "got a string \"0000:17:00.0\"");
  EXPECT_EQ(load(job, {{"seed", -1}}),
            dir_ + "/live.json: seed: expected an integer >= 0, got an integer -1");
  EXPECT_EQ(load(job, {{"repair", {{"max_checks", 2.5}}}}),
            dir_ + "/live.json: repair.max_checks: expected an integer, got a number 2.5");
}

TEST(LiveConfigMachines, AnIdCountsTheJobsMachinesInSlotOrderThenTheStandbys) {
  LiveConfig c;
  for (const char* name : {"m0", "m1", "s0", "s1"}) {
    LiveMachine m;
    m.name = name;
    (name[0] == 's' ? c.standby : c.machines).push_back(m);
  }
  EXPECT_EQ(c.machine(0).name, "m0");
  EXPECT_EQ(c.machine(1).name, "m1");
  EXPECT_EQ(c.machine(2).name, "s0");
  EXPECT_EQ(c.machine(3).name, "s1");
  EXPECT_EQ(&c.machine(3), c.find("s1"));
}

}  // namespace
}  // namespace faultline::live
