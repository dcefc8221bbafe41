#include "realexec/launch/launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "realexec/launch/launch_internal.h"
#include "realexec/net/proc.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

namespace {

constexpr double kFirstBackoffS = 1;
constexpr double kMaxBackoffS = 30;
constexpr double kHealthySessionS = 60;  // a session that lived this long resets the backoff
constexpr double kStopGraceS = 5;        // SIGTERM, then SIGKILL

constexpr const char* kLaunchAbout =
    "Starts `AGENT_BIN agent CONFIG --name NAME` for every machine and standby of CONFIG\n"
    "(or those --only names) and starts each again when it ends, after a backoff (1 s\n"
    "doubling to 30 s), except after exit 0 (the run was stopped), 2 (a bad config or\n"
    "token on that host) or 127 (no agent program there). --via ssh runs it on the\n"
    "machine's `ssh` host (default: its `addr`) as `ssh -tt -o BatchMode=yes`: the user's\n"
    "keys, never a password prompt.\n"
    "AGENT_BIN defaults to this program, --remote-config to CONFIG's absolute path (the\n"
    "same paths on every host); each machine's output goes to LOG_DIR/NAME.log (default\n"
    "STATE_DIR/launch). SIGTERM or SIGINT ends every session (the agents kill their ranks).\n"
    "--via slurm runs each agent as a job step of the allocation (--slurm-job, default\n"
    "$SLURM_JOB_ID) on the machine's `slurm_node` (default its name): `srun --nodes=1\n"
    "--ntasks=1 --nodelist=NODE --overlap`. A machine the controller evicts (STATE_DIR/\n"
    "events.jsonl) has its step ended, gets no new one, and its node is drained with the\n"
    "reason (--slurm-drain no: not drained). Nodes of the allocation that no machine names\n"
    "get no agent: `faultline live slurm-config` writes CONFIG with them as standbys.\n";

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("faultline") : p.string();
}

// The last non-empty line of a file (its tail only), without a trailing \r.
std::string last_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  std::string line;
  std::size_t end = tail.size();
  while (end > 0) {
    const std::size_t start = tail.rfind('\n', end - 1);
    const std::size_t b = start == std::string::npos ? 0 : start + 1;
    line = tail.substr(b, end - b);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' '))
      line.pop_back();
    if (!line.empty() || start == std::string::npos) break;
    end = start;
  }
  return line;
}

std::string host_of(const LiveMachine& m, const LaunchOptions& o) {
  if (o.via == LaunchOptions::Via::kLocal) return "local";
  if (o.via == LaunchOptions::Via::kSlurm) return "slurm node " + slurm_node_of(m);
  return m.ssh.empty() ? m.addr : m.ssh;
}

// Exit 0: the run was stopped. 2: the agent refused its config or token on that host. 127:
// the remote shell found no agent program there. A restart cannot change any of them.
bool restartable(int status) {
  if (!WIFEXITED(status)) return true;
  const int code = WEXITSTATUS(status);
  return code != 0 && code != 2 && code != 127;
}

// One machine's agent, kept running.
struct Session {
  const LiveMachine* machine = nullptr;
  pid_t pid = -1;
  Instant started;
  double backoff_s = kFirstBackoffS;
  bool over = false;     // ended for good
  bool evicted = false;  // slurm: evicted by the controller, never started again
  int end_status = 0;    // its last wait status
  std::uint64_t restart_timer = 0;
};

class Supervisor {
 public:
  Supervisor(Reactor& reactor, const LiveConfig& config, LaunchOptions options)
      : reactor_(reactor), config_(config), options_(std::move(options)) {}

  void start(const std::vector<const LiveMachine*>& machines) {
    for (const LiveMachine* m : machines) {
      Session s;
      s.machine = m;
      sessions_.push_back(s);
    }
    for (int sig : {SIGTERM, SIGINT}) reactor_.on_signal(sig, [this] { stop_all(); });
    for (Session& s : sessions_) launch(s);
    if (options_.via == LaunchOptions::Via::kSlurm) watch_evictions();
  }

