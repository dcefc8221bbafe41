// faultline-trainjob as live mode runs it: groups of rank processes on loopback, with the
// torchrun-style environment, report sockets, per-"machine" checkpoint directories and fault
// files. The reference for every bit-exactness check is an independent run (another world
// size, or an uninterrupted run), never the run under test.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/free_port.h"

namespace faultline::live::trainjob {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using faultline::testing::free_port;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "trainjob-e2e-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RankResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
  std::vector<Json> reports;
};

struct GroupResult {
  std::vector<RankResult> ranks;
  bool timed_out = false;
  bool killed = false;

  // The reports of `rank` of one type.
  std::vector<Json> of(int rank, const std::string& type) const {
    std::vector<Json> v;
    for (const auto& j : ranks[rank].reports) {
      if (j.value("type", "") == type) v.push_back(j);
    }
    return v;
  }
};

struct GroupSpec {
  int world = 1;
  std::vector<std::string> args;
  // Per rank: the "machine" it runs on, i.e. its checkpoint directory and fault file. Ranks
  // without an entry get no checkpoint directory / fault file.
  std::vector<std::string> ckpt_dirs;
  std::vector<std::string> fault_files;
  std::map<std::string, std::string> env;
  double timeout_s = 20;
  int launch_only = -1;  // >= 0: launch only this rank (the others never show up)
  // Called on every report (rank, report); returning true SIGKILLs every rank.
  std::function<bool(int, const Json&)> kill_when;
  // Bodies sent, each framed on a connection of its own, to rank 0's rendezvous port
  // before the other ranks start: strangers on the network.
  std::vector<std::string> strangers;
};

// Connects to 127.0.0.1:port (retrying while rank 0 starts) and sends `body` framed as the
// rendezvous frames are: magic "FLTJ", 4 reserved bytes, a 64-bit length, the body.
void send_stranger_frame(int port, const std::string& body) {
  for (int tries = 0; tries < 250; ++tries) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      const std::uint32_t head[2] = {0x4A544C46, 0};
      const std::uint64_t len = body.size();
      std::string f(reinterpret_cast<const char*>(head), sizeof head);
      f.append(reinterpret_cast<const char*>(&len), sizeof len);
      f += body;
      EXPECT_EQ(::send(fd, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size()));
      ::close(fd);
      return;
    }
    ::close(fd);
    ::usleep(20000);
  }
  ADD_FAILURE() << "rank 0 never listened on " << port;
}

