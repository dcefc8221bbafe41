// The per-machine agent of live mode (`faultline agent CONFIG --name NAME`).
//
// One agent runs on every machine, job or standby. It dials the controller and keeps
// dialling (0.5 s doubling to 5 s) for as long as it lives; the training ranks it
// launched keep running while it is disconnected, their exits are queued and delivered
// after the next welcome. It executes the controller's requests (launch, kill, inspect,
// probe, capture, replay, inject, shutdown; see realexec/PROTOCOL.md) on one Reactor
// thread and answers each with `done` or `error`. Everything from the network is type-
// and range-checked; programs come from the local config (a version name selects an
// argv), and children are started with execve, never through a shell.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "realexec/agent/agent_host.h"
#include "realexec/agent/inspect.h"
#include "realexec/agent/stack_capture.h"
#include "realexec/live_config.h"
#include "realexec/net/auth.h"
#include "realexec/net/messages.h"
#include "realexec/net/proc.h"
#include "realexec/net/reactor.h"
#include "realexec/net/wire.h"

namespace faultline::live {

namespace agent_detail {
struct LaunchPlan;     // a launch request, decoded (agent_ranks.cc)
struct ReplicaLaunch;  // its replica groups
}  // namespace agent_detail

// Knobs that are not part of the live config: paths tests replace, and timings.
struct AgentOptions {
  std::string sysfs_root = "/sys";
  std::string kmsg_path = "/dev/kmsg";
  std::string ip_program = "ip";
  StackCaptureOptions stacks;
  Duration backoff_min = Duration::millis(500);
  Duration backoff_max = Duration::seconds(5);
  Duration kill_timeout = Duration::seconds(30);       // reaping after kill/shutdown
  Duration handshake_timeout = Duration::seconds(10);  // connect -> welcome, else redial
  std::size_t max_queued_exits = 4096;                 // kept while disconnected
  // One line per call; default: stderr, prefixed "faultline agent NAME: ".
  std::function<void(const std::string&)> log;
  // The process boundary; null: real processes (AgentHost' defaults).
  std::shared_ptr<AgentHost> host;
  // Called once when the agent finishes (shutdown: 0, machine_down: 137); null: the agent
  // stops the reactor. Many agents sharing one reactor (the virtual fleet) set it.
  std::function<void(int)> on_finish;
};

class Agent {
 public:
  // `config` must outlive the agent and hold a machine (job or standby) named `name`;
  // throws LiveConfigError ("FILE: machines: no machine named NAME") otherwise.
  // `token` is the shared secret (load_token).
  Agent(Reactor& r, const LiveConfig& config, std::string name, std::string token,
        AgentOptions options = {});
  // Kills (SIGKILL, process group) every rank and child still running.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Opens the kernel log and dials the controller. Call once.
  void start();

  // True after `shutdown` (exit code 0) or `machine_down` (137); the agent has then
  // called Reactor::stop().
  bool finished() const { return finished_; }
  int exit_code() const { return exit_code_; }

  // For tests and logs.
  bool connected() const { return welcomed_; }
  std::int64_t generation() const { return gen_; }
  std::map<int, pid_t> rank_pids() const;  // rank -> pid of the ranks alive

 private:
  struct Rank;
  struct PendingKill;
  struct RelayedProbe;  // inter_all_gather whose rendezvous blob the controller relays
  struct PendingFault;  // a fault-file directive waiting for the job's acknowledgement
  enum class Delivery { kQueue, kDrop };

  // Connection.
  void dial();
  void schedule_redial();
  void on_message(const nlohmann::json& m);
  void on_close(const std::string& why);
  void send(nlohmann::json msg, Delivery d);
  // A rank's report to the controller; step reports through the rank's token bucket.
  void forward_report(Rank& rk, nlohmann::json msg, bool step);
  void flush_step(Rank& rk);
  nlohmann::json auth_fields() const;  // what the auth message tells (pid, gen, ranks)
  void heartbeat_tick();