  int exit_code() const {
    bool refused = false, failed = false;
    for (const Session& s : sessions_) {
      if (WIFEXITED(s.end_status) && WEXITSTATUS(s.end_status) == 2)
        refused = true;
      else if (!stopping_ && !(WIFEXITED(s.end_status) && WEXITSTATUS(s.end_status) == 0))
        failed = true;
    }
    return refused ? 2 : failed || allocation_over_ ? 1 : 0;
  }

 private:
  void say(const Session& s, const std::string& what) const {
    std::fprintf(stderr, "faultline launch: %s (%s): %s\n", s.machine->name.c_str(),
                 host_of(*s.machine, options_).c_str(), what.c_str());
    std::fflush(stderr);
  }

  std::string log_path(const Session& s) const {
    return options_.log_dir + "/" + s.machine->name + ".log";
  }

  void launch(Session& s) {
    s.restart_timer = 0;
    if (stopping_ || s.evicted) return finish(s);
    SpawnSpec spec;
    spec.argv = agent_command(config_, *s.machine, options_);
    spec.env = make_env({});
    spec.stdout_to = Redirect::file(log_path(s));
    spec.stderr_to = Redirect::file(log_path(s));
    Spawned child;
    std::string err;
    if (!spawn(spec, &child, &err)) {
      s.end_status = 1 << 8;  // as "exit code 1"
      say(s, err + "; not started");
      return finish(s);
    }
    s.pid = child.pid;
    s.started = reactor_.now();
    say(s, "started (pid " + std::to_string(child.pid) + ", log " + log_path(s) + ")");
    reactor_.watch_child(child.pid, [this, &s](int status) { ended(s, status); });
  }

