// `faultline live launch CONFIG`: starts one agent per machine of a live config and keeps it
// running, as a small cluster's operator would otherwise do by hand or with systemd.
//
// Three ways in: `local` (the agents are children of the launcher, for one machine), `ssh`
// (`ssh -tt HOST faultline-live agent CONFIG --name NAME` per machine, with the user's keys
// and BatchMode, so a missing key is an error, never a password prompt) and `slurm` (one
// job step per machine, below). Each machine's session is supervised: when it ends, one
// line says which machine, which host and why (for ssh, the reason ssh gave: unreachable,
// refused, no key; for slurm, srun's), and it is started again
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
//
// `slurm` runs inside a Slurm allocation (SLURM_JOB_ID, or --slurm-job): each machine's
// agent is one job step on its node (its `slurm_node`, default its name), `srun --jobid=J
// --nodes=1 --ntasks=1 --nodelist=NODE --overlap AGENT ...`, so Slurm
// accounts for it and scancel ends it. Every machine's node must be in the allocation
// (checked before anything starts, `scontrol show hostnames`); nodes of the allocation that
// no machine names are reported as unused (`faultline live slurm-config`, below, writes the
// config with them as standbys, for the controller and the launcher to read alike). The launcher
// follows the controller's event log (STATE_DIR/events.jsonl): a machine the controller evicts has
// its step ended, is never given a step again, and its node is drained with the reason (`scontrol
// update nodename=NODE state=drain reason="faultline: ..."`); where draining is not permitted, one
// line says so and the launcher carries on. When srun refuses a step and squeue shows the
// allocation no longer RUNNING (or Slurm no longer knows it), every session is ended (exit 1), and
// machines evicted then (their agents lost with it) are not drained; squeue not reaching slurmctld
// is not taken for the end of the allocation.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "realexec/live_config.h"

namespace faultline::live {

struct LaunchOptions {
  enum class Via { kLocal, kSsh, kSlurm };
  Via via = Via::kLocal;
  std::vector<std::string> only;         // machine names; empty: every machine and standby
  std::string agent_bin;                 // program run as `BIN agent CONFIG --name NAME`
  std::string remote_config;             // ssh: the config's path on the hosts
  std::string identity_file;             // ssh -i
  std::vector<std::string> ssh_options;  // ssh -o, each "Key=Value"
  double connect_timeout_s = 5;          // ssh ConnectTimeout
  std::string log_dir;                   // one log per machine: NAME.log
  std::string slurm_job;                 // slurm: the allocation's job id
  bool slurm_drain = true;               // slurm: drain an evicted machine's node
};

// The command that starts machine `m`'s agent (an ssh command line for kSsh).
std::vector<std::string> agent_command(const LiveConfig& config, const LiveMachine& m,
                                       const LaunchOptions& options);

// The Slurm node a machine runs on: its `slurm_node`, else its name.
std::string slurm_node_of(const LiveMachine& m);

// Node names from `scontrol show hostnames` output: one a line, blanks trimmed.
std::vector<std::string> parse_hostnames(const std::string& text);

// Checks that every machine's node is in the allocation and no two machines share one.
// Returns "" or a one-line error naming the machine and its node; *spare gets the nodes
// of the allocation no machine names, in allocation order.
std::string check_slurm_nodes(const std::vector<const LiveMachine*>& machines,
                              const std::vector<std::string>& allocation, const std::string& job,
                              std::vector<std::string>* spare);

// A node of a Slurm allocation: its name and its NodeAddr (`scontrol show node`).
struct SlurmNode {
  std::string name;
  std::string addr;
};

// NodeName -> NodeAddr from `scontrol --oneliner show node` output (one node a line, its
// fields "Key=Value" separated by blanks). Nodes without a NodeAddr are left out.
std::map<std::string, std::string> parse_node_addrs(const std::string& text);

// The effective config of `faultline live slurm-config`: CONFIG's JSON text (`text`, read
// from `file`) with every node of `allocation` (job `job`, in allocation order) that no
// machine or standby runs on appended to "standby": name and slurm_node = the node, addr =
// its NodeAddr, workdir/nic/gpu_pci from CONFIG's "slurm_standby" template. The result is
// for the file `out_file` ("" = `file`) and is refused when one of CONFIG's relative paths
// would resolve to another place from there. Requires every machine's node to be in the
// allocation. Returns the JSON text (keys in CONFIG's order, then a newline); the appended
// names in *added. Throws LiveConfigError, one line "FILE: FIELD: what was expected".
std::string slurm_effective_config(const std::string& text, const std::string& file,
                                   const std::string& out_file,
                                   const std::vector<SlurmNode>& allocation, const std::string& job,
                                   const Registry& registry, std::vector<std::string>* added);

// `faultline live slurm-config CONFIG [--slurm-job ID] [--out FILE]`; `args` starts with
// "slurm-config". Returns 0, or 2 with one line on stderr (bad usage, config, allocation).
int slurm_config_main(const std::vector<std::string>& args);

// `scontrol update nodename=NODE state=drain reason=faultline: REASON` (one argv word each).
std::vector<std::string> drain_command(const std::string& node, const std::string& reason);

// The machines an event log line evicts (by name; ids are job machines then standbys, in
// config order), with the controller's reason in *reason. Empty for any other line.
std::vector<std::string> evicted_by(const LiveConfig& config, const std::string& line,
                                    std::string* reason);

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