// Runs spec.world rank processes of faultline-trainjob and collects their exits, outputs and
// reports.
GroupResult run_group(const GroupSpec& spec) {
  const int port = free_port();
  TempDir io;
  GroupResult res;
  res.ranks.resize(spec.world);
  std::vector<pid_t> pids(spec.world, -1);
  std::vector<int> report_fds(spec.world, -1);
  std::vector<std::string> partial(spec.world);
  for (int r = 0; r < spec.world; ++r) {
    if (spec.launch_only >= 0 && r != spec.launch_only) continue;
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    std::map<std::string, std::string> env = spec.env;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(spec.world);
    env["LOCAL_RANK"] = "0";  // one rank per "machine"
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    env["FAULTLINE_REPORT_FD"] = std::to_string(sv[1]);
    if (r < static_cast<int>(spec.ckpt_dirs.size())) env["FAULTLINE_CKPT_DIR"] = spec.ckpt_dirs[r];
    if (r < static_cast<int>(spec.fault_files.size())) {
      env["FAULTLINE_FAULT_FILE"] = spec.fault_files[r];
    }
    if (!env.count("FAULTLINE_RENDEZVOUS_S")) env["FAULTLINE_RENDEZVOUS_S"] = "10";
    const std::string out = io / ("out" + std::to_string(r));
    const std::string err = io / ("err" + std::to_string(r));
    std::vector<std::string> argv_s = {TRAINJOB_BIN};
    argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::fcntl(sv[1], F_SETFD, 0);  // inherited by the rank, like the agent's report socket
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(sv[1]);
    pids[r] = pid;
    report_fds[r] = sv[0];
    if (r == 0)
      for (const auto& body : spec.strangers) send_stranger_frame(port, body);
  }
  // Every rank is stopped before any is killed: a rank killed first closes its sockets, and a
  // peer still running would see the closed connection and exit on its own before its kill.
  auto kill_all = [&] {
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGSTOP);
    }
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGKILL);
    }
  };
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(spec.timeout_s));
  int running = spec.launch_only >= 0 ? 1 : spec.world;
  while (running > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int r = 0; r < spec.world; ++r) {
      if (report_fds[r] >= 0) {
        fds.push_back(pollfd{report_fds[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 20);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int r = which[i];
      char buf[4096];
      const ssize_t n = ::read(report_fds[r], buf, sizeof buf);
      if (n <= 0) {
        ::close(report_fds[r]);
        report_fds[r] = -1;
        continue;
      }
      partial[r].append(buf, static_cast<std::size_t>(n));
      for (auto nl = partial[r].find('\n'); nl != std::string::npos; nl = partial[r].find('\n')) {
        const Json j = Json::parse(partial[r].substr(0, nl));
        partial[r].erase(0, nl + 1);
        res.ranks[r].reports.push_back(j);
        if (spec.kill_when && !res.killed && spec.kill_when(r, j)) {
          kill_all();
          res.killed = true;
        }
      }
    }
    if (fds.empty()) ::usleep(5000);
    for (int r = 0; r < spec.world; ++r) {
      int status = 0;
      if (pids[r] > 0 && ::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        res.ranks[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        res.ranks[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        pids[r] = -1;
        --running;
      }
    }
    if (Clock::now() > deadline && !res.timed_out) {
      res.timed_out = true;
      kill_all();
    }
  }
  // A rank may write its last reports and exit between two polls: read what is left
  // (every rank has exited, so each socket ends).
  for (int r = 0; r < spec.world; ++r) {
    if (report_fds[r] < 0) continue;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(report_fds[r], buf, sizeof buf)) > 0)
      partial[r].append(buf, static_cast<std::size_t>(n));
    for (auto nl = partial[r].find('\n'); nl != std::string::npos; nl = partial[r].find('\n')) {
      res.ranks[r].reports.push_back(Json::parse(partial[r].substr(0, nl)));
      partial[r].erase(0, nl + 1);
    }
  }
  for (int r = 0; r < spec.world; ++r) {
    if (report_fds[r] >= 0) ::close(report_fds[r]);
    res.ranks[r].out = slurp(io / ("out" + std::to_string(r)));
    res.ranks[r].err = slurp(io / ("err" + std::to_string(r)));
  }
  return res;
}

void expect_all_exit(const GroupResult& g, int code) {
  EXPECT_FALSE(g.timed_out);
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    EXPECT_EQ(g.ranks[r].exit_code, code) << "rank " << r << " stderr:\n" << g.ranks[r].err;
  }
}

// "step loss" lines of a loss log, by step (a step repeated after a restart must agree).
std::map<long, std::string> loss_by_step(const std::string& log) {
  std::map<long, std::string> m;
  std::istringstream in(log);
  long step;
  std::string loss;
  while (in >> step >> loss) {
    const auto [it, fresh] = m.emplace(step, loss);
    EXPECT_TRUE(fresh || it->second == loss)
        << "step " << step << " logged " << it->second << " and " << loss;
  }
  return m;
}

Json single_json_line(const std::string& out) {
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  return Json::parse(out.substr(0, out.find('\n')), nullptr, false);
}

std::vector<std::string> model_args(int steps) {
  return {"--seed", "5", "--hidden", "32", "--microbatches", "8", "--steps", std::to_string(steps)};
}