  void ended(Session& s, int status) {
    s.pid = -1;
    s.end_status = status;
    const std::string why = describe_session_end(options_, status, last_line(log_path(s)));
    if (s.evicted) {
      say(s, why + "; not restarted: evicted, its node gets no more steps");
      return finish(s);
    }
    const bool for_good = stopping_ || !restartable(status);
    if (for_good) {
      say(s, why + (stopping_ ? "" : "; not restarted"));
      return finish(s);
    }
    // srun refused: when the allocation itself is over, no restart can succeed.
    if (options_.via == LaunchOptions::Via::kSlurm && why.rfind("srun failed", 0) == 0) {
      std::string state;
      if (allocation_over(&state)) {
        say(s, why + "; not restarted");
        finish(s);
        return end_with_allocation(state);
      }
    }
    if ((reactor_.now() - s.started).to_seconds() >= kHealthySessionS) s.backoff_s = kFirstBackoffS;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s.backoff_s);
    say(s, why + "; starting it again in " + buf + " s");
    s.restart_timer = reactor_.add_timer(Duration::seconds(s.backoff_s), [this, &s] { launch(s); });
    s.backoff_s = std::min(kMaxBackoffS, 2 * s.backoff_s);
  }

  // Whether the allocation is over, as squeue says it: listed in a state other than RUNNING,
  // no longer listed, or unknown to Slurm. squeue failing otherwise (the controller not
  // answering) is not taken for the end of the allocation. *said: squeue's word.
  bool allocation_over(std::string* said) const {
    std::string out;
    const int rc =
        run_capture({"squeue", "--noheader", "--jobs=" + options_.slurm_job, "--format=%T"}, &out);
    if (rc != 0) {
      *said =
          "exit " + std::to_string(rc) + (out.empty() ? "" : ": " + out.substr(0, out.find('\n')));
      return out.find("Invalid job id") != std::string::npos;
    }
    *said = out.empty() ? "no longer listed" : out;
    return out != "RUNNING";
  }

  // Follows the controller's event log from its end (evictions before the launcher started
  // were acted on by whoever ran the job then).
  void watch_evictions() {
    events_path_ = config_.state_dir + "/events.jsonl";
    std::error_code ec;
    const auto size = std::filesystem::file_size(events_path_, ec);
    events_offset_ = ec ? 0 : static_cast<std::streamoff>(size);
    poll_events();
  }

  void poll_events() {
    std::ifstream in(events_path_, std::ios::binary);
    if (in) {
      in.seekg(0, std::ios::end);
      const std::streamoff size = in.tellg();
      if (size < events_offset_) events_offset_ = 0;  // a fresh log (controller run with --fresh)
      in.seekg(events_offset_);
      std::string line;
      while (in.tellg() < size && std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written: read it next time
        events_offset_ = in.tellg();
        std::string reason;
        for (const auto& name : evicted_by(config_, line, &reason)) evict(name, reason);
      }
    }
    if (!stopping_) reactor_.add_timer(Duration::seconds(1), [this] { poll_events(); });
  }

  void evict(const std::string& name, const std::string& reason) {
    for (Session& s : sessions_) {
      if (s.machine->name != name || s.evicted) continue;
      s.evicted = true;
      const std::string node = slurm_node_of(*s.machine);
      say(s, "evicted by the controller (" + reason +
                 "): its step is ended and the node gets no more steps");
      if (s.restart_timer) {
        reactor_.cancel_timer(s.restart_timer);
        s.restart_timer = 0;
        finish(s);
      } else if (s.pid > 0) {
        signal_group(s.pid, SIGTERM);
      }
      if (!options_.slurm_drain) continue;
      // Agents lost because the allocation ended are no fault of their nodes.
      std::string state;
      if (allocation_over(&state)) {
        say(s, "slurm node " + node + " not drained: slurm job " + options_.slurm_job +
                   " is over (squeue: " + state + ")");
        // The controller may evict an agent lost with the allocation before its restart is
        // refused: the launcher ends here as it would on srun's refusal.
        return end_with_allocation(state);
      }
      std::string out;
      const int rc = run_capture(drain_command(node, "evicted " + name + ": " + reason), &out);
      if (rc == 0)
        say(s, "drained slurm node " + node);
      else
        say(s, "could not drain slurm node " + node + " (" +
                   (out.empty() ? "exit " + std::to_string(rc) : out) + "); carrying on");
    }
  }

  // The allocation ended under the launcher (squeue said so: *state): no step can start
  // again, so every session ends and the launcher exits 1.
  void end_with_allocation(const std::string& state) {
    if (allocation_over_) return;
    std::fprintf(stderr,
                 "faultline launch: slurm job %s is over (squeue: %s); ending every session\n",
                 options_.slurm_job.c_str(), state.c_str());
    std::fflush(stderr);
    allocation_over_ = true;
    stop_all();
  }

  void finish(Session& s) {
    s.over = true;
    if (std::all_of(sessions_.begin(), sessions_.end(), [](const Session& x) { return x.over; }))
      reactor_.stop();
  }

  void stop_all() {
    if (stopping_) return;
    stopping_ = true;
    for (Session& s : sessions_) {
      if (s.restart_timer) {
        reactor_.cancel_timer(s.restart_timer);
        finish(s);
      } else if (s.pid > 0) {
        signal_group(s.pid, SIGTERM);
      }
    }
    reactor_.add_timer(Duration::seconds(kStopGraceS), [this] {
      for (Session& s : sessions_)
        if (s.pid > 0) signal_group(s.pid, SIGKILL);
    });
  }

  Reactor& reactor_;
  const LiveConfig& config_;
  const LaunchOptions options_;
  std::vector<Session> sessions_;  // sized once in start(): callbacks hold references
  bool stopping_ = false;
  bool allocation_over_ = false;  // slurm: the allocation ended under the launcher
  std::string events_path_;
  std::streamoff events_offset_ = 0;
};

}  // namespace

