// `faultline live launch CONFIG`: starts one agent per machine of a live config and keeps it
// running, as a small cluster's operator would otherwise do by hand or with systemd.
//
// Two ways in: `local` (the agents are children of the launcher, for one machine) and `ssh`
// (`ssh -tt HOST faultline-live agent CONFIG --name NAME` per machine, with the user's keys
// and BatchMode, so a missing key is an error, never a password prompt). Each machine's
// session is supervised: when it ends, one line says which machine, which host and why
// (for ssh, the reason ssh gave: unreachable, refused, no key), and it is started again
// after a backoff (1 s, doubling to 30 s), except after exit 2 (a bad command line, config
// or token on that host), 127 (no agent program there: a restart cannot fix either) and
// exit 0 (the run was stopped). The
// launcher exits when every session has ended for good; SIGTERM or SIGINT ends them all.
//
// ssh gets a pseudo-terminal (-tt) so that a dropped connection hangs the remote session
// up: the agent gets SIGHUP, kills its ranks and exits, as it would if the machine died,
// instead of running on unsupervised beside the agent a restart brings up. The remote
// command line is built from the local config only, each word single-quoted for the
// remote shell; host names that could be read as ssh options are refused by the config.
#pragma once

#include <string>
#include <vector>

#include "realexec/live_config.h"

namespace faultline::live {

struct LaunchOptions {
  enum class Via { kLocal, kSsh };
  Via via = Via::kLocal;
  std::vector<std::string> only;         // machine names; empty: every machine and standby
  std::string agent_bin;                 // program run as `BIN agent CONFIG --name NAME`
  std::string remote_config;             // ssh: the config's path on the hosts
  std::string identity_file;             // ssh -i
  std::vector<std::string> ssh_options;  // ssh -o, each "Key=Value"
  double connect_timeout_s = 5;          // ssh ConnectTimeout
  std::string log_dir;                   // one log per machine: NAME.log
};

// The command that starts machine `m`'s agent (an ssh command line for kSsh).
std::vector<std::string> agent_command(const LiveConfig& config, const LiveMachine& m,
                                       const LaunchOptions& options);

// `word` quoted for a POSIX shell: 'it'\''s'.
std::string shell_quote(const std::string& word);

// One line on how a session ended, from its wait status and the last line it printed.
std::string describe_session_end(const LaunchOptions& options, int wait_status,
                                 const std::string& last_line);

// `faultline live launch CONFIG [options]`; `args` starts with "launch". Returns the exit
// code: 0 when every session ended with exit 0 or by SIGTERM/SIGINT, 2 for bad usage or a
// session that refused its config, 1 otherwise.
int launch_main(const std::vector<std::string>& args);

}  // namespace faultline::live