TEST(TrainjobE2E, LossLogIsByteIdenticalForAnyWorldSize) {
  TempDir tmp;
  std::string reference;
  for (int w : {1, 2, 4, 8}) {
    GroupSpec spec;
    spec.world = w;
    spec.args = model_args(30);
    const std::string log = tmp / ("loss" + std::to_string(w));
    spec.args.insert(spec.args.end(), {"--loss-log", log});
    const auto g = run_group(spec);
    expect_all_exit(g, 0);
    const std::string text = slurp(log);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 30);
    if (w == 1) {
      reference = text;
      continue;
    }
    EXPECT_EQ(text, reference) << "world size " << w;
    // Every rank reports the same global loss and grad norm.
    for (int r = 0; r < w; ++r) {
      const auto steps = g.of(r, "step");
      ASSERT_EQ(steps.size(), 30u) << "rank " << r;
      EXPECT_EQ(steps[29]["loss"], g.of(0, "step")[29]["loss"]);
      EXPECT_EQ(steps[29]["grad_norm"], g.of(0, "step")[29]["grad_norm"]);
    }
    const auto started = g.of(w - 1, "started");
    ASSERT_EQ(started.size(), 1u);
    EXPECT_EQ(started[0]["step"], 0);
    EXPECT_EQ(started[0]["restored_from"], "init");
    // No fault file: it takes no injected fault, and says so (the agent refuses them at once).
    EXPECT_FALSE(started[0].contains("faults")) << started[0].dump();
  }
  // The loss falls, and another seed is another run (the comparison above can fail).
  const auto losses = loss_by_step(reference);
  EXPECT_LT(std::stod(losses.at(30)), std::stod(losses.at(1)));
  GroupSpec other;
  other.args = {"--seed", "6", "--hidden", "32", "--steps", "30", "--loss-log", tmp / "other"};
  expect_all_exit(run_group(other), 0);
  EXPECT_NE(slurp(tmp / "other"), reference);
}

// The fault-free reference run of the restart tests: 30 steps, checkpoint every 5.
std::string uninterrupted_log(const TempDir& tmp, int world) {
  GroupSpec spec;
  spec.world = world;
  spec.args = model_args(30);
  spec.args.insert(spec.args.end(), {"--loss-log", tmp / "reference.log"});
  for (int r = 0; r < world; ++r)
    spec.ckpt_dirs.push_back(tmp / ("ref-machine" + std::to_string(r)));
  spec.env["FAULTLINE_CKPT_EVERY"] = "5";
  expect_all_exit(run_group(spec), 0);
  return slurp(tmp / "reference.log");
}

// Runs `world` ranks with checkpoints every 5 steps and kills them all at step 13. Steps are
// paced at 50 ms so that the ranks are still running when this process, reading rank 0's
// report of step 13, kills them: 0.85 s of slack (at 20 ms, 0.34 s, one CI run saw a rank end
// without its SIGKILL).
GroupSpec killed_at_13(const TempDir& tmp, int world) {
  GroupSpec spec;
  spec.world = world;
  spec.args = model_args(30);
  spec.args.insert(spec.args.end(), {"--loss-log", tmp / "run.log", "--step-ms", "50"});
  for (int r = 0; r < world; ++r) spec.ckpt_dirs.push_back(tmp / ("machine" + std::to_string(r)));
  spec.env["FAULTLINE_CKPT_EVERY"] = "5";
  spec.kill_when = [](int rank, const Json& j) {
    return rank == 0 && j["type"] == "step" && j["step"] == 13;
  };
  const auto g = run_group(spec);
  EXPECT_TRUE(g.killed);
  EXPECT_FALSE(g.timed_out);
  for (const auto& r : g.ranks) EXPECT_EQ(r.signal, SIGKILL);
  // Checkpoint reports of steps 5 and 10 came before the kill; 15 was never reached.
  const auto ckpts = g.of(0, "checkpoint");
  EXPECT_EQ(ckpts.size(), 2u);
  EXPECT_EQ(g.of(0, "step").back()["checkpoint_step"], 10);
  spec.kill_when = nullptr;
  spec.args.pop_back();  // no pacing for the rest of the run
  spec.args.pop_back();
  return spec;
}

void expect_matches_reference(const std::string& reference, const std::string& log) {
  const auto ref = loss_by_step(reference);
  const auto got = loss_by_step(log);
  ASSERT_EQ(got.size(), 30u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, ref.at(step)) << "step " << step;
}

