// The live end-to-end fixture: LiveCluster (a controller, agents and the reference job on
// this machine, in network namespaces where it allows) and its helpers, shared by the
// live end-to-end test files (one executable, faultline_live_e2e).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "eventlog/event_log.h"
#include "realexec/net/auth.h"
#include "tests/realexec/live/live_support.h"

namespace faultline::live_e2e {

using nlohmann::json;
using namespace faultline::live_test;
namespace fs = std::filesystem;

const char* const kFaultline = FAULTLINE_BIN;
const char* const kTrainjob = TRAINJOB_BIN;

// step -> every loss string logged for it (recomputed steps appear more than once).
inline std::map<long, std::vector<std::string>> read_loss_log(const std::string& path) {
  std::map<long, std::vector<std::string>> out;
  std::ifstream in(path);
  long step;
  std::string loss;
  while (in >> step >> loss) out[step].push_back(loss);
  return out;
}

inline bool netns_usable() {
  static int cached = -1;
  if (cached < 0) {
    const std::string ns = "flprobe" + std::to_string(getpid() % 10000);
    cached = geteuid() == 0 && sh("ip netns add " + ns) == 0 ? 1 : 0;
    if (cached) sh("ip netns del " + ns);
  }
  return cached == 1;
}

// A network id that no other live test running at this moment holds. A cluster's id names
// its subnets (10.77.ID.0/24, 10.78.ID.0/24), bridges (flbmID, flbdID), namespaces (flIDmN),
// veths, and picks its controller, Slurm and training ports; ctest runs these tests two at a
// time, and two clusters with one id would delete each other's namespaces and bridges. An id
// is held by an flock on a file of its own in /tmp/faultline-live-netids (the lock goes with
// the process, even one killed with SIGKILL); the search starts at a place drawn from the pid,
// so that an id just given back (its namespaces may still be going away) is seldom taken
// again at once. Returns the id (20..219) and sets *fd to the open lock file (-1 when none
// could be opened: then the id is the pid's, as before).
inline int claim_net_id(int* fd) {
  static int counter = 0;
  const std::string dir = "/tmp/faultline-live-netids";
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::all | fs::perms::sticky_bit, ec);
  const int start = (getpid() * 7 + counter++) % 200;
  *fd = -1;
  for (int k = 0; k < 200; ++k) {
    const int id = (start + k) % 200 + 20;
    const int f =
        ::open((dir + "/" + std::to_string(id)).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0) continue;
    if (::flock(f, LOCK_EX | LOCK_NB) == 0) {
      *fd = f;
      return id;
    }
    ::close(f);
  }
  return start + 20;
}