  // Requests.
  void reply_done(std::uint64_t epoch, std::int64_t req, Instant started, nlohmann::json body);
  void reply_error(std::int64_t req, const std::string& reason);
  void handle_launch(const nlohmann::json& m, std::int64_t req);
  // handle_launch's parts: the job's work directories ("" or why one cannot be made); a
  // holding rank kept into generation `gen` (in place); rank `rank`'s environment; the rank
  // spawned with `argv` and `env`, its pid in `pids` ("" or why it did not start).
  std::string make_workdirs() const;
  void keep_holding_rank(int rank, std::int64_t gen, nlohmann::json& pids);
  std::map<std::string, std::string> rank_env(const agent_detail::LaunchPlan& l, int rank,
                                              int local) const;
  std::string spawn_rank(int rank, int local, std::int64_t gen,
                         const std::vector<std::string>& argv,
                         std::map<std::string, std::string> env, nlohmann::json& pids);
  // A rank of generation `gen` just spawned (`out`): kept with our ends of its report socket
  // and stack dump, its stderr and exit watched.
  void adopt_rank(int rank, int local_rank, std::int64_t gen, const Spawned& out, int report_fd,
                  int stack_fd, const std::string& log_path);
  // Launches once the ranks being killed are reaped, or fails the launch at `until`.
  void launch_after_reaping(const nlohmann::json& m, std::int64_t req, Instant started,
                            Instant until);
  void handle_kill(const nlohmann::json& m, std::int64_t req);
  // A kill with spare_holding (in-place restarts): the ranks holding in place are spared; the
  // others have until `grace_until` to hold, then are killed; the reply names the spared ones.
  // Ranks of a generation after `gen` (re-formed by a start while this kill waited) are not
  // this kill's.
  void kill_sparing(std::int64_t req, std::uint64_t epoch, Instant started, Instant grace_until,
                    bool killed, std::optional<std::int64_t> gen);
  // In place: the re-form directive of generation `gen` for holding rank `rank`, written
  // atomically to reform_file(rank); "" or the error.
  std::string write_reform(int rank, std::int64_t gen, const std::string& master_addr,
                           std::int64_t master_port) const;
  // In place: why this machine's running ranks cannot stay for a launch of `wanted` ((rank,
  // local_rank) pairs): one that does not hold, or is not wanted; "" when they can.
  std::string in_place_refusal(const std::vector<std::pair<int, int>>& wanted) const;
  std::string reform_file(int rank) const {
    return machine_->workdir + "/reform." + std::to_string(rank) + ".json";
  }
  // Replica groups: writes the quorum the controller sends to the replicas' quorum file.
  void handle_quorum(const nlohmann::json& m, std::int64_t req);
  std::string quorum_file() const { return machine_->workdir + "/quorum.json"; }
  // Writes `q` to quorum_file() atomically (temporary file, fsync, rename); "" or the error.
  // Writes quorum `q` of generation `gen`, signed ("mac": HMAC-SHA256 with the generation's
  // FAULTLINE_QUORUM_KEY over its fields, quorum_mac()), so that the replicas believe no
  // quorum file another hand wrote.
  std::string write_quorum(const Quorum& q, std::int64_t gen) const;
  void handle_inspect(const nlohmann::json& m, std::int64_t req);
  void handle_probe(const nlohmann::json& m, std::int64_t req);
  // inter_all_gather with `rendezvous: true` and a probe_bin: faultline-probe nccl across the
  // machines, its NCCL id carried by the control channel (PROTOCOL.md, "Probes across machines").
  void run_relayed_all_gather(const nlohmann::json& m, std::int64_t req, Instant started,
                              std::int64_t deadline_ms, std::map<std::string, std::string> env);
  // The CPU trainjob all-gather of a relayed probe that found no GPU; `probe_body` is its reply so
  // far.
  void run_fallback_all_gather(std::uint64_t epoch, std::int64_t req, Instant started,
                               std::int64_t left_ms, std::map<std::string, std::string> env,
                               nlohmann::json probe_body);
  // Rank 0: sends the blob its probe published, once, if the file is there.
  void publish_rendezvous(RelayedProbe& p);
  void watch_rendezvous(const std::shared_ptr<RelayedProbe>& p);
  void handle_rendezvous(const nlohmann::json& m, std::int64_t req);
  void handle_capture(const nlohmann::json& m, std::int64_t req);
  void handle_replay(const nlohmann::json& m, std::int64_t req);
  // An inject is applied after every message already received (a `cancel` of it among them
  // wins), then by handle_inject.
  void defer_inject(const nlohmann::json& m, std::int64_t req);
  void handle_inject(const nlohmann::json& m, std::int64_t req);
  // crash, hang, nan, slow, sdc: the directive goes into the fault file with an id, and the
  // reply waits for the job's acknowledgement (PROTOCOL.md, "Fault acknowledgement").
  void inject_directive(const nlohmann::json& m, std::int64_t req, const std::string& fault);
  void handle_cancel(const nlohmann::json& m, std::int64_t req);
  // A rank's "fault" report: confirms the pending directive of that id, or is refused.
  void on_fault_ack(Rank& rk, const RankReport& r);
  void expire_fault(const std::string& id);
  // Takes `p`'s directive out of the fault file (it never acts late) and, with `reply`, answers
  // its inject with ok: false and `why`.
  void withdraw_fault(PendingFault& p, const std::string& why, bool reply);
  // Every pending directive withdrawn (the connection closed, a repair).
  void withdraw_all_faults(const std::string& why, bool reply);
  void handle_shutdown(const nlohmann::json& m, std::int64_t req);