// Runs argv and waits; its stdout and stderr, trimmed, in *out (for `scontrol update`, the
// last line only: its reason). Returns its exit code, -1 when it could not be started.
int run_capture(const std::vector<std::string>& argv, std::string* out) {
  std::string cmd;
  for (const auto& w : argv) cmd += shell_quote(w) + " ";
  cmd += "2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const int st = ::pclose(f);
  *out = text;
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ' || out->back() == '\r'))
    out->pop_back();
  if (const auto nl = out->rfind('\n');
      nl != std::string::npos && argv.size() > 1 && argv[1] == "update")
    *out = out->substr(nl + 1);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

namespace {

constexpr const char* kLaunchProgram = "faultline live launch";

int launch_usage_error(const std::string& what) {
  return cli::FlagTable(kLaunchProgram, "").usage_error(what);
}

std::optional<double> parse_seconds(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !(v > 0) || v > 3600) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= text.size()) {
    const std::size_t e = text.find(',', b);
    out.push_back(text.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> agent_command(const LiveConfig& config, const LiveMachine& m,
                                       const LaunchOptions& o) {
  const std::string config_path = o.remote_config.empty() ? config.file : o.remote_config;
  const std::vector<std::string> agent = {o.agent_bin, "agent", config_path, "--name", m.name};
  if (o.via == LaunchOptions::Via::kLocal) return agent;
  if (o.via == LaunchOptions::Via::kSlurm) {
    // One step per machine on its node; --overlap so a restarted agent's step never waits
    // for the resources of the one that just ended.
    std::vector<std::string> cmd = {"srun",
                                    "--jobid=" + o.slurm_job,
                                    "--nodes=1",
                                    "--ntasks=1",
                                    "--nodelist=" + slurm_node_of(m),
                                    "--overlap",
                                    "--job-name=faultline-agent-" + m.name,
                                    "--quiet"};
    cmd.insert(cmd.end(), agent.begin(), agent.end());
    return cmd;
  }
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%d",
                std::max(1, static_cast<int>(o.connect_timeout_s + 0.5)));
  std::vector<std::string> cmd = {"ssh", "-tt",
                                  "-o",  "BatchMode=yes",
                                  "-o",  std::string("ConnectTimeout=") + timeout,
                                  "-o",  "ServerAliveInterval=2",
                                  "-o",  "ServerAliveCountMax=3"};
  if (!o.identity_file.empty()) cmd.insert(cmd.end(), {"-i", o.identity_file});
  for (const auto& opt : o.ssh_options) cmd.insert(cmd.end(), {"-o", opt});
  cmd.insert(cmd.end(), {"--", host_of(m, o)});
  // ssh joins its command words with spaces for the remote shell: quote each one.
  for (const auto& word : agent) cmd.push_back(shell_quote(word));
  return cmd;
}

std::string describe_session_end(const LaunchOptions& o, int status, const std::string& last) {
  const std::string said = last.empty() ? "" : ": " + last;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 0) return "its agent shut down (the run was stopped)";
    if (code == 2) return "its agent refused its command line, config or token (exit 2)" + said;
    if (code == 255 && o.via == LaunchOptions::Via::kSsh) return "ssh failed (exit 255)" + said;
    if (code == 127) return "no agent program there (exit 127)" + said;
    // srun's own refusals (no step, node unreachable), not its report of the agent's exit
    // ("srun: error: NODE: task 0: Exited with exit code 137").
    if (o.via == LaunchOptions::Via::kSlurm && code != 0 && last.rfind("srun: ", 0) == 0 &&
        last.find(": task ") == std::string::npos)
      return "srun failed (exit " + std::to_string(code) +
             "): " + last.substr(last.rfind("srun: error: ", 0) == 0 ? 13 : 6);
  }
  return "its agent ended: " + describe_wait_status(status) + said;
}

// launch's table: CONFIG into *config, its options into *o and *only.
cli::FlagTable launch_table(std::string* config, LaunchOptions* o, std::string* only) {
  cli::FlagTable t(kLaunchProgram, "faultline live launch CONFIG [options]", kLaunchAbout);
  t.positional(config);
  t.value("--via", "local|ssh|slurm", "local, ssh or slurm", "where the agents run (default local)",
          [o](const std::string& v) {
            if (v != "local" && v != "ssh" && v != "slurm") return false;
            o->via = v == "ssh"     ? LaunchOptions::Via::kSsh
                     : v == "slurm" ? LaunchOptions::Via::kSlurm
                                    : LaunchOptions::Via::kLocal;
            return true;
          });
  t.text("--only", "NAME,...", "these machines only (default: every machine and standby)", only);
  t.text("--agent-bin", "PATH", "the agent program (default: this program)", &o->agent_bin);
  t.text("--remote-config", "PATH", "ssh: CONFIG's path on the hosts (default: its absolute path)",
         &o->remote_config);
  t.text("--ssh-identity", "FILE", "ssh: its -i FILE", &o->identity_file);
  t.value("--ssh-option", "KEY=VALUE", "KEY=VALUE", "ssh: its -o KEY=VALUE (repeatable)",
          [o](const std::string& v) {
            if (v.find('=') == std::string::npos || v.front() == '-') return false;
            o->ssh_options.push_back(v);
            return true;
          });
  t.value("--connect-timeout", "SECONDS", "seconds in (0, 3600]",
          "ssh: its ConnectTimeout (default 5)", [o](const std::string& v) {
            const auto s = parse_seconds(v);
            if (s) o->connect_timeout_s = *s;
            return s.has_value();
          });
  t.text("--log-dir", "DIR", "each machine's output in DIR/NAME.log (default STATE_DIR/launch)",
         &o->log_dir);
  t.text("--slurm-job", "ID", "slurm: the allocation (default $SLURM_JOB_ID)", &o->slurm_job);
  t.value("--slurm-drain", "yes|no", "yes or no",
          "slurm: drain an evicted machine's node (default yes)", [o](const std::string& v) {
            o->slurm_drain = v == "yes";
            return v == "yes" || v == "no";
          });
  return t;
}