// One live deployment: controller + 4 job machines + 1 standby.
class LiveCluster {
 public:
  explicit LiveCluster(const std::string& test, json params, int step_ms = 100, int standbys = 1) {
    id_ = claim_net_id(&id_lock_);
    dir_ = (fs::temp_directory_path() / ("faultline-live-" + test + "-" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    netns_ = netns_usable();
    names_ = {"m0", "m1", "m2", "m3"};
    for (int i = 0; i < standbys; ++i) names_.push_back("s" + std::to_string(i));
    std::string ctl_host = "127.0.0.1";
    if (netns_) {
      // Two networks, as on real clusters: management (agent <-> controller, mgmt0) and
      // data (the ranks' traffic, data0, the NIC that inspection watches).
      ctl_host = mgmt_subnet() + ".1";
      for (const char* net : {"m", "d"}) {
        const std::string br = bridge(net);
        sh("ip link del " + br);
        sh("ip link add " + br + " type bridge");
        if (std::string(net) == "m") sh("ip addr add " + ctl_host + "/24 dev " + br);
        sh("ip link set " + br + " up");
      }
      for (size_t i = 0; i < names_.size(); ++i) {
        const std::string ns = ns_name(i);
        sh("ip netns del " + ns);
        sh("ip netns add " + ns);
        for (const char* net : {"m", "d"}) {
          const bool mgmt = std::string(net) == "m";
          const std::string v = "fl" + std::to_string(id_) + net + std::to_string(i);
          const std::string inner = mgmt ? "mgmt0" : "data0";
          // An earlier test whose id was the same (ids come from pids) may have left this
          // veth still going away (namespaces are torn down asynchronously): then the add
          // fails with "File exists" and the host has no address here (CI saw "Network is
          // unreachable" for three of five agents). Remove it and try again.
          const std::string add =
              "ip link add " + v + " type veth peer name " + inner + " netns " + ns;
          for (int tries = 0; sh(add) != 0 && tries < 50; ++tries) {
            sh("ip link del " + v);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
          sh("ip link set " + v + " master " + bridge(net) + " up");
          sh("ip -n " + ns + " addr add " + (mgmt ? mgmt_addr(i) : addr(i)) + "/24 dev " + inner);
          sh("ip -n " + ns + " link set " + inner + " up");
        }
        sh("ip -n " + ns + " link set lo up");
      }
    }
    {
      std::ofstream t(dir_ + "/token");
      t << "e2e-token-" << std::to_string(getpid()) << "-0123456789abcdef\n";
    }
    chmod((dir_ + "/token").c_str(), 0600);
    // Ports from the id: no other live test running now has it (claim_net_id).
    port_ = 17000 + id_ * 10;
    json machines = json::array(), standby = json::array();
    for (size_t i = 0; i < names_.size(); ++i) {
      json m{{"name", names_[i]},
             {"addr", netns_ ? addr(i) : "127.0.0.1"},
             {"workdir", dir_ + "/" + names_[i]}};
      if (netns_) m["nic"] = "data0";
      (i < 4 ? machines : standby).push_back(m);
    }
    json base{{"stall_window_s", 8},
              {"recrash_window_s", 5},
              {"probe_deadline_s", 60},
              {"inspect_nic_s", 1},
              {"standby_pool", 1}};
    for (auto& [k, v] : params.items()) base[k] = v;
    config_ = json{{"description", "e2e test " + test},
                   {"controller", ctl_host + ":" + std::to_string(port_)},
                   {"token_file", dir_ + "/token"},
                   {"machines", machines},
                   {"standby", standby},
                   {"job",
                    {{"versions",
                      {{"v1",
                        {kTrainjob, "--seed", "7", "--hidden", "32", "--step-ms",
                         std::to_string(step_ms), "--loss-log", dir_ + "/loss.log"}}}},
                     {"version", "v1"},
                     {"gpus_per_machine", 1},
                     {"master_port", 27000 + id_ * 3},
                     {"nominal_step_time_s", step_ms / 1000.0},
                     {"replay_steps", 12}}},
                   {"policy", {{"stack", "byterobust"}, {"params", base}}},
                   {"seed", 7},
                   {"state_dir", dir_ + "/state"},
                   {"trainjob_bin", kTrainjob},
                   {"heartbeat_s", 0.5},
                   {"heartbeat_timeout_s", 3}};
    std::ofstream(dir_ + "/live.json") << config_.dump(2);
  }
  LiveCluster(const LiveCluster&) = delete;  // one owner of the processes and the id's lock
  LiveCluster& operator=(const LiveCluster&) = delete;
  ~LiveCluster() {
    stop_launcher();
    stop_slurm();
    kill_controller(SIGKILL);
    for (auto& [n, p] : agents_)
      if (p > 0) {
        kill(-p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    if (netns_) {
      for (size_t i = 0; i < names_.size(); ++i) sh("ip netns del " + ns_name(i));
      sh("ip link del " + bridge("m"));
      sh("ip link del " + bridge("d"));
    }
    if (!::testing::Test::HasFailure())
      fs::remove_all(dir_);
    else
      std::cerr << "kept " << dir_ << " for inspection\n";
    if (id_lock_ >= 0) ::close(id_lock_);  // the id is free again (claim_net_id)
  }

  // Hosts reached over ssh, as on a real cluster: an sshd (Debian's openssh-server) in each
  // namespace host on its management address, a key pair made for the test, and
  // `faultline live launch --via ssh` starting every agent through them. `without_sshd`
  // names hosts whose sshd is not started (unreachable for the launcher).
  void start_agents_over_ssh(const std::set<std::string>& without_sshd = {}) {
    ASSERT_TRUE(netns_) << "ssh hosts are network namespaces: needs root";
    const std::string sshd = "/usr/sbin/sshd";
    ASSERT_EQ(access(sshd.c_str(), X_OK), 0) << sshd << " missing: install Debian's openssh-server";
    const std::string d = dir_ + "/ssh";
    fs::create_directories(d);
    fs::create_directories("/run/sshd");  // sshd's privilege separation directory
    ASSERT_EQ(sh("ssh-keygen -q -t ed25519 -N '' -f " + d + "/host_key"), 0);
    ASSERT_EQ(sh("ssh-keygen -q -t ed25519 -N '' -f " + d + "/id"), 0);
    fs::copy_file(d + "/id.pub", d + "/authorized_keys");
    edit_config([&](json& cfg) {
      for (const char* list : {"machines", "standby"})
        for (auto& m : cfg[list])
          for (size_t i = 0; i < names_.size(); ++i)
            if (m["name"] == names_[i]) m["ssh"] = "root@" + mgmt_addr(i);
    });
    for (size_t i = 0; i < names_.size(); ++i) {
      if (without_sshd.count(names_[i])) continue;
      const std::string cfg = d + "/sshd-" + names_[i] + ".conf";
      std::ofstream(cfg)
          << "ListenAddress " << mgmt_addr(i) << ":22\nHostKey " << d << "/host_key\n"
          << "AuthorizedKeysFile " << d << "/authorized_keys\nPermitRootLogin prohibit-password\n"
          << "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
          << "StrictModes no\nPidFile " << d << "/sshd-" << names_[i] << ".pid\nLogLevel ERROR\n";
      sshds_.push_back(spawn({"ip", "netns", "exec", ns_name(i), sshd, "-D", "-f", cfg, "-E",
                              d + "/sshd-" + names_[i] + ".log"},
                             d + "/sshd-" + names_[i] + ".out"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // sshd listening
    launcher_ = spawn(
        {kFaultline, "live", "launch", config(), "--via", "ssh", "--ssh-identity", d + "/id",
         "--connect-timeout", "2", "--ssh-option", "UserKnownHostsFile=" + d + "/known_hosts",
         "--ssh-option", "StrictHostKeyChecking=accept-new", "--ssh-option", "LogLevel=ERROR"},
        dir_ + "/launcher.log");
  }
  // SIGTERM to the launcher (its ssh sessions hang up, the remote agents kill their ranks
  // and exit), then the sshds go; returns the launcher's exit status (-1 if none).
  int stop_launcher() {
    int status = -1;
    if (launcher_ > 0) {
      kill(launcher_, SIGTERM);
      int st = 0;
      for (int i = 0; i < 100; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(100)))
        if (waitpid(launcher_, &st, WNOHANG) == launcher_) {
          status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          break;
        }
      if (status < 0) {
        kill(-launcher_, SIGKILL);
        waitpid(launcher_, nullptr, 0);
      }
      launcher_ = -1;
    }
    for (pid_t p : sshds_) {
      kill(-p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    sshds_.clear();
    return status;
  }
  std::string launcher_log() const { return slurp(dir_ + "/launcher.log"); }

  // A Slurm cluster of the test's own, from Debian's slurm-wlm and munge: munged with a key
  // made here and a private socket, slurmctld on the management bridge, one slurmd per
  // namespace host (NodeName = machine name, NodeAddr = its management address), each in
  // the foreground as root with its log, spool and pid file in the test's directory; the
  // private slurm.conf reaches every Slurm command through SLURM_CONF. Nothing system-wide
  // is started or touched. Then a `salloc --no-shell` allocation of every host; its id.
  std::string start_slurm() {
    EXPECT_TRUE(netns_) << "slurm hosts are network namespaces: needs root";
    const std::string d = dir_ + "/slurm";
    fs::create_directories(d + "/munge");
    fs::create_directories(d + "/state");
    chmod((d + "/munge").c_str(), 0700);
    {
      std::ifstream rnd("/dev/urandom", std::ios::binary);
      std::string key(1024, '\0');
      rnd.read(key.data(), static_cast<std::streamsize>(key.size()));
      std::ofstream(d + "/munge/key", std::ios::binary) << key;
    }
    chmod((d + "/munge/key").c_str(), 0400);
    slurm_pids_.push_back(
        spawn({"/usr/sbin/munged", "--foreground", "--force", "--key-file=" + d + "/munge/key",
               "--socket=" + d + "/munge/sock", "--pid-file=" + d + "/munge/pid",
               "--log-file=" + d + "/munge/log", "--seed-file=" + d + "/munge/seed"},
              d + "/munged.out"));
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string shorthost = host;
    shorthost = shorthost.substr(0, shorthost.find('.'));
    const int ctl_port = 21000 + id_ * 2;
    std::ofstream conf(d + "/slurm.conf");
    conf << "ClusterName=fl" << id_ << "\nSlurmctldHost=" << shorthost << "(" << mgmt_subnet()
         << ".1)\n"
         << "SlurmctldPort=" << ctl_port << "\nSlurmdPort=" << ctl_port + 1 << "\n"
         << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << d << "/munge/sock\n"
         << "SlurmUser=root\nSlurmdUser=root\nStateSaveLocation=" << d << "/state\n"
         << "SlurmdSpoolDir=" << d << "/spool-%n\nSlurmctldPidFile=" << d << "/slurmctld.pid\n"
         << "SlurmdPidFile=" << d << "/slurmd-%n.pid\nSlurmctldLogFile=" << d << "/slurmctld.log\n"
         << "SlurmdLogFile=" << d << "/slurmd-%n.log\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/"
            "none\nJobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\n"
         << "SelectType=select/linear\nMpiDefault=none\nMailProg=/bin/true\nReturnToService=2\n"
         << "SlurmdParameters=config_overrides\nSlurmctldTimeout=10\nSlurmdTimeout="
            "30\nInactiveLimit=0\n"
         << "KillWait=2\nMessageTimeout=5\n";
    std::string nodes;
    for (size_t i = 0; i < names_.size(); ++i) {
      conf << "NodeName=" << names_[i] << " NodeAddr=" << mgmt_addr(i) << " CPUs=1 State=UNKNOWN\n";
      nodes += (nodes.empty() ? "" : ",") + names_[i];
      fs::create_directories(d + "/spool-" + names_[i]);
    }
    conf << "PartitionName=fl Nodes=" << nodes << " Default=YES MaxTime=INFINITE State=UP\n";
    conf.close();
    setenv("SLURM_CONF", (d + "/slurm.conf").c_str(), 1);
    for (int i = 0; i < 50 && !fs::exists(d + "/munge/sock"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    slurm_pids_.push_back(
        spawn({"/usr/sbin/slurmctld", "-D", "-i", "-f", d + "/slurm.conf"}, d + "/slurmctld.out"));
    // The namespace host's own /sys (its /sys/class/net, which the agent's NIC inspection
    // reads), as `ip netns exec` gives, but with the host's cgroup mounts kept, which
    // slurmd needs and `ip netns exec` hides: in a private mount namespace, the cgroup tree
    // is set aside, a sysfs of the host's network namespace mounted on /sys, and the
    // cgroup tree put back on it. Nothing outside that mount namespace changes.
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::string cg = d + "/cgroup-" + names_[i];
      fs::create_directories(cg);
      slurm_pids_.push_back(spawn(
          {"nsenter", "--net=/run/netns/" + ns_name(i), "unshare", "--mount", "--propagation",
           "private", "sh", "-c",
           "mount --rbind /sys/fs/cgroup \"$1\" && mount -t sysfs sysfs /sys && "
           "mount --rbind \"$1\" /sys/fs/cgroup && exec /usr/sbin/slurmd -D -N \"$2\" -f \"$3\"",
           "sh", cg, names_[i], d + "/slurm.conf"},
          d + "/slurmd-" + names_[i] + ".out"));
    }
    bool idle = false;
    for (int i = 0; i < 120 && !idle; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      fs::remove(d + "/sinfo.out");  // run_wait appends
      run_wait({"sinfo", "--noheader", "--format=%t %D"}, d + "/sinfo.out");
      idle = slurp(d + "/sinfo.out") == "idle " + std::to_string(names_.size()) + "\n";
    }
    EXPECT_TRUE(idle) << "slurm nodes not idle: " << slurp(d + "/sinfo.out")
                      << slurp(d + "/slurmctld.out");
    if (!idle) return "";
    EXPECT_EQ(run_wait({"salloc", "--no-shell", "--nodes=" + std::to_string(names_.size()),
                        "--job-name=faultline-e2e", "--immediate=30"},
                       d + "/salloc.out"),
              0)
        << slurp(d + "/salloc.out");
    const std::string out = slurp(d + "/salloc.out");
    const auto at = out.find("Granted job allocation ");
    EXPECT_NE(at, std::string::npos) << out;
    if (at == std::string::npos) return "";
    slurm_job_ = std::to_string(std::stol(out.substr(at + 23)));
    return slurm_job_;
  }
  // `faultline live launch --via slurm` in the allocation; `extra` more options.
  void launch_over_slurm(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {kFaultline, "live",  "launch",      config(),
                                     "--via",    "slurm", "--slurm-job", slurm_job_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    launcher_ = spawn(argv, dir_ + "/launcher.log");
  }
  // A Slurm command's output (stdout and stderr).
  std::string slurm_cmd(const std::vector<std::string>& argv) const {
    fs::remove(dir_ + "/slurm/cmd.out");  // run_wait appends
    run_wait(argv, dir_ + "/slurm/cmd.out");
    return slurp(dir_ + "/slurm/cmd.out");
  }
  void stop_slurm() {
    if (!slurm_job_.empty()) run_wait({"scancel", slurm_job_}, dir_ + "/slurm/scancel.out");
    slurm_job_.clear();
    // slurmds first, then slurmctld, then munged (the reverse of their start).
    for (auto it = slurm_pids_.rbegin(); it != slurm_pids_.rend(); ++it) {
      kill(-*it, SIGTERM);
      int st = 0;
      bool gone = false;
      for (int i = 0; i < 50 && !gone; ++i) {
        gone = waitpid(*it, &st, WNOHANG) == *it;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!gone) {
        kill(-*it, SIGKILL);
        waitpid(*it, nullptr, 0);
      }
    }
    if (!slurm_pids_.empty()) unsetenv("SLURM_CONF");
    slurm_pids_.clear();
  }

  const json& config_json() const { return config_; }
  // Cuts host i off the network, as a dead switch port or a powered-off machine would: both
  // of its links go down without a word to anyone (no TCP reset reaches the controller).
  void cut_links(size_t i) const {
    for (const char* net : {"m", "d"})
      sh("ip link set fl" + std::to_string(id_) + net + std::to_string(i) + " down");
  }

  std::string mgmt_subnet() const { return "10.77." + std::to_string(id_); }
  std::string mgmt_addr(size_t i) const { return mgmt_subnet() + "." + std::to_string(10 + i); }
  std::string addr(size_t i) const {
    return "10.78." + std::to_string(id_) + "." + std::to_string(10 + i);
  }
  std::string bridge(const char* net) const {
    return "flb" + std::string(net) + std::to_string(id_);
  }
  std::string ns_name(size_t i) const {
    return "fl" + std::to_string(id_) + "m" + std::to_string(i);
  }
  const std::string& dir() const { return dir_; }
  std::string config() const { return config_path_.empty() ? dir_ + "/live.json" : config_path_; }
  // Every later command (controller, launcher, clients) reads this config file instead.
  void use_config(const std::string& path) { config_path_ = path; }
  // Where the controller listens, and its token, for tests that speak the protocol raw.
  std::string controller_host() const {
    return config_["controller"].get<std::string>().substr(
        0, config_["controller"].get<std::string>().rfind(':'));
  }
  int controller_port() const { return port_; }
  std::string token() const {
    std::string t = slurp(dir_ + "/token");
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    return t;
  }
  pid_t controller_pid() const { return controller_; }
  bool controller_alive() const {
    return controller_ > 0 && waitpid(controller_, nullptr, WNOHANG) == 0;
  }
  // Waits for the controller to exit on its own; its exit status, or -1 on timeout.
  int wait_controller_exit(double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (controller_ > 0 && std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (waitpid(controller_, &st, WNOHANG) == controller_) {
        controller_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  // Changes the config before the controller starts.
  void edit_config(const std::function<void(json&)>& f) {
    f(config_);
    std::ofstream(dir_ + "/live.json") << config_.dump(2);
  }
  // A token file of mode 0600 in the test's directory; returns its path.
  std::string write_token(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text << "\n";
    chmod(path.c_str(), 0600);
    return path;
  }
  bool netns() const { return netns_; }
  // Gives the config a read-only credential (status_token_file) of its own; returns it.
  std::string add_status_token() {
    const std::string token = "status-" + std::to_string(getpid()) + "-fedcba9876543210";
    const std::string file = write_token("status-token", token);
    edit_config([&](json& cfg) { cfg["status_token_file"] = file; });
    return token;
  }

  void start_controller(bool fresh = true, std::vector<std::string> prefix = {}) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {kFaultline, "live", "run", config()});
    if (fresh) argv.push_back("--fresh");
    controller_ = spawn(argv, dir_ + "/controller.log");
    ASSERT_GT(controller_, 0);
  }
  void kill_controller(int sig) {
    if (controller_ > 0) {
      kill(controller_, sig);
      waitpid(controller_, nullptr, 0);
      controller_ = -1;
    }
  }
  // Starts one machine's agent again (as its supervisor, e.g. systemd, would).
  void restart_agent(const std::string& name) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] != name) continue;
      std::vector<std::string> argv = {kFaultline, "agent", config(), "--name", names_[i]};
      if (netns_) argv.insert(argv.begin(), {"ip", "netns", "exec", ns_name(i)});
      agents_[names_[i]] = spawn(argv, dir_ + "/agent-" + names_[i] + ".log");
    }
  }
  void start_agents() {
    for (size_t i = 0; i < names_.size(); ++i) {
      std::vector<std::string> argv = {kFaultline, "agent", config(), "--name", names_[i]};
      if (netns_) argv.insert(argv.begin(), {"ip", "netns", "exec", ns_name(i)});
      agents_[names_[i]] = spawn(argv, dir_ + "/agent-" + names_[i] + ".log");
    }
  }
  // The pid of a machine's agent (-1 when it is not running).
  pid_t agent_pid(const std::string& name) const {
    auto it = agents_.find(name);
    return it == agents_.end() ? -1 : it->second;
  }
  // kill -9 of a machine's agent and, through it, of its ranks (they die with it).
  void kill_machine(const std::string& name) {
    const pid_t p = agents_[name];
    ASSERT_GT(p, 0);
    kill(-p, SIGKILL);
    waitpid(p, nullptr, 0);
    agents_[name] = -1;
  }
  // A client command whose stdout and stderr go to `out` (a fresh file); returns its status.
  int client_to(std::vector<std::string> args, const std::string& out) {
    std::vector<std::string> argv = {kFaultline, "live"};
    argv.insert(argv.end(), args.begin(), args.end());
    fs::remove(out);
    return run_wait(argv, out);
  }
  int client(std::vector<std::string> args) {
    std::vector<std::string> argv = {kFaultline, "live"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_wait(argv, dir_ + "/client.log");
  }
  int inject(const std::string& machine, const std::string& fault, const std::string& detail = "") {
    std::vector<std::string> a = {"inject", config(), "--machine", machine, "--fault", fault};
    if (!detail.empty()) a.insert(a.end(), {"--detail", detail});
    return client(a);
  }
  void stop_run() {
    EXPECT_EQ(client({"stop", config()}), 0);
    if (controller_ > 0) {
      int st = 0;
      for (int i = 0; i < 100 && waitpid(controller_, &st, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      controller_ = -1;
    }
  }

  std::vector<json> records() const {
    std::vector<json> out;
    std::ifstream in(dir_ + "/state/events.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded()) out.push_back(j);
    }
    return out;
  }
  // Waits until `pred` holds for some record; returns it (null on timeout).
  json wait_for(const std::function<bool(const json&)>& pred, double timeout_s) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      for (const auto& r : records())
        if (pred(r)) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return json();
  }
  // Newest step of rank 0 seen in the log, or -1.
  long last_step() const {
    long s = -1;
    for (const auto& r : records())
      if (r.value("kind", "") == "progress") s = r.value("step", -1L);
    return s;
  }
  json wait_step(long step, double timeout_s) const {
    return wait_for(
        [&](const json& r) {
          return r.value("kind", "") == "progress" && r.value("step", -1L) >= step;
        },
        timeout_s);
  }
  double fault_time(const std::string& kind) const {
    for (const auto& r : records())
      if (r.value("kind", "") == "fault" && r.value("fault", "") == kind)
        return r.value("t_s", 0.0);
    return -1;
  }
  // The first action (event) of `type`, or note that starts with `prefix`, the controller
  // logged after its time `t` (s); null when none came within `timeout_s`.
  json wait_action_after(const std::string& type, double t, double timeout_s) const {
    return wait_for([&](const json& r) { return is_action(r, type) && r["t_s"] > t; }, timeout_s);
  }
  json wait_event_after(const std::string& type, double t, double timeout_s) const {
    return wait_for([&](const json& r) { return is_event(r, type) && r["t_s"] > t; }, timeout_s);
  }
  json wait_note_after(const std::string& prefix, double t, double timeout_s) const {
    return wait_for([&](const json& r) { return is_note(r, prefix) && r["t_s"] > t; }, timeout_s);
  }
  static bool is_event(const json& r, const std::string& type) {
    return r.value("kind", "") == "event" && r.contains("event") &&
           r["event"].value("type", "") == type;
  }
  // A note of the policy that starts with `prefix` (its detection module's findings are
  // noted "detected: ...").
  static bool is_note(const json& r, const std::string& prefix) {
    return r.value("kind", "") == "note" && r.value("text", "").rfind(prefix, 0) == 0;
  }
  static bool is_action(const json& r, const std::string& type) {
    return r.value("kind", "") == "action" && r.contains("action") &&
           r["action"].value("type", "") == type;
  }

  // After a fault at controller time t: the job started again after it, and trained on.
  void expect_trains_again(double t, const std::string& what) const {
    const json started = wait_event_after("JobStarted", t, 60);
    ASSERT_FALSE(started.is_null()) << what << ": the job did not start again\n" << launcher_log();
    ASSERT_FALSE(wait_step(started["event"].value("step", 0L) + 8, 60).is_null())
        << what << ": no training after";
  }
  // A controller stopped with SIGTERM and started again adopts the job its agents kept
  // running, and training goes on.
  void expect_restarted_controller_adopts() {
    const long before = last_step();
    kill_controller(SIGTERM);
    start_controller(false);
    ASSERT_FALSE(
        wait_for([](const json& r) { return r.value("kind", "") == "restart"; }, 20).is_null());
    EXPECT_FALSE(wait_for(
                     [](const json& r) {
                       return r.value("kind", "") == "outcome" &&
                              r.value("detail", "").find("adopted") != std::string::npos;
                     },
                     30)
                     .is_null())
        << "the restarted controller relaunched instead of adopting";
    ASSERT_FALSE(wait_step(before + 10, 60).is_null())
        << "no training after the controller restart";
  }
  // The live fault suite: a killed rank on m1, a controller restart, a hang on m2, a NaN on
  // m0 and a machine down on m3, each followed by training; `after(fault, t)` checks more
  // after each injected fault (t: its time on the controller's clock).
  void run_fault_suite(const std::function<void(const std::string&, double)>& after = {}) {
    for (const auto& [machine, fault] :
         std::vector<std::pair<std::string, std::string>>{{"m1", "kill"},
                                                          {"", "controller restart"},
                                                          {"m2", "hang"},
                                                          {"m0", "nan"},
                                                          {"m3", "machine_down"}}) {
      SCOPED_TRACE(fault + " on " + machine);
      if (machine.empty()) {
        expect_restarted_controller_adopts();
      } else {
        ASSERT_EQ(inject(machine, fault), 0);
        const double t = fault_time(fault);
        ASSERT_GE(t, 0);
        expect_trains_again(t, fault);
        if (after && !::testing::Test::HasFatalFailure()) after(fault, t);
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // The fault-free reference: one process, same seed and model, `steps` steps.
  std::map<long, std::vector<std::string>> reference(long steps) const {
    const std::string log = dir_ + "/reference.log";
    fs::remove(log);
    const int rc =
        run_wait({"env", "RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1",
                  "MASTER_PORT=" + std::to_string(28000 + id_ * 3), kTrainjob, "--seed", "7",
                  "--hidden", "32", "--steps", std::to_string(steps), "--loss-log", log},
                 dir_ + "/reference.out");
    EXPECT_EQ(rc, 0);
    return read_loss_log(log);
  }
  // Every logged loss equals the fault-free run's at the same step.
  void expect_bit_identical_to_reference() const {
    auto live = read_loss_log(dir_ + "/loss.log");
    ASSERT_FALSE(live.empty());
    auto ref = reference(live.rbegin()->first);
    int compared = 0;
    for (const auto& [step, losses] : live) {
      ASSERT_TRUE(ref.count(step)) << "step " << step;
      for (const auto& l : losses) {
        EXPECT_EQ(l, ref[step].front()) << "step " << step;
        ++compared;
      }
    }
    EXPECT_GT(compared, 20);
  }

 private:
  int id_ = 0;
  int id_lock_ = -1;  // the flock that holds id_ (claim_net_id)
  int port_ = 0;
  bool netns_ = false;
  std::string dir_;
  std::string config_path_;  // "" = dir_/live.json
  std::vector<std::string> names_;
  json config_;
  pid_t controller_ = -1;
  std::map<std::string, pid_t> agents_;
  pid_t launcher_ = -1;
  std::vector<pid_t> sshds_;
  std::vector<pid_t> slurm_pids_;  // munged, slurmctld, the slurmds
  std::string slurm_job_;
};

// "" when Debian's Slurm and munge are installed, else what is missing.
inline std::string slurm_missing() {
  std::string missing;
  for (const char* p : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"})
    if (access(p, X_OK) != 0) missing += std::string(missing.empty() ? "" : ", ") + p;
  for (const char* p : {"srun", "salloc", "scontrol", "sinfo", "squeue", "scancel", "nsenter"})
    if (sh(std::string("command -v ") + p) != 0)
      missing += std::string(missing.empty() ? "" : ", ") + p;
  return missing;
}

// Skips only where namespaces cannot be made; a missing Slurm or munge fails (as a missing
// sshd does: .ci/install-deps installs slurm-wlm and munge).
#define REQUIRE_SLURM()                                                           \
  do {                                                                            \
    if (!netns_usable())                                                          \
      GTEST_SKIP() << "needs root and network namespaces (hosts are namespaces)"; \
    const std::string missing = slurm_missing();                                  \
    ASSERT_TRUE(missing.empty()) << "Slurm is missing: " << missing               \
                                 << " (apt-get install slurm-wlm munge)";         \
  } while (0)

}  // namespace faultline::live_e2e