TEST(TrainjobE2E, KilledGroupResumesFromTheNewestCheckpointBitExactly) {
  TempDir tmp;
  const std::string reference = uninterrupted_log(tmp, 2);
  const GroupSpec spec = killed_at_13(tmp, 2);
  const auto g = run_group(spec);
  expect_all_exit(g, 0);
  for (int r = 0; r < 2; ++r) {
    const auto started = g.of(r, "started");
    ASSERT_EQ(started.size(), 1u);
    EXPECT_EQ(started[0]["step"], 10);
    EXPECT_EQ(started[0]["restored_from"], "local");
    EXPECT_EQ(g.of(r, "step").front()["step"], 11);
    EXPECT_EQ(g.of(r, "step").front()["checkpoint_step"], 10);
  }
  expect_matches_reference(reference, slurp(tmp / "run.log"));
  // Retention: the newest three of each rank's own checkpoints, and of the peer copies.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp / "machine0/rank0")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-0000000020.ckpt", "step-0000000025.ckpt",
                                             "step-0000000030.ckpt"}));
  EXPECT_TRUE(fs::exists(tmp / "machine0/peer/rank1/step-0000000030.ckpt"));
  EXPECT_TRUE(fs::exists(tmp / "machine1/peer/rank0/step-0000000030.ckpt"));
}

TEST(TrainjobE2E, RanksWithAnEmptyDiskRestoreFromTheirPeers) {
  TempDir tmp;
  const std::string reference = uninterrupted_log(tmp, 4);
  const GroupSpec spec = killed_at_13(tmp, 4);
  // Fresh standbys take ranks 0 and 2: rank 0's state comes from rank 1 (relayed by rank 0
  // itself), rank 2's through rank 0.
  fs::remove_all(tmp / "machine0");
  fs::remove_all(tmp / "machine2");
  const auto g = run_group(spec);
  expect_all_exit(g, 0);
  const std::vector<std::string> expected = {"peer", "local", "peer", "local"};
  for (int r = 0; r < 4; ++r) {
    const auto started = g.of(r, "started");
    ASSERT_EQ(started.size(), 1u);
    EXPECT_EQ(started[0]["step"], 10);
    EXPECT_EQ(started[0]["restored_from"], expected[r]) << "rank " << r;
  }
  expect_matches_reference(reference, slurp(tmp / "run.log"));
}

TEST(TrainjobE2E, CrashDirectiveFiresOnceWithItsSignature) {
  TempDir tmp;
  const std::string faults = tmp / "faults1";
  const std::string signature = "RuntimeError: CUDA error: an illegal memory access";
  std::ofstream(faults) << "slow 1\ncrash " << signature << "\n";
  GroupSpec spec;
  spec.world = 2;
  spec.args = model_args(10);
  spec.fault_files = {tmp / "faults0", faults};
  const auto g = run_group(spec);
  EXPECT_EQ(g.ranks[1].exit_code, 1);
  EXPECT_NE(g.ranks[1].err.find(signature + "\n"), std::string::npos) << g.ranks[1].err;
  const auto fatal = g.of(1, "fatal");
  ASSERT_EQ(fatal.size(), 1u);
  EXPECT_EQ(fatal[0]["signature"], signature);
  EXPECT_EQ(fatal[0]["rank"], 1);
  EXPECT_TRUE(g.of(1, "step").empty());  // fired at the first step boundary
  // With a fault file it lists the five kinds it takes.
  ASSERT_EQ(g.of(1, "started").size(), 1u);
  EXPECT_EQ(g.of(1, "started")[0]["faults"], Json::array({"crash", "hang", "nan", "slow", "sdc"}));
  // Its partner loses the collective and says so.
  EXPECT_EQ(g.ranks[0].exit_code, 1);
  ASSERT_EQ(g.of(0, "fatal").size(), 1u);
  EXPECT_NE(g.of(0, "fatal")[0]["signature"].get<std::string>().find("collective"),
            std::string::npos);
  // Consumed, the persistent line kept: the restarted group runs through.
  EXPECT_EQ(slurp(faults), "slow 1\n");
  expect_all_exit(run_group(spec), 0);
}

