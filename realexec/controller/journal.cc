#include "realexec/controller/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "eventlog/event_log.h"
#include "json/strict_object.h"
#include "realexec/net/reactor.h"
#include "traces/time_phases.h"

namespace faultline::live {

namespace {
using nlohmann::json;

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}
// The journal's reader, one per JSON object: "PATH: expected ..., got ...", unknown keys
// refused (Journal::parse names the file).
using Reader = StrictObject<std::invalid_argument>;
constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();

// Seconds: a finite number >= 0.
double seconds_at(const Reader& r, const json& v, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    r.fail(field, "expected seconds >= 0, got " + json_brief(v));
  return v.get<double>();
}

// The account of lost time (added with it; absent in older journals, which resume with
// zeros). A phase name this version does not know (a newer journal) is dropped; a value
// that is not a finite, non-negative number makes the journal unusable.
void parse_account(Reader& r, JournalState& s) {
  if (const json* lost = r.get("lost_s")) {
    if (!lost->is_object())
      r.fail("lost_s", "expected an object of seconds by phase, got " + json_type_of(*lost));
    for (const auto& [name, v] : lost->items()) {
      const double x = seconds_at(r, v, "lost_s." + name);
      if (const auto p = time_phase_from_name(name); p && *p != TimePhase::kProductive)
        s.lost_s[name] = x;
    }
  }
  if (const json* stop = r.get("stop"); stop && !stop->is_null()) {
    Reader o(*stop, "stop");
    JournalState::Stop p;
    p.category = o.string("category", "", true);
    p.cause = o.string("cause", "", true);
    p.began_ns = o.integer("began_ns", 0, kMin64, kMax64, true);
    p.detected_ns = o.integer("detected_ns", 0, kMin64, kMax64, true);
    p.restart_began_ns = o.integer("restart_began_ns", 0, kMin64, kMax64, true);
    p.waited_ns = o.integer("waited_ns", 0, kMin64, kMax64, true);
    p.waiting_since_ns = o.integer("waiting_since_ns", -1, kMin64, kMax64);
    o.finish();
    if (p.began_ns < 0 || p.detected_ns < p.began_ns || p.waited_ns < 0)
      o.fail("stop", "expected 0 <= began_ns <= detected_ns, waited_ns >= 0");
    s.stop = std::move(p);
  }
}
// A count of a field added after format 2's first release: the wrong type (or a negative
// value) is refused naming the field.
std::uint64_t count_at(const Reader& r, const json& j, const std::string& field) {
  if (!j.is_number_unsigned()) r.fail(field, "expected a count >= 0, got " + json_brief(j));
  return j.get<std::uint64_t>();
}

JournalState::Latency parse_latency(const json& j, const std::string& field) {
  Reader o(j, field);
  JournalState::Latency h;
  o.need("bounds", "array");
  h.bounds = o.numbers("bounds");
  for (std::size_t i = 0; i < h.bounds.size(); ++i)
    if (!std::isfinite(h.bounds[i]) || (i > 0 && h.bounds[i] <= h.bounds[i - 1]))
      o.fail(o.at("bounds"), "expected increasing finite seconds");
  const json& buckets = o.need("buckets", "array");
  if (!buckets.is_array())
    o.fail(o.at("buckets"), "expected an array of counts, got " + json_type_of(buckets));
  for (const auto& c : buckets) h.buckets.push_back(count_at(o, c, o.at("buckets")));
  if (h.buckets.size() != h.bounds.size() + 1)
    o.fail(o.at("buckets"), "expected one count per bound and one above");
  h.sum = seconds_at(o, o.need("sum", "number"), o.at("sum"));
  o.finish();
  return h;
}

// The incident counters and the replicas out (added with them; absent in older journals,
// which resume with zeros and every replica in the quorum).
void parse_incidents(Reader& r, JournalState& s) {
  if (const json* incidents = r.get("incidents")) {
    Reader o(*incidents, "incidents");
    if (const json* opened = o.get("opened")) {
      if (!opened->is_object())
        o.fail(o.at("opened"),
               "expected an object of counts by category, got " + json_type_of(*opened));
      for (const auto& [k, v] : opened->items())
        s.incidents.opened[k] = count_at(o, v, o.at("opened") + "." + k);
    }
    if (const json* closed = o.get("closed")) {
      if (!closed->is_array()) o.fail(o.at("closed"), "expected [category, resolution, n] rows");
      for (const auto& c : *closed) {
        if (!c.is_array() || c.size() != 3 || !c.at(0).is_string() || !c.at(1).is_string())
          o.fail(o.at("closed"), "expected [category, resolution, n] rows");
        s.incidents.closed[{c.at(0).get<std::string>(), c.at(1).get<std::string>()}] =
            count_at(o, c.at(2), o.at("closed"));
      }
    }
    if (const json* d = o.get("detection"))
      s.incidents.detection = parse_latency(*d, o.at("detection"));
    if (const json* d = o.get("recovery"))
      s.incidents.recovery = parse_latency(*d, o.at("recovery"));
    o.finish();
  }
  const json* out = r.get("replicas_out");
  if (!out) return;
  if (!out->is_array())
    r.fail("replicas_out", "expected an array of the replicas out, got " + json_type_of(*out));
  for (std::size_t i = 0; i < out->size(); ++i) {
    Reader o((*out)[i], "replicas_out[" + std::to_string(i) + "]");
    JournalState::ReplicaOut x;
    x.replica = o.integer("replica", 0, 0, kMax64, true);
    x.cause = o.string("cause", "", true);
    x.began_ns = o.integer("began_ns", 0, 0, kMax64, true);
    x.detected_ns = o.integer("detected_ns", 0, 0, kMax64, true);
    o.finish();
    if (x.detected_ns < x.began_ns) o.fail(o.path(), "expected began_ns <= detected_ns");
    s.replicas_out.push_back(std::move(x));
  }
}

// Format 2's fields (format 1's origin_ns instead of origin_unix_ns), into `s`; the format
// read. REQUIRES "format" read.
int parse_state(Reader& r, JournalState& s) {
  int format = kJournalFormat;
  if (r.has("origin_unix_ns")) {
    s.origin_unix_ns = r.integer("origin_unix_ns", 0, kMin64, kMax64);
  } else {
    // Format 1, the first release's: a CLOCK_MONOTONIC origin, right only on the boot that
    // wrote it (after a reboot, run time would start again near 0). resume_after() takes
    // the origin from the event log instead.
    r.integer("origin_ns", 0, kMin64, kMax64, true);
    format = 1;
  }
  s.last_t_ns = r.integer("last_t_ns", s.last_t_ns, kMin64, kMax64);
  s.action_ceiling = r.unsigned_integer("action_ceiling", s.action_ceiling);
  s.gen = r.integer("gen", 0, kMin64, kMax64, true);
  s.version = r.string("version", "", true);
  s.good_version = r.string("good_version", "", true);
  s.running = r.boolean("running", false, true);
  for (const auto& [key, ids] : {std::pair{"slots", &s.slots}, std::pair{"standby", &s.standby},
                                 std::pair{"evicted", &s.evicted}})
    *ids = r.ids(r.need(key, "array"), key);
  s.ckpt_every = static_cast<int>(r.integer("ckpt_every", 0, std::numeric_limits<int>::min(),
                                            std::numeric_limits<int>::max(), true));
  s.replica_quorum = r.integer("replica_quorum", s.replica_quorum, kMin64, kMax64);
  s.replica_share_s =
      r.number("replica_share_s", s.replica_share_s, std::numeric_limits<double>::lowest(),
               std::numeric_limits<double>::max());
  s.first_step = r.integer("first_step", 0, kMin64, kMax64, true);
  s.last_step = r.integer("last_step", 0, kMin64, kMax64, true);
  s.next_action = r.unsigned_integer("next_action", 0, true);
  r.need("step_times", "array");
  s.step_times = r.numbers("step_times");
  // Added with the repair pipeline; absent in older journals.
  if (const json* strikes = r.get("strikes")) {
    if (!strikes->is_array()) r.fail("strikes", "expected an array of [machine, strikes] pairs");
    for (std::size_t i = 0; i < strikes->size(); ++i) {
      const std::string where = "strikes[" + std::to_string(i) + "]";
      const auto pair = r.ids((*strikes)[i], where);
      if (pair.size() != 2) r.fail(where, "expected [machine, strikes]");
      s.strikes[pair[0]] = pair[1];
    }
  }
  if (r.has("retired")) s.retired = r.ids("retired");
  s.ended_verdict = r.string("ended_verdict", s.ended_verdict);
  if (r.has("machine_names")) s.machine_names = r.strings("machine_names");
  parse_account(r, s);
  parse_incidents(r, s);
  r.finish();
  return format;
}

json latency_json(const JournalState::Latency& h) {
  return {{"bounds", h.bounds}, {"buckets", h.buckets}, {"sum", h.sum}};
}

json incidents_json(const JournalState& s) {
  json closed = json::array();
  for (const auto& [k, n] : s.incidents.closed) closed.push_back({k.first, k.second, n});
  json out{{"opened", s.incidents.opened}, {"closed", std::move(closed)}};
  if (!s.incidents.detection.buckets.empty())
    out["detection"] = latency_json(s.incidents.detection);
  if (!s.incidents.recovery.buckets.empty()) out["recovery"] = latency_json(s.incidents.recovery);
  return out;
}

}  // namespace