// --via slurm: the job's allocation must hold every machine launched; nodes that no
// machine names are reported. 0, or the exit status.
int check_slurm_allocation(LaunchOptions& o, const std::vector<const LiveMachine*>& machines) {
  if (const std::string err = resolve_slurm_job(&o.slurm_job); !err.empty())
    return launch_usage_error(err.rfind("--", 0) == 0 ? err : "--via slurm: " + err);
  std::vector<std::string> allocation;
  if (const std::string err = read_allocation(o.slurm_job, &allocation); !err.empty()) {
    std::cerr << "faultline live launch: " << err << "\n";
    return 2;
  }
  std::vector<std::string> spare;
  const std::string err = check_slurm_nodes(machines, allocation, o.slurm_job, &spare);
  if (!err.empty()) {
    std::cerr << "faultline live launch: " << err << "\n";
    return 2;
  }
  if (!spare.empty()) {
    std::string list;
    for (const auto& n : spare) list += (list.empty() ? "" : ",") + n;
    std::cerr << "faultline launch: slurm job " << o.slurm_job
              << ": nodes no machine names (unused; `faultline live"
              << " slurm-config` makes them standbys): " << list << "\n";
  }
  return 0;
}

int launch_main(const std::vector<std::string>& args) {
  std::string config_file, only;
  LaunchOptions o;
  const cli::FlagTable table = launch_table(&config_file, &o, &only);
  if (const int rc = table.parse({args.begin() + 1, args.end()}); rc >= 0) return rc;
  if (config_file.empty()) return table.usage_error("expected a CONFIG file");
  LiveConfig config;
  try {
    config = load_live_config(config_file, policies::builtin_registry());
  } catch (const LiveConfigError& e) {
    std::cerr << "faultline live launch: " << e.what() << "\n";
    return 2;
  }
  config.file = std::filesystem::absolute(config.file).string();
  if (o.agent_bin.empty()) o.agent_bin = self_exe();
  if (o.log_dir.empty()) o.log_dir = config.state_dir + "/launch";
  std::error_code ec;
  std::filesystem::create_directories(o.log_dir, ec);
  if (ec) return launch_usage_error("--log-dir " + o.log_dir + ": " + ec.message());

  std::vector<const LiveMachine*> machines;
  if (only.empty()) {
    for (const auto& m : config.machines) machines.push_back(&m);
    for (const auto& m : config.standby) machines.push_back(&m);
  } else {
    for (const auto& name : split_names(only)) {
      const LiveMachine* m = config.find(name);
      if (!m) return launch_usage_error("--only: no machine \"" + name + "\" in " + config.file);
      machines.push_back(m);
    }
  }
  if (o.via == LaunchOptions::Via::kSlurm)
    if (const int bad = check_slurm_allocation(o, machines)) return bad;
  try {
    ::signal(SIGPIPE, SIG_IGN);
    Reactor reactor;
    Supervisor supervisor(reactor, config, o);
    supervisor.start(machines);
    reactor.run();
    return supervisor.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "faultline live launch: " << e.what() << "\n";
    return 1;
  }
}