TEST(TrainjobE2E, NanHangAndBadVersion) {
  TempDir tmp;
  // nan: the global loss of one step is not finite and reported as null.
  std::ofstream(tmp / "nan") << "nan\n";
  GroupSpec nan;
  nan.world = 2;
  nan.args = model_args(3);
  nan.fault_files = {tmp / "nan"};
  const auto g = run_group(nan);
  expect_all_exit(g, 0);
  for (int r = 0; r < 2; ++r) {
    const auto steps = g.of(r, "step");
    ASSERT_EQ(steps.size(), 3u);
    EXPECT_TRUE(steps[0]["loss"].is_null());
    EXPECT_EQ(steps[0]["loss_nan"], true);
    EXPECT_EQ(steps[0]["grad_norm_nan"], true);
  }
  EXPECT_EQ(slurp(tmp / "nan"), "");

  // hang: the rank stops inside the collective and never reports a step.
  std::ofstream(tmp / "hang") << "hang\n";
  GroupSpec hang;
  hang.args = model_args(5);
  hang.fault_files = {tmp / "hang"};
  hang.timeout_s = 1.5;
  const auto h = run_group(hang);
  EXPECT_TRUE(h.timed_out);
  EXPECT_EQ(h.of(0, "started").size(), 1u);
  EXPECT_TRUE(h.of(0, "step").empty());

  // slow: a persistent factor on the step time (here 3 x the 50 ms pace) of rank 1's machine;
  // the all-gather holds rank 0, whose steps the controller watches, to its pace: at least
  // twice the pace, the rest room for the ranks starting a step a little apart.
  std::ofstream(tmp / "slow") << "slow 3\n";
  GroupSpec slow;
  slow.world = 2;
  slow.args = model_args(3);
  slow.args.insert(slow.args.end(), {"--step-ms", "50"});
  slow.fault_files = {tmp / "no-faults", tmp / "slow"};
  const auto s = run_group(slow);
  expect_all_exit(s, 0);
  ASSERT_EQ(s.of(0, "step").size(), 3u);
  ASSERT_EQ(s.of(1, "step").size(), 3u);
  for (const auto& step : s.of(1, "step")) EXPECT_GE(step["step_time_s"].get<double>(), 0.148);
  for (const auto& step : s.of(0, "step")) EXPECT_GE(step["step_time_s"].get<double>(), 0.1);
  EXPECT_EQ(slurp(tmp / "slow"), "slow 3\n");

  // A bad code version crashes at step 3 on every rank.
  GroupSpec bad;
  bad.world = 2;
  bad.args = model_args(10);
  bad.args.insert(bad.args.end(), {"--version", "bad-7"});
  const auto b = run_group(bad);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(b.ranks[r].exit_code, 1);
    EXPECT_NE(b.ranks[r].err.find("TypeError: bad code version"), std::string::npos);
    EXPECT_EQ(b.of(r, "step").size(), 2u);
    EXPECT_EQ(b.of(r, "started")[0]["version"], "bad-7");
  }
}

// Issue 37, item 6: one unauthenticated packet to rank 0's rendezvous port
// ({"rank":1,"world_size":"two"}) killed it with an uncaught json type_error, and the
// controller then blamed a healthy machine. What a stranger sends is ignored; the real
// ranks register after it and train.
TEST(TrainjobE2E, StrangersOnTheRendezvousPortCannotCrashRankZero) {
  GroupSpec spec;
  spec.world = 2;
  spec.args = model_args(5);
  spec.strangers = {R"({"rank":1,"world_size":"two"})",
                    R"({"rank":1,"world_size":2,"addr":7,"port":1})",
                    R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":"x"})",
                    R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":70000})",
                    R"({"rank":1e300,"world_size":2,"addr":"127.0.0.1","port":1})",
                    R"({"rank":-5,"world_size":2,"addr":"127.0.0.1","port":1})",
                    R"({"rank":1,"world_size":2,"addr":"; rm -rf /","port":1})",
                    R"([1,2,3])",
                    "not json",
                    std::string("\xff\xfe", 2),
                    ""};
  const GroupResult g = run_group(spec);
  expect_all_exit(g, 0);
  EXPECT_FALSE(g.of(0, "step").empty()) << "rank 0 did not train";
}

