// The live configuration: which machines run the job and which wait as warm standbys,
// how to launch the job (one argv per code version), its layout, and the policy stack.
//
// One JSON file is shared by the controller (`faultline live CONFIG`) and every agent
// (`faultline agent CONFIG --name NAME`). Agents take only the name of a code version
// from the network and look its argv up here, so nothing a peer sends is ever executed
// as given. Relative paths are resolved against the config file's directory.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "policies/api/cluster_view.h"
#include "policies/api/policy.h"
#include "policies/api/registry.h"

namespace faultline::live {

// One line, always: control characters a config's keys or values carry (a key "a\nb") are
// escaped (\n, \xNN) so that the error stays one line in a terminal or a journal.
class LiveConfigError : public std::runtime_error {
 public:
  explicit LiveConfigError(const std::string& what) : std::runtime_error(one_line(what)) {}

 private:
  static std::string one_line(const std::string& s);
};

struct LiveMachine {
  std::string name;                  // unique; the agent's --name
  std::string addr = "127.0.0.1";    // address the machine's ranks bind and are reached on
  std::string workdir;               // machine-local disk: ckpt/, faults, logs/
  std::string nic;                   // interface watched by NIC inspection ("" = none)
  std::vector<std::string> gpu_pci;  // PCI bus ids of its GPUs, to match kernel Xid lines
  std::string ssh;                   // "[user@]host" for `live launch --via ssh` ("" = addr)
  std::string slurm_node;            // Slurm node for `live launch --via slurm` ("" = name)
};

struct LiveJob {
  std::map<std::string, std::vector<std::string>> versions;  // code version -> argv
  std::string version;                                       // version started first
  int gpus_per_machine = 1;                                  // ranks per machine
  int tp = 1;
  int pp = 1;
  int dp = 0;  // 0: machines * gpus_per_machine / (tp * pp)
  int master_port = 29500;
  double nominal_step_time_s = 0.2;        // used to turn checkpoint intervals into steps
  std::map<std::string, std::string> env;  // extra environment for every rank
  int replay_steps = 20;                   // steps of one replay run (RunReplay)
  int bitwise_steps = 1;                   // steps of the bit-wise alignment probe
  double startup_timeout_s = 120;          // launch to every rank restored, before StartFailed
  // The job's code runs the job library's replica groups (python/faultline/replicas.py): a
  // policy may then enable them (EnableReplicaGroups). One rank per machine and per replica.
  bool replica_groups = false;
  // The job's code re-forms its process group in place (faultline.Job's rebuild and recover,
  // python/faultline/job.py): an in-place StartJob (recovery=flash) keeps the ranks that hold
  // their state, relaunches the others, and re-forms the group on job.master_port + 1 +
  // (generation % 2). Stops spare the ranks that hold (kHoldGraceS for the others to say so).
  bool in_place = false;
};

// The repair pipeline (as the simulator's RepairSpec): a machine taken out of the job, or a
// standby whose agent came back, is checked after `check_after_s` by the stop-time probes
// (gpu_diag, then bit-wise against the reference run) and returns to the standby pool when
// they pass and it raised no inspection alert meanwhile; a failed check is retried every
// `retry_after_s`, `max_checks` times, then left to a human (`faultline live inject
// --fault repair`). A machine evicted `retire_after` times is retired for good (0: never).
struct LiveRepair {
  double check_after_s = 10;
  double retry_after_s = 60;
  int max_checks = 3;
  int retire_after = 3;
};

// The template of the standbys `faultline live slurm-config` makes of an allocation's spare
// nodes (nodes no machine names): each becomes a standby named after its node, on that node,
// at its NodeAddr, with this workdir ("{node}" replaced by the node's name, then resolved as
// a machine's workdir), nic and gpu_pci. Absent from the config: spare nodes stay unused.
struct LiveSlurmStandby {
  bool given = false;
  std::string workdir = "work/{node}";  // as written, before {node} is replaced
  std::string nic;
  std::vector<std::string> gpu_pci;
};

struct LiveConfig {
  std::string file;  // as given, for messages
  std::string dir;   // its directory
  std::string description;
  std::string controller_host = "127.0.0.1";
  int controller_port = 7700;
  std::string token_file;
  // The read-only credential: a client proving this token may ask for status, nothing else.
  // Empty: none (status then needs token_file).
  std::string status_token_file;
  // Prometheus endpoint `GET /metrics` (metrics_http.h), on its own address; port 0: none.
  std::string metrics_host;
  int metrics_port = 0;
  // The scraper's credential: a request must carry "Authorization: Bearer <token>". It
  // grants reading the metrics and nothing else. Empty: the endpoint is open.
  std::string metrics_token_file;
  // After the run ends, /metrics keeps serving the final values this long, so that a
  // scrape sees them (at least twice the scrape interval); then the controller exits.
  double metrics_linger_s = 0;
  std::vector<LiveMachine> machines;  // slot order
  std::vector<LiveMachine> standby;
  LiveJob job;
  std::string stack = "byterobust";
  Params params;                // resolved against the stack's declared parameters
  ParamValues param_overrides;  // as written: numbers, and module names for a choice
  std::uint64_t seed = 1;
  std::string state_dir;     // journal.json, events.jsonl
  std::string trainjob_bin;  // program for bit-wise probes, all-gather and replay
  std::string probe_bin;     // faultline-probe ("" = none: GPU probes pass as no_gpu)
  double heartbeat_s = 1;    // agent heartbeat period
  LiveRepair repair;
  // Silence after which a machine whose host does not answer (no TCP acknowledgement since
  // the silence began: down, cut off) is reported lost.
  double heartbeat_timeout_s = 5;
  // Silence after which a machine is reported lost although its host still answers (the
  // agent's process stopped or starved: a checkpoint save freezing the host). At least
  // heartbeat_timeout_s. docs/running-live.md, "Heartbeats and timeouts".
  double stalled_agent_timeout_s = 60;
  LiveSlurmStandby slurm_standby;  // "slurm_standby"; read by `live slurm-config` only

  // The cluster and layout the policies see (ClusterSpec of policies/api).
  ClusterSpec cluster_spec() const;
  // The machine entry named `name` (job or standby), or nullptr.
  const LiveMachine* find(const std::string& name) const;
  // The machine entry of id `m`: the job's machines 0..M-1 in slot order, then the standbys
  // (m is one of them).
  const LiveMachine& machine(MachineId m) const;
};

// JSON as every live file is read: a repeated key or a number out of double range is a
// LiveConfigError ("FILE: PATH: ..."), like any other syntax error.
nlohmann::json parse_strict_json(const std::string& text, const std::string& file);

// Loads and validates; unknown keys are errors. Throws LiveConfigError with a one-line
// message "FILE: FIELD: what was expected".
LiveConfig load_live_config(const std::string& path, const Registry& registry);
LiveConfig parse_live_config(const std::string& text, const std::string& file,
                             const Registry& registry);

}  // namespace faultline::live