bool Journal::load(std::string* err) {
  std::ifstream in(path_);
  if (!in) {
    resumed_ = false;
    return true;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), err);
}

bool Journal::parse(const std::string& text, std::string* err) {
  try {
    const json j = json::parse(text);
    Reader r(j, "");
    if (const json* f = r.get("format")) {
      if (!f->is_number_integer() ||
          (f->get<std::int64_t>() != 1 && f->get<std::int64_t>() != kJournalFormat)) {
        *err = path_ + ": format: expected a journal of format 1 or " +
               std::to_string(kJournalFormat) + " (what this release reads), got " +
               json_brief(*f) +
               " (a journal of a newer release: run that release, or start over with --fresh)";
        return false;
      }
    }
    JournalState s;
    const int format = parse_state(r, s);
    state_ = std::move(s);
    format_read_ = format;
  } catch (const std::exception& e) {
    *err = path_ + ": (journal): expected a faultline controller journal (" + e.what() + ")";
    return false;
  }
  resumed_ = true;
  return true;
}

bool Journal::resume_after(const std::optional<EventLogEnd>& log, std::string* err) {
  if (!resumed_) return true;
  if (format_read_ == 1) {
    if (!log) {
      *err = path_ + ": origin_ns: expected origin_unix_ns (journal format " +
             std::to_string(kJournalFormat) +
             "); this journal of format 1 (an earlier release) has its time origin on the "
             "monotonic clock of the boot that wrote it, and no event log beside it tells the "
             "run's time: finish the run with that release, or start over with --fresh";
      return false;
    }
    // Run time goes on from the log's last record, plus the wall time since it was written.
    state_.origin_unix_ns = log->written_unix_ns - log->t_ns;
    format_read_ = kJournalFormat;  // saved as such from now on
  }
  if (log) state_.last_t_ns = std::max(state_.last_t_ns, log->t_ns);
  return true;
}

