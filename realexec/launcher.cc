#include "realexec/launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "policies/builtin.h"
#include "realexec/proc.h"
#include "realexec/reactor.h"

namespace faultline::live {
namespace {

constexpr double kFirstBackoffS = 1;
constexpr double kMaxBackoffS = 30;
constexpr double kHealthySessionS = 60;  // a session that lived this long resets the backoff
constexpr double kStopGraceS = 5;        // SIGTERM, then SIGKILL

const char* kUsage =
    "usage: faultline live launch CONFIG [--via local|ssh] [--only NAME,...] [--agent-bin PATH]\n"
    "         [--remote-config PATH] [--ssh-identity FILE] [--ssh-option KEY=VALUE]...\n"
    "         [--connect-timeout SECONDS] [--log-dir DIR]\n"
    "\n"
    "Starts `AGENT_BIN agent CONFIG --name NAME` for every machine and standby of CONFIG\n"
    "(or those --only names) and starts each again when it ends, after a backoff (1 s\n"
    "doubling to 30 s), except after exit 0 (the run was stopped), 2 (a bad config or\n"
    "token on that host) or 127 (no agent program there). --via ssh runs it on the machine's `ssh` host (default: its\n"
    "`addr`) as `ssh -tt -o BatchMode=yes`: the user's keys, never a password prompt.\n"
    "AGENT_BIN defaults to this program, --remote-config to CONFIG's absolute path (the\n"
    "same paths on every host); each machine's output goes to LOG_DIR/NAME.log (default\n"
    "STATE_DIR/launch). SIGTERM or SIGINT ends every session (the agents kill their ranks).\n";

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
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (!line.empty() || start == std::string::npos) break;
    end = start;
  }
  return line;
}

std::string host_of(const LiveMachine& m, const LaunchOptions& o) {
  if (o.via == LaunchOptions::Via::kLocal) return "local";
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
  bool over = false;      // ended for good
  int end_status = 0;     // its last wait status
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
  }

  int exit_code() const {
    bool refused = false, failed = false;
    for (const Session& s : sessions_) {
      if (WIFEXITED(s.end_status) && WEXITSTATUS(s.end_status) == 2) refused = true;
      else if (!stopping_ && !(WIFEXITED(s.end_status) && WEXITSTATUS(s.end_status) == 0)) failed = true;
    }
    return refused ? 2 : failed ? 1 : 0;
  }

 private:
  void say(const Session& s, const std::string& what) const {
    std::fprintf(stderr, "faultline launch: %s (%s): %s\n", s.machine->name.c_str(),
                 host_of(*s.machine, options_).c_str(), what.c_str());
    std::fflush(stderr);
  }

  std::string log_path(const Session& s) const { return options_.log_dir + "/" + s.machine->name + ".log"; }

  void launch(Session& s) {
    s.restart_timer = 0;
    if (stopping_) return finish(s);
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
    const bool for_good = stopping_ || !restartable(status);
    if (for_good) {
      say(s, why + (stopping_ ? "" : "; not restarted"));
      return finish(s);
    }
    if ((reactor_.now() - s.started).to_seconds() >= kHealthySessionS) s.backoff_s = kFirstBackoffS;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s.backoff_s);
    say(s, why + "; starting it again in " + buf + " s");
    s.restart_timer = reactor_.add_timer(Duration::seconds(s.backoff_s), [this, &s] { launch(s); });
    s.backoff_s = std::min(kMaxBackoffS, 2 * s.backoff_s);
  }

  void finish(Session& s) {
    s.over = true;
    if (std::all_of(sessions_.begin(), sessions_.end(), [](const Session& x) { return x.over; })) reactor_.stop();
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
};

int usage_error(const std::string& what) {
  std::cerr << "faultline live launch: " << what << "\n(run 'faultline live launch --help' for usage)\n";
  return 2;
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
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%d", std::max(1, static_cast<int>(o.connect_timeout_s + 0.5)));
  std::vector<std::string> cmd = {"ssh", "-tt", "-o", "BatchMode=yes", "-o", std::string("ConnectTimeout=") + timeout,
                                  "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3"};
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
  }
  return "its agent ended: " + describe_wait_status(status) + said;
}

int launch_main(const std::vector<std::string>& args) {
  if (args.size() >= 2 && (args[1] == "--help" || args[1] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.size() < 2 || args[1].rfind("--", 0) == 0) return usage_error("expected a CONFIG file");
  LaunchOptions o;
  std::string only;
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return usage_error(a + ": unknown option or missing value");
    const std::string& v = args[++i];
    if (a == "--via") {
      if (v != "local" && v != "ssh") return usage_error("--via: expected local or ssh, got \"" + v + "\"");
      o.via = v == "ssh" ? LaunchOptions::Via::kSsh : LaunchOptions::Via::kLocal;
    } else if (a == "--only") {
      only = v;
    } else if (a == "--agent-bin") {
      o.agent_bin = v;
    } else if (a == "--remote-config") {
      o.remote_config = v;
    } else if (a == "--ssh-identity") {
      o.identity_file = v;
    } else if (a == "--ssh-option") {
      if (v.find('=') == std::string::npos || v.front() == '-')
        return usage_error("--ssh-option: expected KEY=VALUE, got \"" + v + "\"");
      o.ssh_options.push_back(v);
    } else if (a == "--connect-timeout") {
      const auto s = parse_seconds(v);
      if (!s) return usage_error("--connect-timeout: expected seconds in (0, 3600], got \"" + v + "\"");
      o.connect_timeout_s = *s;
    } else if (a == "--log-dir") {
      o.log_dir = v;
    } else {
      return usage_error("unknown option \"" + a + "\"");
    }
  }
  LiveConfig config;
  try {
    config = load_live_config(args[1], policies::builtin_registry());
  } catch (const LiveConfigError& e) {
    std::cerr << "faultline live launch: " << e.what() << "\n";
    return 2;
  }
  config.file = std::filesystem::absolute(config.file).string();
  if (o.agent_bin.empty()) o.agent_bin = self_exe();
  if (o.log_dir.empty()) o.log_dir = config.state_dir + "/launch";
  std::error_code ec;
  std::filesystem::create_directories(o.log_dir, ec);
  if (ec) return usage_error("--log-dir " + o.log_dir + ": " + ec.message());

  std::vector<const LiveMachine*> machines;
  if (only.empty()) {
    for (const auto& m : config.machines) machines.push_back(&m);
    for (const auto& m : config.standby) machines.push_back(&m);
  } else {
    for (const auto& name : split_names(only)) {
      const LiveMachine* m = config.find(name);
      if (!m) return usage_error("--only: no machine \"" + name + "\" in " + config.file);
      machines.push_back(m);
    }
  }
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

}  // namespace faultline::live
