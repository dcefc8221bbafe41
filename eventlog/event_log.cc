// The live event log's framing (see event_log.h): the record kinds and their JSON, the
// reading of a log line by line (header first, one record per line, a torn last line
// tolerated) and the crash-safe appending writer. What an event or action looks like in
// JSON is the codec's business (event_codec.h); this file only places it in records.
#include "eventlog/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "eventlog/event_json.h"
#include "traces/config.h"
#include "traces/stats.h"
#include "traces/time_phases.h"

namespace faultline::traces {

using nlohmann::json;

namespace {

using internal::JsonIn;
using internal::kI32Max;
using internal::kI64Max;
using internal::kI64Min;
using internal::names_of;
using internal::real_json;

constexpr int kFaultKinds = 11, kRecordKinds = 10;

// ---------------------------------------------------------------- records

json base_record(double t_s, RecordKind k) {
  json o = json::object();
  o["t_s"] = t_s;
  o["kind"] = record_kind_name(k);
  return o;
}

json loss_json(const std::optional<double>& loss) {
  return loss ? real_json(*loss) : json(nullptr);
}

bool default_persistent(FaultKind k) {
  switch (k) {
    case FaultKind::kMachineDown:
    case FaultKind::kStop:
    case FaultKind::kSlow:
    case FaultKind::kSdc:
    case FaultKind::kNicDown:
      return true;
    default:
      return false;
  }
}

EventLogHeader decode_header(JsonIn& in) {
  EventLogHeader h;
  const std::string format = in.string("format", "", true);
  if (format != "faultline-eventlog")
    in.fail(in.at("format"), "expected \"faultline-eventlog\", got \"" + format + "\"");
  in.integer("version", 0, 1, 1, true);
  h.stack = in.string("stack", "", true);
  if (h.stack.empty()) in.fail(in.at("stack"), "expected a policy stack name, got \"\"");
  if (const json* p = in.get("params")) {
    if (!p->is_object())
      in.fail(in.at("params"), "expected an object of numbers, got " + json_type_of(*p));
    for (auto it = p->begin(); it != p->end(); ++it) {
      const std::string where = in.at("params") + "." + it.key();
      if (it->is_boolean())
        h.params[it.key()] = it->get<bool>() ? 1 : 0;
      else if (it->is_number() && std::isfinite(it->get<double>()))
        h.params[it.key()] = it->get<double>();
      else
        in.fail(where,
                "expected a finite number, got " + json_type_of(*it) + " " + json_brief(*it));
    }
  }
  if (const json* c = in.get("choices")) {
    if (!c->is_object())
      in.fail(in.at("choices"), "expected an object of module names, got " + json_type_of(*c));
    for (auto it = c->begin(); it != c->end(); ++it) {
      if (!it->is_string() || it->get<std::string>().empty())
        in.fail(in.at("choices") + "." + it.key(),
                "expected a module name, got " + json_type_of(*it) + " " + json_brief(*it));
      h.choices[it.key()] = it->get<std::string>();
    }
  }
  h.seed = in.unsigned_integer("seed", 0);
  {
    JsonIn c(in.need("cluster", "object"), in.at("cluster"));
    h.machines = static_cast<int>(c.integer("machines", 0, 1, 1'000'000, true));
    h.gpus_per_machine = static_cast<int>(c.integer("gpus_per_machine", 1, 1, 64, true));
    h.tp = static_cast<int>(c.integer("tp", 1, 1, 1 << 20, true));
    h.pp = static_cast<int>(c.integer("pp", 1, 1, 1 << 20, true));
    h.dp = static_cast<int>(c.integer("dp", 1, 1, 1 << 24, true));
    h.standby_machines = static_cast<int>(c.integer("standby_machines", 0, 0, 100'000));
    const std::int64_t ranks = static_cast<std::int64_t>(h.tp) * h.pp * h.dp;
    const std::int64_t gpus = static_cast<std::int64_t>(h.machines) * h.gpus_per_machine;
    if (ranks != gpus)
      c.fail(c.path(), "expected tp*pp*dp == machines*gpus_per_machine (" + std::to_string(gpus) +
                           "), got " + std::to_string(ranks));
    if (h.gpus_per_machine % h.tp != 0)
      c.fail(c.at("tp"), "expected a divisor of gpus_per_machine (" +
                             std::to_string(h.gpus_per_machine) + "), got " + std::to_string(h.tp));
    c.finish();
  }
  h.nominal_step_time_s = in.finite("nominal_step_time_s", 0, 1e-6, 1e6, true);
  h.checkpoint_every_steps = in.integer("checkpoint_every_steps", 0, 0, kI64Max);
  h.config_file = in.string("config_file", "");
  h.machine_names = in.strings("machine_names");
  return h;
}

// ---------------------------------------------------------------- reading records

// The lines of `text`; the last one may lack its newline.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

EventLogError line_error(const std::string& file, std::size_t line, const std::string& what) {
  return EventLogError(file + ":" + std::to_string(line) + ": " + what);
}

// The JSON of one line, or nullopt when `last` and cut short: a crash mid-write leaves at
// most the last line torn. Throws EventLogError "file:line: $: ..." for any other bad line.
std::optional<json> parse_line(std::string_view line, bool last, const std::string& file,
                               std::size_t line_no) {
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    if (last && !line.empty()) return std::nullopt;
    std::string what = e.what();
    const auto p = what.find("parse error");
    throw line_error(file, line_no,
                     line.empty() ? "$: expected a JSON object, got an empty line"
                                  : "$: invalid JSON (" +
                                        (p == std::string::npos ? what : what.substr(p)) + ")");
  }
}

OutcomeRecord decode_outcome(JsonIn& in) {
  OutcomeRecord o;
  o.id = in.unsigned_integer("id", 0, true);
  o.ok = in.boolean("ok", true, true);
  o.detail = in.string("detail", "");
  o.duration_s = in.finite("duration_s", 0, 0, 1e12, true);
  return o;
}

FaultRecord decode_fault(JsonIn& in) {
  FaultRecord f;
  f.fault = in.enumerated<FaultKind>("fault", FaultKind::kKill, fault_kind_from_name,
                                     names_of<FaultKind, kFaultKinds>(fault_kind_name));
  if (!in.has("fault")) in.need("fault", "string");
  const bool job_wide = f.fault == FaultKind::kUpdate;
  f.machine = static_cast<MachineId>(in.integer("machine", kNoMachine, -1, kI32Max, !job_wide));
  f.slot = static_cast<SlotId>(in.integer("slot", -1, -1, kI32Max, !job_wide));
  f.detail = in.string("detail", "");
  f.persistent = in.boolean("persistent", default_persistent(f.fault));
  if (f.fault == FaultKind::kSlow) {
    char* end = nullptr;
    const double factor = std::strtod(f.detail.c_str(), &end);
    if (f.detail.empty() || *end || !(factor >= 1) || !(factor <= 100))
      in.fail("$.detail",
              "expected the slowdown factor of a \"slow\" fault, a number in [1, 100], got \"" +
                  f.detail + "\"");
  }
  if (f.fault == FaultKind::kWarn) {
    char* end = nullptr;
    const double lead = std::strtod(f.detail.c_str(), &end);
    if (f.detail.empty() || *end || !(lead > 0) || !(lead <= 1e7))
      in.fail("$.detail",
              "expected the lead time of a \"warn\" fault in seconds, a number in (0, 1e7], "
              "got \"" +
                  f.detail + "\"");
  }
  return f;
}

ProgressRecord decode_progress(JsonIn& in) {
  ProgressRecord p;
  p.step = in.integer("step", 0, kI64Min, kI64Max, true);
  if (const json* l = in.get("loss"); l && !l->is_null()) p.loss = in.as_real(*l, "$.loss");
  p.restart = in.boolean("restart", false);
  return p;
}

SummaryRecord decode_summary(JsonIn& in) {
  SummaryRecord s;
  s.elapsed_s = in.finite("elapsed_s", 0, 0, 1e12, true);
  s.final_step = in.integer("final_step", 0, kI64Min, kI64Max, true);
  s.first_step = in.integer("first_step", 0, kI64Min, kI64Max, true);
  s.productive_s = in.finite("productive_s", 0, 0, 1e12, true);
  s.ettr = in.finite("ettr", 0, 0, 1e6, true);
  s.step_time_s = in.finite("step_time_s", 0, 0, 1e6, true);
  return s;
}

AccountRecord decode_account(JsonIn& in) {
  AccountRecord a;
  a.elapsed_s = in.finite("elapsed_s", 0, 0, 1e12, true);
  a.productive_s = in.finite("productive_s", 0, 0, 1e12, true);
  a.ettr = in.finite("ettr", 0, 0, 1e6, true);
  const json& lost = in.need("lost_s", "object");
  for (auto it = lost.begin(); it != lost.end(); ++it) {
    const std::string where = in.at("lost_s") + "." + it.key();
    const auto phase = time_phase_from_name(it.key());
    if (!phase || *phase == TimePhase::kProductive) {
      const std::vector<const char*> names(kTimePhaseNames.begin() + 1, kTimePhaseNames.end());
      in.fail(where, "expected a lost phase, one of " + join_names(names));
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      in.fail(where, "expected seconds >= 0, got " + json_type_of(*it) + " " + json_brief(*it));
    a.lost_s[it.key()] = it->get<double>();
  }
  return a;
}

// Decodes the body of a record of kind `kind` into its typed vector of `log`.
void decode_body(RecordKind kind, JsonIn& in, double t_s, std::size_t line_no, EventLog& log) {
  switch (kind) {
    case RecordKind::kHeader:
      log.header = decode_header(in);
      break;
    case RecordKind::kEvent:
      log.events.push_back({t_s, line_no, event_from_json(in.need("event", "object"), "$.event")});
      break;
    case RecordKind::kAction: {
      LoggedAction a;
      a.id = in.unsigned_integer("id", 0, true);
      a.action = action_from_json(in.need("action", "object"), "$.action");
      log.actions.push_back({t_s, line_no, std::move(a)});
      break;
    }
    case RecordKind::kOutcome:
      log.outcomes.push_back({t_s, line_no, decode_outcome(in)});
      break;
    case RecordKind::kNote:
      log.notes.push_back({t_s, line_no, in.string("text", "", true)});
      break;
    case RecordKind::kFault:
      log.faults.push_back({t_s, line_no, decode_fault(in)});
      break;
    case RecordKind::kProgress:
      log.progress.push_back({t_s, line_no, decode_progress(in)});
      break;
    case RecordKind::kRestart:
      log.restarts.push_back({t_s, line_no, in.string("reason", "")});
      break;
    case RecordKind::kSummary:
      log.summary = Timed<SummaryRecord>{t_s, line_no, decode_summary(in)};
      break;
    case RecordKind::kAccount:
      log.accounts.push_back({t_s, line_no, decode_account(in)});
      break;
  }
}

// Validates one record and appends it to `log`. Throws EventLogError "$.field: ...".
void decode_record(json j, std::size_t line_no, bool& have_header, EventLog& log) {
  JsonIn in(j, "$");
  const std::string kind_name = in.string("kind", "", true);
  const auto kind = record_kind_from_name(kind_name);
  if (!kind)
    in.fail("$.kind", "expected one of " +
                          join_names(names_of<RecordKind, kRecordKinds>(record_kind_name)) +
                          ", got \"" + kind_name + "\"");
  const double t_s = in.finite("t_s", 0, 0, 1e12, true);
  // Run time never goes back in a log: a record before the one above it was written by a
  // controller whose clock restarted (a journal read wrong after a reboot), and the replay
  // would run its events out of order.
  if (!log.records.empty() && t_s < log.records.back().t_s)
    in.fail("$.t_s", "expected at least " + json_brief(log.records.back().t_s) +
                         ", the time of line " + std::to_string(log.records.back().line) +
                         ": the log's time goes backwards");
  if (!have_header && *kind != RecordKind::kHeader)
    in.fail("$.kind", "expected \"header\" on the first line, got \"" + kind_name + "\"");
  if (have_header && *kind == RecordKind::kHeader)
    in.fail("$.kind", "expected one header, on the first line; got a second one");
  decode_body(*kind, in, t_s, line_no, log);
  if (*kind == RecordKind::kHeader) have_header = true;
  in.finish();
  log.records.push_back({*kind, t_s, line_no, std::move(j)});
}

}  // namespace

const char* record_kind_name(RecordKind k) {
  switch (k) {
    case RecordKind::kHeader:
      return "header";
    case RecordKind::kEvent:
      return "event";
    case RecordKind::kAction:
      return "action";
    case RecordKind::kOutcome:
      return "outcome";
    case RecordKind::kNote:
      return "note";
    case RecordKind::kFault:
      return "fault";
    case RecordKind::kProgress:
      return "progress";
    case RecordKind::kRestart:
      return "restart";
    case RecordKind::kSummary:
      return "summary";
    case RecordKind::kAccount:
      return "account";
  }
  return "?";
}
std::optional<RecordKind> record_kind_from_name(std::string_view name) {
  return internal::lookup<RecordKind, kRecordKinds>(name, record_kind_name);
}

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kMachineDown:
      return "machine_down";
    case FaultKind::kCrash:
      return "crash";
    case FaultKind::kHang:
      return "hang";
    case FaultKind::kStop:
      return "stop";
    case FaultKind::kNan:
      return "nan";
    case FaultKind::kSlow:
      return "slow";
    case FaultKind::kSdc:
      return "sdc";
    case FaultKind::kNicDown:
      return "nic_down";
    case FaultKind::kUpdate:
      return "update";
    case FaultKind::kWarn:
      return "warn";
  }
  return "?";
}
std::optional<FaultKind> fault_kind_from_name(std::string_view name) {
  return internal::lookup<FaultKind, kFaultKinds>(name, fault_kind_name);
}

// ---------------------------------------------------------------- record encoders

json header_record(double t_s, const EventLogHeader& h) {
  json o = base_record(t_s, RecordKind::kHeader);
  o["format"] = "faultline-eventlog";
  o["version"] = 1;
  o["stack"] = h.stack;
  json params = json::object();
  for (const auto& [k, v] : h.params) params[k] = v;
  o["params"] = std::move(params);
  if (!h.choices.empty()) o["choices"] = h.choices;
  o["seed"] = h.seed;
  o["cluster"] = {{"machines", h.machines},
                  {"gpus_per_machine", h.gpus_per_machine},
                  {"tp", h.tp},
                  {"pp", h.pp},
                  {"dp", h.dp},
                  {"standby_machines", h.standby_machines}};
  o["nominal_step_time_s"] = h.nominal_step_time_s;
  o["checkpoint_every_steps"] = h.checkpoint_every_steps;
  o["config_file"] = h.config_file;
  if (!h.machine_names.empty()) o["machine_names"] = h.machine_names;
  return o;
}

json event_record(double t_s, const faultline::Event& e) {
  json o = base_record(t_s, RecordKind::kEvent);
  o["event"] = to_json(e);
  return o;
}

json action_record(double t_s, ActionId id, const faultline::Action& a) {
  json o = base_record(t_s, RecordKind::kAction);
  o["id"] = id;
  o["action"] = to_json(a);
  return o;
}

json outcome_record(double t_s, const OutcomeRecord& r) {
  json o = base_record(t_s, RecordKind::kOutcome);
  o["id"] = r.id;
  o["ok"] = r.ok;
  o["detail"] = r.detail;
  o["duration_s"] = r.duration_s;
  return o;
}

json note_record(double t_s, std::string_view text) {
  json o = base_record(t_s, RecordKind::kNote);
  o["text"] = std::string(text);
  return o;
}

json fault_record(double t_s, const FaultRecord& f) {
  json o = base_record(t_s, RecordKind::kFault);
  o["machine"] = f.machine;
  o["slot"] = f.slot;
  o["fault"] = fault_kind_name(f.fault);
  o["detail"] = f.detail;
  o["persistent"] = f.persistent;
  return o;
}

json progress_record(double t_s, const ProgressRecord& p) {
  json o = base_record(t_s, RecordKind::kProgress);
  o["step"] = p.step;
  o["loss"] = loss_json(p.loss);
  o["restart"] = p.restart;
  return o;
}

json restart_record(double t_s, std::string_view reason) {
  json o = base_record(t_s, RecordKind::kRestart);
  o["reason"] = std::string(reason);
  return o;
}

json summary_record(double t_s, const SummaryRecord& s) {
  json o = base_record(t_s, RecordKind::kSummary);
  o["elapsed_s"] = s.elapsed_s;
  o["final_step"] = s.final_step;
  o["first_step"] = s.first_step;
  o["productive_s"] = s.productive_s;
  o["ettr"] = s.ettr;
  o["step_time_s"] = s.step_time_s;
  return o;
}

json account_record(double t_s, const AccountRecord& a) {
  json o = base_record(t_s, RecordKind::kAccount);
  o["elapsed_s"] = a.elapsed_s;
  o["productive_s"] = a.productive_s;
  o["ettr"] = a.ettr;
  json lost = json::object();
  for (const auto& [phase, v] : a.lost_s) lost[phase] = v;
  o["lost_s"] = std::move(lost);
  return o;
}

// ---------------------------------------------------------------- live ETTR

std::optional<double> healthy_step_time(const std::vector<Timed<ProgressRecord>>& progress) {
  std::vector<double> per_step;
  for (std::size_t i = 1; i < progress.size(); ++i) {
    const auto& a = progress[i - 1];
    const auto& b = progress[i];
    if (b.value.restart || b.value.step <= a.value.step || !(b.t_s > a.t_s)) continue;
    per_step.push_back((b.t_s - a.t_s) / static_cast<double>(b.value.step - a.value.step));
  }
  if (per_step.empty()) return std::nullopt;
  return median(std::move(per_step));
}

SummaryRecord summarize_progress(const std::vector<Timed<ProgressRecord>>& progress,
                                 double elapsed_s, double nominal_step_time_s) {
  SummaryRecord s;
  s.elapsed_s = elapsed_s;
  s.step_time_s = healthy_step_time(progress).value_or(nominal_step_time_s);
  if (!progress.empty()) {
    // Samples are completed steps: the run started from the step before its first one.
    s.first_step = progress.front().value.step - 1;
    s.final_step = progress.back().value.step;
  }
  s.productive_s =
      static_cast<double>(std::max<std::int64_t>(0, s.final_step - s.first_step)) * s.step_time_s;
  s.ettr = elapsed_s > 0 ? s.productive_s / elapsed_s : 0;
  return s;
}

// ---------------------------------------------------------------- reading

EventLog parse_event_log(std::string_view text, const std::string& file) {
  EventLog log;
  log.file = file;
  const std::vector<std::string_view> lines = split_lines(text);
  bool have_header = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t line_no = i + 1;
    std::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::optional<json> j = parse_line(line, i + 1 == lines.size(), file, line_no);
    if (!j) {
      log.torn_tail = true;
      log.torn_line = line_no;
      break;
    }
    try {
      decode_record(std::move(*j), line_no, have_header, log);
    } catch (const EventLogError& e) {
      throw line_error(file, line_no, e.what());
    }
  }
  if (!have_header)
    throw EventLogError(file + ":1: $.kind: expected a \"header\" record, the log is empty");
  return log;
}

