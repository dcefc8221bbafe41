// The messages of live mode, decoded once, strictly, where they enter a process.
//
// Three channels carry input that live mode must treat as hostile:
//   peer -> controller   the first message of a connection (decode_hello), then an agent's
//                        messages (decode_agent_message) or an operator client's requests
//                        (decode_client_request);
//   rank -> agent        report lines a training rank writes on FAULTLINE_REPORT_FD
//                        (parse_rank_report_line);
//   controller -> agent  requests, read by the agent's handlers with the field reader below.
// A decoder returns the typed message or throws BadMessage("TYPE: FIELD: what was expected");
// nothing is acted on before the whole message decoded, and no code past a decoder reads a
// received JSON value. Unknown keys are ignored (forward compatibility), every key that is
// read is type- and range-checked. The reasons are one line and name the field.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace faultline::live {

// A refused message: `reason` is "TYPE: FIELD: what was expected".
struct BadMessage {
  std::string reason;
};
[[noreturn]] void bad(const std::string& reason);

inline constexpr std::int64_t kMaxReq = std::int64_t{1} << 53;
inline constexpr std::size_t kMaxSignature = 300;    // an exit signature, as the agent keeps it
inline constexpr std::size_t kMaxReportLine = 4096;  // one report line of a rank
inline constexpr std::size_t kMaxText = 4096;        // a detail, reason or signature received
inline constexpr std::int64_t kMaxRank = (std::int64_t{1} << 31) - 1;
inline constexpr std::size_t kMaxFaultKinds = 16;  // a started report's "faults"
inline constexpr std::size_t kMaxFaultId = 64;     // a fault directive's id
// A fault directive's id as the agent writes it (id=ID in the fault file) and a job
// acknowledges it: 1 to kMaxFaultId letters, digits, '.', '_' or '-'.
bool is_fault_id(std::string_view s);
// The fault-file kinds (crash, hang, nan, slow, sdc): what a job acknowledges.
bool is_file_fault(std::string_view kind);

// --- the field reader: one per process boundary, shared by every decoder ---------------------
// Each reads `key` of the object `m` (absent: nullopt or the default) and throws BadMessage
// naming the key when it has the wrong type or range.
std::optional<std::int64_t> opt_int(const nlohmann::json& m, const char* key, std::int64_t lo,
                                    std::int64_t hi);
std::int64_t need_int(const nlohmann::json& m, const char* key, std::int64_t lo, std::int64_t hi);
// True for 64 lowercase hex digits: the shape of a nonce and of a proof (auth.h).
bool is_hex256(std::string_view s);
// Printable ASCII, one line: for names that reach file names, argv and log lines.
bool printable(const std::string& s);
std::optional<std::string> opt_string(const nlohmann::json& m, const char* key,
                                      std::size_t max_len);
std::string need_string(const nlohmann::json& m, const char* key, std::size_t max_len);
// Any string up to max_len bytes (UTF-8 as received): free text that is only ever logged or
// re-encoded as JSON (a detail, a stack signature).
std::optional<std::string> opt_text(const nlohmann::json& m, const char* key, std::size_t max_len);
// A host name or address for MASTER_ADDR: letters, digits and . - _ : only.
std::string need_host(const nlohmann::json& m, const char* key);
bool opt_bool(const nlohmann::json& m, const char* key, bool def);
// A finite number in [lo, hi].
std::optional<double> opt_number(const nlohmann::json& m, const char* key, double lo, double hi);
// The rendezvous blob of a multi-machine probe (the NCCL unique id, as the probe's rendezvous
// file holds it): 2 to 2 * kMaxRendezvousBlob lowercase hex digits, an even number of them.
// Returns the bytes.
inline constexpr std::size_t kMaxRendezvousBlob = 1024;
std::string need_hex_blob(const nlohmann::json& m, const char* key);
std::string to_hex(const std::string& bytes);
// A training metric: a finite number, or a non-finite one written as null, "NaN", "nan",
// "Infinity", "-Infinity", "inf" or "-inf" (NaN is returned for all of those).
std::optional<double> opt_metric(const nlohmann::json& m, const char* key);

