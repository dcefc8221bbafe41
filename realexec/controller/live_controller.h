// The live controller: accepts agent and operator connections, checks their token,
// tracks heartbeats, and hands everything else to LiveWorld, which runs the policy.
//
// Agents dial in and say hello with the shared token and their machine name; a
// connection without the right token is refused and the refusal is logged. Operator
// clients (`faultline live inject|update|status|stop`) use the same protocol with
// role "client". A machine whose connection drops is reported lost; so is one whose agent
// goes silent for heartbeat_timeout_s while its host does not answer TCP keepalive probes,
// or for stalled_agent_timeout_s while it does (docs/running-live.md, "Heartbeats and
// timeouts").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "realexec/controller/acceptor.h"
#include "realexec/controller/live_world.h"
#include "realexec/controller/metrics_http.h"
#include "realexec/controller/note_window.h"
#include "realexec/controller/session_table.h"
#include "realexec/controller/state_dir_lock.h"
#include "realexec/controller/storage_watch.h"
#include "realexec/live_config.h"
#include "realexec/net/auth.h"
#include "realexec/net/messages.h"
#include "realexec/net/wire.h"

namespace faultline::live {

// `faultline live run` exits with this after the policy ended the run (EndRun, e.g. the
// verdict "code_or_data": do not requeue, the code or the data is at fault).
inline constexpr int kExitEndedRun = 3;
// ... with this when event log records were lost (not merely written late: a full disk
// outlasted the in-memory backlog, or records still waited at exit) and the run was not
// ended by the policy (kExitEndedRun takes precedence: it decides whether to requeue).
// The last line of its output says how many.
inline constexpr int kExitLostRecords = 4;

class Controller final : public MachineLink {
 public:
  // Throws std::runtime_error (one line) when the token, the state dir, the journal or
  // the listening socket cannot be set up.
  Controller(const LiveConfig& config, const Registry& registry, Reactor& reactor, bool fresh);
  ~Controller() override;

  // Starts listening and the policy; returns once the reactor stops. `duration_s` > 0
  // stops the run after that long (measured from this call). Returns the exit code.
  int run(double duration_s);

  bool send(MachineId m, const nlohmann::json& msg) override;
  bool connected(MachineId m) const override;
  double silent_s(MachineId m) const override;

 private:
  void on_accept();
  void on_message(std::uint64_t sid, const nlohmann::json& msg);
  void on_close(std::uint64_t sid, const std::string& why);
  void on_hello(std::uint64_t sid, const Hello& hello);
  void on_authenticated(std::uint64_t sid, const Auth& auth);
  // The header (when the log is new) and the notes on what this controller resumed.
  void begin_log(const Registry& registry, const std::string& log_path, bool new_log,
                 bool reordered);
  // Writes the event log's header at run time `t_s`.
  void write_header(const Registry& registry, double t_s);
  void on_client(std::uint64_t sid, Session& s, const ClientRequest& request);
  void note_refusal(Session& s, const std::string& reason);
  void note_unauthenticated(const std::string& text);
  // A proof that did not match a token: always said, a few a minute one by one, the rest
  // summed up at the end of the minute.
  void note_bad_credential(const std::string& text);
  // A note about a client's session (refused requests, sessions closed to make room): the
  // first kSessionLinesPerMinute of each access a minute, then one line with the count.
  void note_session(bool read_only, const std::string& text);
  void arm_client_idle(std::uint64_t sid);
  // Closes unauthenticated session `sid` to make room for another.
  void make_room_unauthenticated(std::uint64_t sid);
  // False (and accepts paused) when kMaxUnauthenticated handshakes, all young, are under way.
  bool room_for_handshake();
  // `sid` is no longer an unauthenticated connection (authenticated, refused or closed).
  void leave_unauthenticated(std::uint64_t sid, const Session& s);
  void make_room_clients(bool read_only);
  std::string config_machine_name(MachineId m) const;
  MachineId machine_id(const std::string& name) const;  // kNoMachine: not in the config
  // Whether every machine the policy waits for has its agent connected (before the start).
  bool all_awaited_connected();
  void arm_heartbeat(std::uint64_t sid);
  // Closes an agent's connection silent for heartbeat_timeout_s whose host does not answer,
  // or silent for stalled_agent_timeout_s; else looks again later.
  void check_heartbeat(std::uint64_t sid);
  void refuse(std::uint64_t sid, const std::string& why);
  void shutdown(const std::string& why);
  bool awaited(MachineId m) const;  // the policy waits for this machine's agent before it starts
  void start_world();
  // Raises the soft fd limit to the hard one; says so on stderr when the hard one is below
  // what the config can hold at once.
  void check_fd_limit();
  // Sends one reply to a client; one over the frame limit becomes a done with ok false saying
  // so (never dropped in silence).
  void send_reply(Session& s, const nlohmann::json& reply);
  // The status document: one done, or (`parts`: the client takes them) status_part messages
  // each under the frame limit and then the done (PROTOCOL.md, "Status in parts").
  void send_status(Session& s, const nlohmann::json& req, bool parts);
  // Listens on metrics_listen (when set) and serves LiveWorld's metrics there.
  void start_metrics();
  // Retries what waits to be written (the event log's backlog, a failed journal save) and
  // reports an outage of either on stderr: one line when it begins, one when it ends.
  void watch_storage();

  // The caller's config with its machines in the order of the run it resumes (a copy).
  const LiveConfig config_;
  Reactor& reactor_;
  std::string token_;
  std::string status_token_;  // the read-only credential; empty: none
  std::unique_ptr<traces::EventLogWriter> log_;
  std::unique_ptr<Journal> journal_;
  StorageWatch storage_;  // the event log's backlog, journal saves, STATE_DIR/outage
  std::unique_ptr<LiveWorld> world_;
  Acceptor acceptor_;
  NoteWindow bad_credential_notes_;         // refusals for a bad proof
  NoteWindow session_notes_[2];             // about clients' sessions: admin, read-only
  StateDirLock lock_;                       // STATE_DIR, held for the controller's life
  std::unique_ptr<MetricsServer> metrics_;  // null: no metrics_listen
  SessionTable sessions_;
  std::unordered_map<std::string, MachineId> machine_ids_;  // job machines, then standbys
  MachineId await_cursor_ = 0;
  bool shutting_down_ = false;
  std::uint64_t unauthenticated_ = 0;  // refused or failed handshakes
  bool world_started_ = false;
  std::uint64_t heartbeats_ = 0;      // agent messages received, for the load line at exit
  std::uint64_t agent_messages_ = 0;  // the others
  Instant run_started_{};
};

}  // namespace faultline::live