// Issue 52, broken item 5: a stranger's well-formed registration on the job's rendezvous port
// ({"rank":1,"world_size":3,...}, or one claiming rank 1 before it registers) failed every
// start ("has WORLD_SIZE 3", "registered twice"), and the controller evicted healthy machines.
// The agent gives each launch's ranks a key (FAULTLINE_RENDEZVOUS_KEY) and their generation;
// rank 0 believes only registrations that carry both, and refuses the rest without harm.
TEST(TrainjobE2E, AStrangersWellFormedRegistrationIsRefusedWithoutHarmingTheJob) {
  GroupSpec spec;
  spec.world = 2;
  spec.args = model_args(5);
  spec.env = {{"FAULTLINE_RENDEZVOUS_KEY", "k-of-generation-4-0123456789abcdef"},
              {"FAULTLINE_GEN", "4"}};
  spec.strangers = {
      R"({"rank":1,"world_size":3,"addr":"127.0.0.1","port":1})",
      R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":1})",
      R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":1,"key":"guess","gen":4})",
      R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":1,"gen":4,)"
      R"("key":"k-of-generation-4-0123456789abcdeg"})",
      R"({"rank":1,"world_size":2,"addr":"127.0.0.1","port":1,"gen":3,)"
      R"("key":"k-of-generation-4-0123456789abcdef"})"};
  const GroupResult g = run_group(spec);
  expect_all_exit(g, 0);
  EXPECT_FALSE(g.of(0, "step").empty()) << "rank 0 did not train";
  EXPECT_NE(g.ranks[0].err.find("rendezvous: rank 0 refused a registration from 127.0.0.1:"),
            std::string::npos)
      << g.ranks[0].err;
  EXPECT_NE(g.ranks[0].err.find(": no key"), std::string::npos) << g.ranks[0].err;
  EXPECT_NE(g.ranks[0].err.find(": a wrong key"), std::string::npos) << g.ranks[0].err;
  EXPECT_NE(g.ranks[0].err.find(": generation 3, rank 0 runs generation 4"), std::string::npos)
      << g.ranks[0].err;

  // Without a key (a job run by hand), a registration that does not fit the group is refused
  // too, and said when rank 0 gives up waiting.
  GroupSpec lonely;
  lonely.world = 2;
  lonely.launch_only = 0;
  lonely.args = model_args(3);
  lonely.env = {{"FAULTLINE_RENDEZVOUS_S", "1"}};
  lonely.strangers = {R"({"rank":1,"world_size":3,"addr":"127.0.0.1","port":1})"};
  const auto l = run_group(lonely);
  EXPECT_EQ(l.ranks[0].exit_code, 1);
  EXPECT_NE(l.ranks[0].err.find("rendezvous timeout: rank 0 waited for ranks [1] (refused 1 "
                                "registrations; the last from 127.0.0.1:"),
            std::string::npos)
      << l.ranks[0].err;
  EXPECT_NE(l.ranks[0].err.find("rank 1 has WORLD_SIZE 3, rank 0 has 2)"), std::string::npos)
      << l.ranks[0].err;
}

TEST(TrainjobE2E, UsageErrorsAndRendezvousTimeout) {
  GroupSpec flag;
  flag.args = {"--seed", "1", "--no-such-flag"};
  const auto f = run_group(flag);
  EXPECT_EQ(f.ranks[0].exit_code, 2);
  EXPECT_NE(f.ranks[0].err.find("--no-such-flag"), std::string::npos);

  // Rank 0 alone in a group of two gives up after FAULTLINE_RENDEZVOUS_S.
  GroupSpec lonely;
  lonely.world = 2;
  lonely.launch_only = 0;
  lonely.args = model_args(3);
  lonely.env = {{"FAULTLINE_RENDEZVOUS_S", "0.5"}};
  const auto t0 = Clock::now();
  const auto l = run_group(lonely);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(l.ranks[0].exit_code, 1);
  EXPECT_EQ(l.ranks[0].err.rfind("rendezvous timeout", 0), 0u) << l.ranks[0].err;
  ASSERT_EQ(l.of(0, "fatal").size(), 1u);
  EXPECT_EQ(l.of(0, "fatal")[0]["signature"].get<std::string>().rfind("rendezvous timeout", 0), 0u);
}