// --- replica groups (python/faultline/replicas.py; PROTOCOL.md, "Replica groups") -----------
// A quorum as the controller sends it and the agent writes it to the replicas' quorum file:
// {"quorum": N, "members": [replica ids, ascending], "store": "host:port", "join": [ids]}.
struct Quorum {
  std::int64_t number = 0;
  std::vector<std::int64_t> members;
  std::string store;               // host:port of the TCPStore the quorum's group forms on
  std::vector<std::int64_t> join;  // members that take their state from a live peer
};
// Throws BadMessage naming the field: members empty, unsorted or repeated, join not a proper
// subset of members, store not host:port.
Quorum decode_quorum(const nlohmann::json& j);
nlohmann::json encode(const Quorum& q);

// --- rank -> agent -------------------------------------------------------------------------
// One report line of a training rank (see PROTOCOL.md, "Rank reports"). The agent forwards
// the object it parsed with the fields below replaced by encode(report): keys live mode does
// not know pass through for the job's own tools, and the controller decodes it again.
struct RankReport {
  std::string type;                   // "started", "step", "checkpoint", "fatal" or another name
  std::optional<std::int64_t> rank;   // the global rank
  std::optional<std::int64_t> step;   // started: restored step; step: the step completed
  std::optional<double> step_time_s;  // step: seconds the step took
  std::optional<double> loss;         // step: NaN when non-finite; absent when not reported
  std::optional<double> grad_norm;    // step: as loss
  std::optional<std::int64_t> checkpoint_step;
  std::string restored_from;           // started
  std::string version;                 // started
  std::optional<std::int64_t> pid;     // started
  std::string signature;               // fatal: the job's own account of why it dies
  std::optional<std::int64_t> quorum;  // replica groups: quorum, quorum_failed, waiting
  // started: the fault-file kinds the job takes and acknowledges (absent: it takes none);
  // at most kMaxFaultKinds names of at most 16 characters.
  std::optional<std::vector<std::string>> faults;
  // fault: the acknowledgement of a fault-file directive the rank took, before it acts
  // (PROTOCOL.md, "Fault acknowledgement"): the directive's id and its kind.
  std::string fault_id;
  std::string fault;
  // started: the signal on which the rank writes every thread's Python stack (faulthandler) to
  // FAULTLINE_STACK_FD, "SIGUSR1" or "SIGUSR2" (PROTOCOL.md, "capture"); "" when it does not.
  std::string stack_signal;

  bool loss_nan() const;       // the loss was reported and not finite
  bool grad_norm_nan() const;  // the gradient norm was reported and not finite
};
RankReport decode_rank_report(const nlohmann::json& j);
// Parses one line as a job writes it: a JSON object, where bare NaN, Infinity and -Infinity
// (what Python's json.dumps writes for non-finite floats) are accepted as numbers. Lines over
// kMaxReportLine are refused.
// `parsed` (when given) receives the object as parsed.
RankReport parse_rank_report_line(std::string_view line, nlohmann::json* parsed = nullptr);
nlohmann::json encode(const RankReport& r);

// --- the handshake (PROTOCOL.md, "Authentication") ---------------------------------------------
// peer -> controller, first: who it claims to be and its nonce. No secret.
struct Hello {
  enum class Role { kAgent, kClient };
  Role role = Role::kAgent;
  bool read_only = false;  // clients: "access": "read" (the status credential)
  std::string name;        // agents: the machine name
  std::string nonce;       // 64 hex digits
  // The role as it enters the proofs: "agent", "client" or "client-read".
  std::string proof_role() const;
};
// Refuses anything but {"type": "hello", "proto": protocol_version, "role": ..., "nonce": ...}.
Hello decode_hello(const nlohmann::json& j, int protocol_version);
// controller -> peer: its nonce and its proof of the token.
struct Challenge {
  std::string nonce;
  std::string proof;
};
Challenge decode_challenge(const nlohmann::json& j);
// peer -> controller, second: its proof, and (agents) what it runs, for adoption.
struct Auth {
  std::string proof;
  std::optional<std::int64_t> gen;        // agents: generation of the ranks it runs
  std::vector<std::int64_t> alive_ranks;  // agents: ranks still running
  std::optional<std::int64_t> pid;
};
Auth decode_auth(const nlohmann::json& j);