EventLog read_event_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EventLogError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw EventLogError(path + ": read error");
  return parse_event_log(ss.str(), path);
}

// ---------------------------------------------------------------- writing

EventLogWriter::EventLogWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw EventLogError(path + ": cannot open for append: " + std::strerror(errno));
  // A previous writer that crashed mid-line left a torn tail; appending after it would
  // glue the next record onto it. Cut it off (it was lost anyway).
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') {
      off_t end = st.st_size;
      off_t keep = 0;
      char buf[4096];
      while (end > 0 && keep == 0) {
        const off_t from = std::max<off_t>(0, end - static_cast<off_t>(sizeof buf));
        const ssize_t n = ::pread(fd_, buf, static_cast<size_t>(end - from), from);
        if (n <= 0) break;
        for (ssize_t k = n - 1; k >= 0; --k)
          if (buf[k] == '\n') {
            keep = from + k + 1;
            break;
          }
        end = from;
      }
      if (::ftruncate(fd_, keep) != 0) {
        ::close(fd_);
        fd_ = -1;
        throw EventLogError(path + ": cannot cut the torn last line: " + std::strerror(errno));
      }
    }
  }
}

EventLogWriter::~EventLogWriter() {
  if (fd_ >= 0) {
    flush();  // a last chance for what waits in the backlog
    ::close(fd_);
  }
}

