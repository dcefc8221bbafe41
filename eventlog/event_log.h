// The live event log: everything live mode observed and did, one JSON object per line,
// in the shared Event/Action vocabulary, so a live incident can be read back, audited
// and replayed in the simulator under another policy stack (`faultline sim replay`).
//
// Events and actions encode as eventlog/event_codec.h says (included here: to_json,
// event_from_json, action_from_json, the enums' *_from_name and EventLogError); this
// header is the framing around them.
//
// A log is a sequence of records. Every record has "t_s" (seconds since the live run
// started, monotonic clock) and "kind":
//   header    first line: {"format":"faultline-eventlog","version":1,"stack":NAME,
//             "params":{name:value},"choices":{name:module},"seed":N,
//             "cluster":{"machines","gpus_per_machine","tp","pp","dp","standby_machines"},
//             "nominal_step_time_s":x,
//             "checkpoint_every_steps":n,"config_file":PATH[,"machine_names":[NAME...]]}
//   event     {"event":EVENT}: what the policy was shown
//   action    {"id":N,"action":ACTION}: what the policy asked
//   outcome   {"id":N,"ok":bool,"detail":STR,"duration_s":x}: the backend finished action N
//   note      {"text":STR}: the policy's decision log
//   fault     {"machine":M,"slot":S,"fault":KIND,"detail":STR,"persistent":bool}: ground
//             truth of an injected fault, never shown to the policy (KIND: see FaultKind)
//   progress  {"step":s,"loss":x|null,"restart":bool}: a completed step of rank 0
//             (possibly thinned); restart marks the first step of a new incarnation
//   restart   {"reason":STR}: the controller restarted and resumed from its journal
//   summary   last line, at shutdown: {"elapsed_s","final_step","first_step",
//             "productive_s","ettr","step_time_s"}
//   account   the account of lost time so far (cumulative), written when an incident closes
//             and just before the summary: {"elapsed_s","productive_s","ettr",
//             "lost_s":{PHASE:seconds}}, PHASE one of the lost phases of
//             traces/time_phases.h (the simulator's bucket names; docs/metrics.md says how
//             live mode measures each). Logs from before it have none.
//
// Live ETTR: step_time_s is the fault-free step time, the median of the per-step times of
// healthy progress samples (consecutive samples of one incarnation: Δt / Δstep);
// productive_s = (final_step - first_step) x step_time_s; ettr = productive_s / elapsed_s.
// Checkpoint stalls, restarts, recomputed steps and slow steps are all unproductive.
//
// `faultline::Event` (the policy vocabulary) is spelled out in full here: traces::Event
// is a fault trace's record (traces/trace.h).
//
// Writing never throws after open, and a failed write (a full disk, an I/O error) loses
// nothing while memory allows: the partial line is cut off again (the file only ever holds
// whole records), the record waits in a bounded in-memory backlog, and the backlog is
// written first, in order, at the next write or flush(). What did not fit in the backlog
// is counted as lost. StorageHealth says how the file stands.
// Reading tolerates a torn last line (a crash mid-write) and reports it; any other bad
// line is an error "file:line: $.field: what was expected".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "eventlog/event_codec.h"
#include "policies/api/action.h"
#include "policies/api/event.h"
#include "traces/storage_health.h"