// --- agent -> controller ---------------------------------------------------------------------
struct AgentHeartbeat {};
struct AgentReport {
  std::int64_t gen = 0;
  std::int64_t rank = -1;  // the rank whose pipe the report came from; -1: not said
  RankReport report;
};
struct AgentExit {
  std::int64_t gen = 0;
  std::int64_t rank = 0;
  std::int64_t pid = 0;
  int code = -1;   // exit code; -1 when killed by a signal
  int signal = 0;  // 0 when it exited
  std::string signature;
};
struct AgentAlert {
  std::string kind;  // "nic", "gpu" or "host"
  std::string detail;
};
// The reply to a request: `done` or `error`, plus the per-request fields live mode reads.
struct AgentReply {
  std::uint64_t req = 0;
  bool ok = false;
  std::string detail;
  bool timed_out = false;
  std::optional<std::string> hash;  // probe, replay
  // probe inter_all_gather with a relayed rendezvous: how far this machine's probe got in it,
  // "ok", "timed_out", "failed" or "not_reached"; absent when its probe did not take part.
  std::optional<std::string> rendezvous;
  // probe inter_all_gather: seconds one timed all-gather took, without the process start.
  std::optional<double> collective_s;
  std::map<std::int64_t, std::string> by_rank;  // capture: stack signature by rank
  // kill with spare_holding: the ranks spared because they hold in place; launch in_place: the
  // ranks kept (given their re-form directive) rather than launched.
  std::optional<std::vector<std::int64_t>> spared;
  std::optional<std::vector<std::int64_t>> kept;
};
// Rank 0's probe published its rendezvous blob, for the controller to relay to the other
// machines of the probe request `probe_req` (PROTOCOL.md, "Probes across machines").
struct AgentRendezvous {
  std::uint64_t probe_req = 0;
  std::string blob;  // the bytes
};
using AgentMessage =
    std::variant<AgentHeartbeat, AgentReport, AgentExit, AgentAlert, AgentReply, AgentRendezvous>;
AgentMessage decode_agent_message(const nlohmann::json& j);

// --- operator client -> controller -----------------------------------------------------------
struct StatusRequest {
  // "parts": true: the client takes a document larger than one frame as status_part messages
  // before the done (PROTOCOL.md, "Status in parts").
  bool parts = false;
};
struct StopRequest {};
struct UpdateRequest {
  std::string version;
  bool urgent = true;
};
struct InjectRequest {
  std::string machine;
  std::string fault;
  std::string detail;  // one line, at most 200 characters
};
// What an injected fault's detail must be, as the agent applies it and `sim replay` reads
// its record: nullopt when `detail` suits `fault`, else the reason ("slow expects ..."). The
// controller checks it before it sends the fault, the agent again before it applies it.
std::optional<std::string> inject_detail_error(const std::string& fault, const std::string& detail);

struct ClientRequest {
  nlohmann::json req = 0;  // echoed in the reply: an integer in [0, 2^53]
  std::variant<StatusRequest, StopRequest, UpdateRequest, InjectRequest> body;
};
// Throws BadMessage; `req_out` (when given) receives the request's req as soon as it decoded,
// so a refusal can still echo it.
ClientRequest decode_client_request(const nlohmann::json& j, nlohmann::json* req_out = nullptr);

}  // namespace faultline::live