std::optional<EventLogEnd> event_log_end(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  // The last complete line with a time, from the tail (records are short; a torn last line,
  // left by a crash mid-write, is passed over).
  constexpr off_t kTail = 256 * 1024;
  const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
  std::string tail(static_cast<std::size_t>(st.st_size - from), '\0');
  std::size_t got = 0;
  while (got < tail.size()) {
    const ssize_t n = ::pread(fd, tail.data() + got, tail.size() - got, from + off_t(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  tail.resize(got);
  std::optional<EventLogEnd> end;
  std::size_t stop = tail.size();
  while (stop > 0 && !end) {
    const std::size_t nl = tail.rfind('\n', stop - 1);
    const std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
    if (begin == 0 && from > 0) break;  // a line cut by the tail's start
    const json j = json::parse(tail.substr(begin, stop - begin), nullptr, false);
    if (j.is_object() && j.contains("t_s") && j.at("t_s").is_number()) {
      const double t = j.at("t_s").get<double>();
      if (std::isfinite(t) && t >= 0 && t < 1e12)
        end = EventLogEnd{
            static_cast<std::int64_t>(std::ceil(t * 1e9)),
            static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    }
    if (nl == std::string::npos) break;
    stop = nl;
  }
  return end;
}

bool Journal::save(std::string* err) {
  json j;
  j["format"] = kJournalFormat;
  j["origin_unix_ns"] = state_.origin_unix_ns;
  j["last_t_ns"] = state_.last_t_ns;
  j["action_ceiling"] = state_.action_ceiling;
  j["gen"] = state_.gen;
  j["version"] = state_.version;
  j["good_version"] = state_.good_version;
  j["running"] = state_.running;
  j["slots"] = state_.slots;
  j["standby"] = state_.standby;
  j["evicted"] = state_.evicted;
  j["ckpt_every"] = state_.ckpt_every;
  j["replica_quorum"] = state_.replica_quorum;
  j["replica_share_s"] = state_.replica_share_s;
  j["first_step"] = state_.first_step;
  j["last_step"] = state_.last_step;
  j["next_action"] = state_.next_action;
  j["step_times"] = state_.step_times;
  j["strikes"] = json::array();
  for (const auto& [m, n] : state_.strikes) j["strikes"].push_back({m, n});
  j["retired"] = state_.retired;
  j["ended_verdict"] = state_.ended_verdict;
  j["machine_names"] = state_.machine_names;
  j["lost_s"] = state_.lost_s;
  if (state_.stop) {
    const auto& p = *state_.stop;
    j["stop"] = {{"category", p.category},
                 {"cause", p.cause},
                 {"began_ns", p.began_ns},
                 {"detected_ns", p.detected_ns},
                 {"restart_began_ns", p.restart_began_ns},
                 {"waited_ns", p.waited_ns},
                 {"waiting_since_ns", p.waiting_since_ns}};
  }
  j["incidents"] = incidents_json(state_);
  j["replicas_out"] = json::array();
  for (const auto& r : state_.replicas_out)
    j["replicas_out"].push_back({{"replica", r.replica},
                                 {"cause", r.cause},
                                 {"began_ns", r.began_ns},
                                 {"detected_ns", r.detected_ns}});
  const std::string tmp = path_ + ".tmp";
  // The previous journal is replaced only by a whole, synced new one: a failure anywhere
  // before the rename leaves it as it was, and the partial temporary file is removed
  // (on a full disk it holds space the retry will need).
  auto fail = [&](const std::string& file, int e) {
    ::unlink(tmp.c_str());
    *err = file + ": " + std::strerror(e);
    health_.failed(*err);
    health_.pending = 1;
    return false;
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(tmp, errno);
  int e = 0;
  errno = 0;
  if (!write_all(fd, j.dump() + "\n") || ::fsync(fd) != 0) e = errno ? errno : EIO;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) return fail(tmp, e);
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return fail(path_, errno);
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  if (health_.failing) {
    health_.failing = false;
    health_.written_late = 1;
  }
  health_.pending = 0;
  return true;
}

OutageMarker::~OutageMarker() {
  if (fd_ >= 0) ::close(fd_);
}

bool OutageMarker::open(std::string* err) {
  {
    std::ifstream in(path_);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    const json j = json::parse(ss.str(), nullptr, false);
    try {
      if (j.is_object() && j.value("open", false)) {
        Reader r(j, "");
        r.boolean("open", false);
        Outage o;
        o.pending = r.unsigned_integer("pending", 0, true);
        o.lost = r.unsigned_integer("lost", 0, true);
        o.since_unix_ms = r.integer("since_unix_ms", 0, kMin64, kMax64, true);
        o.first_t_s = r.real("first_t_s", 0, true);
        o.last_t_s = r.real("last_t_s", 0, true);
        o.error = r.string("error", "", true);
        r.finish();
        // What a controller writes, or not believed: at most a full backlog waits, run
        // times are finite and in order, the clock is past 1970.
        if (o.pending == 0 || o.pending > traces::EventLogWriter::kBacklogRecords)
          ignored_ = "pending " + std::to_string(o.pending) + " is not in [1, " +
                     std::to_string(traces::EventLogWriter::kBacklogRecords) + "]";
        else if (!std::isfinite(o.first_t_s) || !std::isfinite(o.last_t_s) || o.first_t_s < 0 ||
                 o.last_t_s < o.first_t_s)
          ignored_ = "first_t_s and last_t_s are not finite times with 0 <= first_t_s <= last_t_s";
        else if (o.since_unix_ms <= 0)
          ignored_ = "since_unix_ms is not a time after 1970";
        else if (o.error.size() > 1024)
          ignored_ = "error is longer than 1024 bytes";
        else
          previous_ = o;
      }
    } catch (const std::exception& e) {
      // A marker that does not read as one is no outage (it is rewritten below).
      ignored_ = std::string("not an outage marker: ") + e.what();
    }
  }
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    *err = path_ + ": " + std::strerror(errno);
    return false;
  }
  // The blocks are allocated now, while there is space; later writes overwrite them.
  const std::string blank(kBytes, ' ');
  if (::pwrite(fd_, blank.data(), blank.size(), 0) != static_cast<ssize_t>(blank.size()) ||
      ::fsync(fd_) != 0) {
    *err = path_ + ": " + std::strerror(errno ? errno : ENOSPC);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  clear();
  return true;
}

void OutageMarker::write(const std::string& text) {
  if (fd_ < 0) return;
  std::string block = text.substr(0, kBytes - 1) + "\n";
  block.resize(kBytes, ' ');
  if (::pwrite(fd_, block.data(), block.size(), 0) == static_cast<ssize_t>(block.size()))
    ::fdatasync(fd_);
}

void OutageMarker::set(const Outage& o) {
  if (current_ && *current_ == o) return;
  current_ = o;
  clear_on_disk_ = false;
  write(json{{"open", true},
             {"pending", o.pending},
             {"lost", o.lost},
             {"since_unix_ms", o.since_unix_ms},
             {"first_t_s", o.first_t_s},
             {"last_t_s", o.last_t_s},
             {"error", o.error.substr(0, 1024)}}
            .dump(-1, ' ', false, json::error_handler_t::replace));
}

void OutageMarker::clear() {
  current_.reset();
  if (clear_on_disk_) return;
  clear_on_disk_ = true;
  write(json{{"open", false}}.dump());
}

}  // namespace faultline::live