namespace faultline::traces {

// ---------------------------------------------------------------- records

enum class RecordKind : std::uint8_t {
  kHeader,
  kEvent,
  kAction,
  kOutcome,
  kNote,
  kFault,
  kProgress,
  kRestart,
  kSummary,
  kAccount
};
const char* record_kind_name(RecordKind k);
std::optional<RecordKind> record_kind_from_name(std::string_view name);

// Ground truth of an injected fault (the "fault" record's "fault" field).
enum class FaultKind : std::uint8_t {
  kKill,         // one rank SIGKILLed: transient crash, exit 137, no log line
  kMachineDown,  // the whole machine lost (agent and ranks); persistent
  kCrash,        // a rank exits with log signature `detail`; transient
  kHang,         // one rank hangs inside a collective once; transient
  kStop,         // a rank SIGSTOPped; stays until its machine is evicted
  kNan,          // one-shot NaN gradient
  kSlow,         // persistent slowdown; detail = factor
  kSdc,          // persistent silent data corruption
  kNicDown,      // persistent NIC loss; inspection can see it
  kUpdate,       // a code update was requested; detail = version; urgent
  kWarn,         // a failure warning (FailureWarning) on the machine; detail = lead in s;
                 // nothing fails: what is true is that the warning was sent
};
const char* fault_kind_name(FaultKind k);  // "kill", "machine_down", ...
std::optional<FaultKind> fault_kind_from_name(std::string_view name);

struct EventLogHeader {
  std::string stack;
  // The number parameters. Logs written before choices travelled by name also hold each
  // choice parameter here, as an index into the modules that process registered (plugins
  // included), which another process may register in another order: `choices` is read
  // instead wherever it names the module.
  std::map<std::string, double> params;
  // The module each choice parameter picks, by name. Empty in logs written before it.
  std::map<std::string, std::string> choices;
  std::uint64_t seed = 0;
  int machines = 1;
  int gpus_per_machine = 1;
  int tp = 1, pp = 1, dp = 1;
  int standby_machines = 0;
  double nominal_step_time_s = 1;
  std::int64_t checkpoint_every_steps = 0;  // 0 = never
  std::string config_file;
  // The live run's machine names by machine id (job machines, then standbys) when the log
  // was begun; empty in simulated runs and in logs written before it.
  std::vector<std::string> machine_names;
};

struct FaultRecord {
  MachineId machine = kNoMachine;
  SlotId slot = -1;  // -1: not in a job slot (a standby) or job-wide (update)
  FaultKind fault = FaultKind::kKill;
  std::string detail;
  bool persistent = false;
};

struct SummaryRecord {
  double elapsed_s = 0;
  std::int64_t final_step = 0;
  std::int64_t first_step = 0;
  double productive_s = 0;
  double ettr = 0;
  double step_time_s = 0;
};

// The account of lost time at one moment (the "account" record).
struct AccountRecord {
  double elapsed_s = 0;
  double productive_s = 0;
  double ettr = 0;
  std::map<std::string, double> lost_s;  // lost phase name -> seconds so far
};

struct OutcomeRecord {
  ActionId id = 0;
  bool ok = true;
  std::string detail;
  double duration_s = 0;
};

struct ProgressRecord {
  std::int64_t step = 0;
  std::optional<double> loss;  // null: not reported (or not finite)
  bool restart = false;
};

// One line of the log as read: its kind, time, source line and the whole object.
struct LogRecord {
  RecordKind kind = RecordKind::kNote;
  double t_s = 0;
  std::size_t line = 0;
  nlohmann::json json;
};

template <class T>
struct Timed {
  double t_s = 0;
  std::size_t line = 0;
  T value;
};

struct LoggedAction {
  ActionId id = 0;
  faultline::Action action;
};

// A whole log, parsed and validated. Records keep file order; the typed vectors below
// hold the same records decoded.
struct EventLog {
  std::string file;
  EventLogHeader header;
  std::vector<LogRecord> records;  // every record, header included
  std::vector<Timed<faultline::Event>> events;
  std::vector<Timed<LoggedAction>> actions;
  std::vector<Timed<OutcomeRecord>> outcomes;
  std::vector<Timed<FaultRecord>> faults;
  std::vector<Timed<ProgressRecord>> progress;
  std::vector<Timed<std::string>> notes, restarts;
  std::optional<Timed<SummaryRecord>> summary;  // the last summary record, if any
  std::vector<Timed<AccountRecord>> accounts;   // cumulative: the last one is the latest
  bool torn_tail = false;                       // the last line was cut mid-write and was left out
  std::size_t torn_line = 0;
};

// Reads and validates `path`. Throws EventLogError "path:line: $.field: expected ..."
// (or "path: cannot open file") for anything but a torn last line.
EventLog read_event_log(const std::string& path);
// Same from text; `file` is used in messages.
EventLog parse_event_log(std::string_view text, const std::string& file);

// The record JSON of each kind (t_s and kind included), as the writer emits them.
nlohmann::json header_record(double t_s, const EventLogHeader& h);
nlohmann::json event_record(double t_s, const faultline::Event& e);
nlohmann::json action_record(double t_s, ActionId id, const faultline::Action& a);
nlohmann::json outcome_record(double t_s, const OutcomeRecord& o);
nlohmann::json note_record(double t_s, std::string_view text);
nlohmann::json fault_record(double t_s, const FaultRecord& f);
nlohmann::json progress_record(double t_s, const ProgressRecord& p);
nlohmann::json restart_record(double t_s, std::string_view reason);
nlohmann::json summary_record(double t_s, const SummaryRecord& s);
nlohmann::json account_record(double t_s, const AccountRecord& a);

// The live ETTR of a run from its progress samples (see the top of this file).
// step_time_s falls back to `nominal_step_time_s` when no two healthy samples follow
// each other. Requires elapsed_s > 0.
SummaryRecord summarize_progress(const std::vector<Timed<ProgressRecord>>& progress,
                                 double elapsed_s, double nominal_step_time_s);
// Median per-step time of healthy progress samples (Δt / Δstep of consecutive samples of
// one incarnation), or nullopt without any.
std::optional<double> healthy_step_time(const std::vector<Timed<ProgressRecord>>& progress);

// Appends records to a log file, one line per record, each with a single write(2) on an
// O_APPEND descriptor, so a line is never interleaved with another writer's and a crash
// leaves at most the last line torn. A write that fails or stops short is cut back off
// (ftruncate to where the line began) and the line joins the backlog (see the top of this
// file). Not thread-safe; move-only.
class EventLogWriter {
 public:
  static constexpr std::size_t kBacklogBytes = std::size_t{4} << 20;  // 4 MiB of lines
  static constexpr std::size_t kBacklogRecords = 100000;