  // Ranks.
  void on_rank_report(Rank& rk);
  void on_rank_stderr(Rank& rk);
  void note_bad_report(Rank& rk, const std::string& reason);
  void on_rank_exit(int rank, int wait_status);
  void kill_all_ranks();
  void settle_kills();
  void close_rank_fds(Rank& rk);
  Rank* local_rank(int local_rank);

  // Inspection.
  void inspect_tick(const std::string& kind);
  void drain_kernel_log();
  void alert(const std::string& kind, const std::string& detail);

  // Children other than ranks.
  std::map<std::string, std::string> base_env() const;
  // FAULTLINE_RENDEZVOUS_KEY for the ranks of one rendezvous (`what`: the launch's generation,
  // or the probe's or replay's address, port and world size): HMAC-SHA256 of the shared token
  // over it, the same on every machine, so rank 0 tells its ranks' registrations from a
  // stranger's (PROTOCOL.md, "Rank rendezvous").
  std::string rendezvous_key(const std::string& what) const;
  // FAULTLINE_QUORUM_KEY of generation `gen`: the key of its quorum files' signatures.
  std::string quorum_key(std::int64_t gen) const;
  std::string child_cwd() const;  // the workdir when it exists, else the agent's
  void require_capacity();        // throws BadMessage when too many children run
  void run_tracked(SpawnSpec spec, Duration deadline, std::function<void(const ChildResult&)> done);
  void finish(int code);
  void log(const std::string& line) const;

  Reactor& r_;
  const LiveConfig& config_;
  const LiveMachine* machine_ = nullptr;
  std::string name_;
  std::string token_;
  std::unique_ptr<PeerHandshake> handshake_;  // of the current connection
  AgentOptions options_;
  std::shared_ptr<AgentHost> host_;  // options_.host or the real one
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  std::unique_ptr<Conn> conn_;
  std::uint64_t epoch_ = 0;    // incremented per connection; replies go to their own
  std::uint64_t refused_ = 0;  // requests refused on this connection
  bool welcomed_ = false;
  std::string role_;
  Duration backoff_;
  std::uint64_t redial_timer_ = 0;
  std::uint64_t heartbeat_timer_ = 0;
  std::uint64_t dropped_for_backlog_ =
      0;                               // reports and alerts dropped while the controller is behind
  std::deque<nlohmann::json> queued_;  // exit messages waiting for a connection

  std::int64_t gen_ = 0;
  std::map<int, std::unique_ptr<Rank>> ranks_;  // by global rank
  std::vector<std::unique_ptr<PendingKill>> kills_;
  std::vector<std::weak_ptr<ChildRun>> children_;
  std::map<std::int64_t, std::shared_ptr<RelayedProbe>> relayed_;        // by the probe's req
  std::map<std::string, std::unique_ptr<PendingFault>> pending_faults_;  // by directive id
  std::deque<std::string> confirmed_faults_;  // ids confirmed lately (a restarted rank re-acks)
  std::set<std::int64_t> cancelled_injects_;  // reqs cancelled before they were applied

  KernelLogReader kmsg_;
  std::string kmsg_error_;
  bool kmsg_error_said_ = false;
  std::map<std::string, std::uint64_t> inspect_timers_;  // kind -> timer
  std::map<std::string, Duration> inspect_every_;

  bool shutting_down_ = false;
  bool finished_ = false;
  int exit_code_ = 0;
};

}  // namespace faultline::live