TEST(TrainjobE2E, SdcShowsInLongProbesAndReplaysNotInOneStep) {
  TempDir tmp;
  std::ofstream(tmp / "sdc") << "sdc after=3\n";
  auto bitwise = [&](int steps, const std::string& fault_file) {
    GroupSpec p;
    p.args = {"--probe",  "bitwise", "--seed",  "5",
              "--hidden", "32",      "--steps", std::to_string(steps)};
    if (!fault_file.empty()) p.fault_files = {fault_file};
    const auto g = run_group(p);
    EXPECT_EQ(g.ranks[0].exit_code, 0) << g.ranks[0].err;
    const Json j = single_json_line(g.ranks[0].out);
    EXPECT_EQ(j["probe"], "bitwise");
    EXPECT_EQ(j["steps"], steps);
    EXPECT_TRUE(g.ranks[0].reports.empty());  // probes do not report
    return j["hash"].get<std::string>();
  };
  EXPECT_EQ(bitwise(1, tmp / "sdc"), bitwise(1, ""));
  const std::string clean6 = bitwise(6, "");
  EXPECT_NE(bitwise(6, tmp / "sdc"), clean6);
  EXPECT_EQ(slurp(tmp / "sdc"), "sdc after=3\n");  // persistent

  // Replays restore the newest checkpoint (step 10 of a two-machine run) and agree whatever
  // the world size; an sdc machine in the group changes the hash.
  GroupSpec train;
  train.world = 2;
  train.args = model_args(10);
  train.ckpt_dirs = {tmp / "m0", tmp / "m1"};
  train.env["FAULTLINE_CKPT_EVERY"] = "5";
  expect_all_exit(run_group(train), 0);
  auto replay = [&](int world, std::vector<std::string> dirs, std::vector<std::string> faults) {
    GroupSpec r;
    r.world = world;
    r.args = {"--replay", "--seed", "5", "--hidden", "32", "--steps", "6"};
    r.ckpt_dirs = std::move(dirs);
    r.fault_files = std::move(faults);
    const auto g = run_group(r);
    expect_all_exit(g, 0);
    for (int k = 1; k < world; ++k) EXPECT_EQ(g.ranks[k].out, "");
    return single_json_line(g.ranks[0].out);
  };
  const Json one = replay(1, {tmp / "m1"}, {});
  const Json two = replay(2, {tmp / "m0", tmp / "m1"}, {});
  EXPECT_EQ(one["replay"], true);
  EXPECT_EQ(one["from_step"], 10);
  EXPECT_EQ(two["from_step"], 10);
  EXPECT_EQ(one["hash"], two["hash"]);
  const Json bad = replay(2, {tmp / "m0", tmp / "m1"}, {"", tmp / "sdc"});
  EXPECT_NE(bad["hash"], two["hash"]);
  // Independent check: replaying 6 steps with no checkpoint is the bitwise probe's 6 steps.
  const Json fresh = replay(2, {tmp / "empty0", tmp / "empty1"}, {});
  EXPECT_EQ(fresh["from_step"], 0);
  EXPECT_EQ(fresh["hash"], clean6);
  // Replays leave the checkpoint directories as they were (read-only).
  EXPECT_FALSE(fs::exists(tmp / "empty0/rank0"));
}

TEST(TrainjobE2E, AllgatherProbe) {
  GroupSpec p;
  p.world = 3;
  p.args = {"--probe", "allgather", "--probe-mib", "1", "--deadline-ms", "8000"};
  const auto g = run_group(p);
  expect_all_exit(g, 0);
  for (int r = 0; r < 3; ++r) {
    const Json j = single_json_line(g.ranks[r].out);
    EXPECT_EQ(j["probe"], "allgather");
    EXPECT_EQ(j["ok"], true);
    EXPECT_GT(j["gbps"].get<double>(), 0);
    // One all-gather's time, against the bandwidth: 1 MiB from each of the 2 others.
    EXPECT_NEAR(j["gbps"].get<double>() * j["seconds"].get<double>(), 8.0 * (1 << 20) * 2 / 1e9,
                1e-12);
  }
  // A missing rank: the others give up at the deadline with ok:false.
  GroupSpec lonely = p;
  lonely.launch_only = 1;
  lonely.args = {"--probe", "allgather", "--deadline-ms", "300"};
  const auto l = run_group(lonely);
  EXPECT_EQ(l.ranks[1].exit_code, 1);
  const Json j = single_json_line(l.ranks[1].out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_NE(j["error"].get<std::string>().find("rendezvous timeout"), std::string::npos);
}

}  // namespace
}  // namespace faultline::live::trainjob