EventLogWriter::EventLogWriter(EventLogWriter&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      backlog_(std::move(o.backlog_)),
      backlog_bytes_(std::exchange(o.backlog_bytes_, 0)),
      backlog_limit_bytes_(o.backlog_limit_bytes_),
      backlog_limit_records_(o.backlog_limit_records_),
      cut_at_(std::exchange(o.cut_at_, std::nullopt)),
      health_(std::move(o.health_)) {}

EventLogWriter& EventLogWriter::operator=(EventLogWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    backlog_ = std::move(o.backlog_);
    backlog_bytes_ = std::exchange(o.backlog_bytes_, 0);
    backlog_limit_bytes_ = o.backlog_limit_bytes_;
    backlog_limit_records_ = o.backlog_limit_records_;
    cut_at_ = std::exchange(o.cut_at_, std::nullopt);
    health_ = std::move(o.health_);
  }
  return *this;
}

void EventLogWriter::failed(int err) { health_.failed(path_ + ": " + std::strerror(err)); }

bool EventLogWriter::append(const std::string& line) {
  if (fd_ < 0) {
    failed(EBADF);
    return false;
  }
  // A line that could not be cut off earlier is cut first: nothing may follow a torn line.
  if (cut_at_) {
    if (::ftruncate(fd_, *cut_at_) != 0) {
      failed(errno);
      return false;
    }
    cut_at_.reset();
  }
  // One write(2) per line; a short write is finished by further writes, and when those
  // fail (disk full) what was written is cut off again: the file holds whole lines only.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      const std::size_t written = line.size() - left;
      if (written > 0) {
        // O_APPEND: the offset is the end of our own bytes.
        const off_t end = ::lseek(fd_, 0, SEEK_CUR);
        const off_t begin = end - static_cast<off_t>(written);
        if (end < 0 || ::ftruncate(fd_, begin) != 0)
          cut_at_ = end < 0 ? std::nullopt : std::optional<off_t>(begin);
      }
      failed(err);
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

bool EventLogWriter::flush() {
  bool wrote = false;
  while (!backlog_.empty()) {
    if (!append(backlog_.front())) {
      health_.pending = backlog_.size();
      return false;
    }
    backlog_bytes_ -= backlog_.front().size();
    backlog_.pop_front();
    ++health_.written_late;
    wrote = true;
  }
  health_.pending = 0;
  if (wrote) health_.failing = false;  // recovered: a write went through and nothing waits
  return true;
}

bool EventLogWriter::write(const json& record) {
  std::string line;
  try {
    line = record.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    ++health_.failed_writes;
    return false;
  }
  line += '\n';
  // Order is kept: the backlog goes first, and while it cannot, the line waits behind it.
  if (flush() && append(line)) {
    health_.failing = false;
    return true;
  }
  if (backlog_.size() >= backlog_limit_records_ ||
      backlog_bytes_ + line.size() > backlog_limit_bytes_) {
    ++health_.lost;
    ++health_.outage_lost;
  } else {
    backlog_bytes_ += line.size();
    backlog_.push_back(std::move(line));
  }
  health_.pending = backlog_.size();
  return false;
}

}  // namespace faultline::traces