namespace {

constexpr const char* kSlurmConfigAbout =
    "Writes the effective config of a Slurm allocation (--slurm-job, default $SLURM_JOB_ID):\n"
    "CONFIG with every node of the allocation that no machine or standby runs on (its\n"
    "`slurm_node`, default its name) appended to \"standby\", in allocation order: name and\n"
    "slurm_node = the node, addr = its NodeAddr (scontrol show node), workdir (\"{node}\" = the\n"
    "node's name), nic and gpu_pci from CONFIG's \"slurm_standby\" template. Run the controller,\n"
    "`live launch --via slurm` and every other client with that file: they all number the\n"
    "machines the same way (job machines, then standbys, in its order). To FILE (written whole,\n"
    "then renamed into place; in CONFIG's directory when CONFIG has relative paths) or to\n"
    "stdout; one line on stderr says what was added. Exit 2, with one line, when a machine's\n"
    "node is not in the allocation, two machines share a node, a spare node's name is taken by\n"
    "a machine on another node, or spare nodes exist and CONFIG has no \"slurm_standby\".\n";

int slurm_config_error(const std::string& what) {
  std::cerr << "faultline live slurm-config: " << what << "\n";
  return 2;
}

}  // namespace

int slurm_config_main(const std::vector<std::string>& args) {
  std::string file, job, out;
  cli::FlagTable table("faultline live slurm-config",
                       "faultline live slurm-config CONFIG [options]", kSlurmConfigAbout);
  table.positional(&file);
  table.text("--slurm-job", "ID", "the allocation (default $SLURM_JOB_ID)", &job);
  table.text("--out", "FILE", "where to write it (default stdout)", &out);
  if (const int rc = table.parse({args.begin() + 1, args.end()}); rc >= 0) return rc;
  if (file.empty()) return table.usage_error("expected a CONFIG file");
  std::string text;
  {
    std::ifstream in(file);
    if (!in) return slurm_config_error(file + ": (file): cannot be read");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const Registry& registry = policies::builtin_registry();
  try {
    const LiveConfig c = parse_live_config(text, file, registry);
    if (const std::string err = resolve_slurm_job(&job); !err.empty())
      return slurm_config_error(err);
    std::vector<std::string> names;
    if (const std::string err = read_allocation(job, &names); !err.empty())
      return slurm_config_error(err);
    std::set<std::string> taken;
    for (const auto& m : c.machines) taken.insert(slurm_node_of(m));
    for (const auto& m : c.standby) taken.insert(slurm_node_of(m));
    std::vector<SlurmNode> allocation;
    for (const auto& name : names) {
      SlurmNode n{name, ""};
      // Only spare nodes need their address; one question each (there are few).
      if (!taken.count(name) && c.slurm_standby.given) {
        std::string said;
        const int rc = run_capture({"scontrol", "--oneliner", "show", "node", name}, &said);
        const auto addrs = parse_node_addrs(said);
        const auto it = addrs.find(name);
        if (rc != 0 || it == addrs.end())
          return slurm_config_error(
              "slurm job " + job + ": node " + name + ": no NodeAddr in `scontrol show node " +
              name + "` (" +
              (said.empty() ? "exit " + std::to_string(rc) : said.substr(0, said.find('\n'))) +
              ")");
        n.addr = it->second;
      }
      allocation.push_back(n);
    }
    std::vector<std::string> added;
    const std::string result =
        slurm_effective_config(text, file, out, allocation, job, registry, &added);
    if (out.empty()) {
      std::cout << result;
      std::cout.flush();
    } else {
      const std::string tmp = out + ".tmp";
      {
        std::ofstream f(tmp, std::ios::trunc);
        f << result;
        f.flush();
        if (!f) return slurm_config_error("--out " + out + ": cannot write " + tmp);
      }
      std::error_code ec;
      std::filesystem::rename(tmp, out, ec);
      if (ec) return slurm_config_error("--out " + out + ": " + ec.message());
    }
    std::string list;
    for (const auto& a : added) list += (list.empty() ? "" : ",") + a;
    std::cerr << "faultline live slurm-config: slurm job " << job << ": " << c.machines.size()
              << " machines, " << c.standby.size() + added.size() << " standbys (" << added.size()
              << " from spare nodes" << (list.empty() ? "" : ": " + list) << ")"
              << (out.empty() ? "" : " in " + out) << "\n";
    return 0;
  } catch (const LiveConfigError& e) {
    return slurm_config_error(e.what());
  } catch (const std::exception& e) {  // e.g. a file that changed between two reads
    return slurm_config_error(file + ": " + e.what());
  }
}

}  // namespace faultline::live