  // Opens (creating, mode 0644) `path` for append. Throws EventLogError when it cannot.
  explicit EventLogWriter(const std::string& path);
  ~EventLogWriter();
  EventLogWriter(EventLogWriter&& o) noexcept;
  EventLogWriter& operator=(EventLogWriter&& o) noexcept;
  EventLogWriter(const EventLogWriter&) = delete;
  EventLogWriter& operator=(const EventLogWriter&) = delete;

  // Each returns true when the record (and every record before it) is in the file; false
  // when it waits in the backlog or was lost (health() says which; the writer stays usable).
  bool header(double t_s, const EventLogHeader& h) { return write(header_record(t_s, h)); }
  bool event(double t_s, const faultline::Event& e) { return write(event_record(t_s, e)); }
  bool action(double t_s, ActionId id, const faultline::Action& a) {
    return write(action_record(t_s, id, a));
  }
  bool outcome(double t_s, const OutcomeRecord& o) { return write(outcome_record(t_s, o)); }
  bool note(double t_s, std::string_view text) { return write(note_record(t_s, text)); }
  bool fault(double t_s, const FaultRecord& f) { return write(fault_record(t_s, f)); }
  bool progress(double t_s, const ProgressRecord& p) { return write(progress_record(t_s, p)); }
  bool restart(double t_s, std::string_view reason) { return write(restart_record(t_s, reason)); }
  bool summary(double t_s, const SummaryRecord& s) { return write(summary_record(t_s, s)); }
  bool account(double t_s, const AccountRecord& a) { return write(account_record(t_s, a)); }
  // Writes one record object as one line (invalid UTF-8 is replaced, never thrown).
  bool write(const nlohmann::json& record);

  // Writes the backlog now (a timer calls it so that records do not wait for the next
  // one). Returns true when nothing is pending.
  bool flush();
  // Caps the backlog (tests; the defaults are kBacklogBytes and kBacklogRecords).
  void set_backlog_limits(std::size_t bytes, std::size_t records) {
    backlog_limit_bytes_ = bytes;
    backlog_limit_records_ = records;
  }

  const std::string& path() const { return path_; }
  std::size_t failed_writes() const { return health_.failed_writes; }
  const StorageHealth& health() const { return health_; }

 private:
  // Writes one whole line, or cuts off what it wrote and returns false (errno kept in
  // health_.last_error).
  bool append(const std::string& line);
  void failed(int err);

  std::string path_;
  int fd_ = -1;
  std::deque<std::string> backlog_;
  std::size_t backlog_bytes_ = 0;
  std::size_t backlog_limit_bytes_ = kBacklogBytes;
  std::size_t backlog_limit_records_ = kBacklogRecords;
  // Where a line that could not be cut off began: nothing is appended before the cut works.
  std::optional<off_t> cut_at_;
  StorageHealth health_;
};

}  // namespace faultline::traces
