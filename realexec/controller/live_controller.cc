#include "realexec/controller/live_controller.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "realexec/controller/controller_internal.h"
#include "realexec/controller/host_liveness.h"
#include "traces/config.h"

namespace faultline::live {

using nlohmann::json;
using namespace controller_detail;

namespace {

// "3.1": seconds as an operator reads them in a note.
std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::vector<std::string> names_of(const LiveConfig& c) {
  std::vector<std::string> out;
  for (const auto& m : c.machines) out.push_back(m.name);
  for (const auto& m : c.standby) out.push_back(m.name);
  return out;
}

// `c` with its machines in the order of the run its state directory holds (the journal's
// machine_names): machine ids index that order in the journal and in every record of the
// event log, so a config whose `machines` or `standby` were reordered is put back in the
// run's order instead of giving the log's earlier records other names. Standbys new to the
// run come after the known ones. A machine of the run that would still take another id (it
// moved to the other list, or one before it was removed) is refused in one line.
LiveConfig in_run_order(const LiveConfig& c, bool fresh) {
  if (fresh) return c;
  std::ifstream in(c.state_dir + "/journal.json");
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("machine_names") || !j["machine_names"].is_array()) return c;
  std::vector<std::string> was;
  for (const auto& n : j["machine_names"])
    if (n.is_string()) was.push_back(n.get<std::string>());
  const auto index = [&](const std::string& n) {
    return static_cast<std::size_t>(std::find(was.begin(), was.end(), n) - was.begin());
  };
  LiveConfig out = c;
  const auto by_run_order = [&](const LiveMachine& a, const LiveMachine& b) {
    return index(a.name) < index(b.name);
  };
  std::stable_sort(out.machines.begin(), out.machines.end(), by_run_order);
  std::stable_sort(out.standby.begin(), out.standby.end(), by_run_order);
  const std::vector<std::string> now = names_of(out);
  for (std::size_t i = 0; i < now.size(); ++i) {
    const std::size_t at = index(now[i]);
    if (at == was.size() || at == i) continue;
    std::string list;
    for (const auto& n : was) list += (list.empty() ? "" : ", ") + n;
    throw std::runtime_error(
        c.file + ": " + (i < out.machines.size() ? "machines" : "standby") + ": " + now[i] +
        " would be machine " + std::to_string(i) + " of the run in " + c.state_dir +
        ", which knows it as machine " + std::to_string(at) + " (journal.json machine_names: " +
        list + "); expected the run's machines in the same lists, or a new run (--fresh)");
  }
  return out;
}

}  // namespace

Controller::Controller(const LiveConfig& config, const Registry& registry, Reactor& reactor,
                       bool fresh)
    : config_(in_run_order(config, fresh)),
      reactor_(reactor),
      storage_(config_.state_dir + "/outage"),
      acceptor_(reactor),
      bad_credential_notes_(kBadCredentialLinesPerMinute),
      session_notes_{NoteWindow(kSessionLinesPerMinute), NoteWindow(kSessionLinesPerMinute)} {
  std::string err;
  if (!load_token(config_.token_file, &token_, &err)) throw std::runtime_error(err);
  for (std::size_t i = 0; i < config_.machines.size(); ++i)
    machine_ids_.emplace(config_.machines[i].name, static_cast<MachineId>(i));
  for (std::size_t i = 0; i < config_.standby.size(); ++i)
    machine_ids_.emplace(config_.standby[i].name,
                         static_cast<MachineId>(config_.machines.size() + i));
  if (!config_.status_token_file.empty()) {
    if (!load_token(config_.status_token_file, &status_token_, &err)) throw std::runtime_error(err);
    if (tokens_equal(status_token_, token_))
      throw std::runtime_error(config_.status_token_file +
                               ": token: the read-only credential equals token_file's");
  }
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported like a full disk,
  // instead of killing the controller.
  std::signal(SIGXFSZ, SIG_IGN);
  std::error_code ec;
  std::filesystem::create_directories(config_.state_dir, ec);
  if (ec)
    throw std::runtime_error(config_.state_dir +
                             ": cannot create the state directory: " + ec.message());
  lock_.take(config_.state_dir, fresh);
  const std::string journal_path = config_.state_dir + "/journal.json";
  const std::string log_path = config_.state_dir + "/events.jsonl";
  if (fresh) {
    std::filesystem::remove(journal_path, ec);
    std::filesystem::remove(log_path, ec);
  }
  journal_ = std::make_unique<Journal>(journal_path);
  if (!journal_->load(&err)) throw std::runtime_error(err);
  // Run time goes on from where the event log ended (it never goes back), and a journal of
  // the first release's format takes its origin from there or is refused.
  const bool migrated = journal_->resumed() && journal_->format_read() == 1;
  const std::optional<EventLogEnd> log_end = event_log_end(log_path);
  if (!journal_->resume_after(log_end, &err)) throw std::runtime_error(err);
  // A log deleted or rotated away leaves a resumed run with a new, empty one: it gets a header
  // of its own (readers refuse a log without one), and a note that the earlier log is gone.
  const bool new_log = std::filesystem::file_size(log_path, ec) == 0 || ec;
  OutageMarker& marker = storage_.marker();
  if (fresh) std::filesystem::remove(marker.path(), ec);
  if (!marker.open(&err))
    throw std::runtime_error(err + " (the state directory needs room for its outage marker)");
  try {
    log_ = std::make_unique<traces::EventLogWriter>(log_path);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  world_ = std::make_unique<LiveWorld>(config_, registry, reactor_, *this, *log_, *journal_);
  begin_log(registry, log_path, new_log, names_of(config_) != names_of(config));
  if (migrated) {
    const std::string line =
        journal_path + ": a journal of format 1 (an earlier release) migrated to format " +
        std::to_string(kJournalFormat) + ": run time goes on from the event log's last record (" +
        fmt_s(Duration{log_end->t_ns}.to_seconds()) + " s) plus the wall time since it was written";
    world_->note(line);
    std::cerr << log_stamp() << " faultline live: " << line << "\n";
  }
  if (const auto& gap = marker.previous(); gap && journal_->resumed()) {
    // The previous controller died with records waiting for a failing disk: they are gone,
    // and the log says so where they would have been.
    const std::uint64_t n = gap->pending;
    world_->lost_before_restart(n);
    world_->note("event log gap: " + std::to_string(n) + " records (run time " +
                 std::to_string(gap->first_t_s) + " to " + std::to_string(gap->last_t_s) +
                 " s) waited in memory for a failing disk since " + utc_stamp(gap->since_unix_ms) +
                 " (" + gap->error + ") when the previous controller stopped; they are lost");
    std::cerr << log_stamp() << " faultline live: the event log " << log_path << " has a gap: " << n
              << " records lost when the previous controller stopped during a storage outage ("
              << gap->error << ")\n";
  }
  if (!marker.ignored().empty() && journal_->resumed()) {
    world_->note("outage marker " + marker.path() + " ignored: " + marker.ignored() +
                 "; no event log gap is assumed");
    std::cerr << log_stamp() << " faultline live: " << marker.path()
              << " ignored: " << marker.ignored() << "\n";
  }
  world_->on_log_pending([this](double t_s) { storage_.mark_outage(log_->health(), t_s); });
  if (!acceptor_.listen(config_.controller_host, config_.controller_port, &err))
    throw std::runtime_error(config_.file + ": controller: cannot listen on " +
                             config_.controller_host + ":" +
                             std::to_string(config_.controller_port) + ": " + err);
  if (config_.metrics_port > 0) start_metrics();
}

// This controller's first records: the header when the log is new (a resumed run's log that
// was deleted or rotated away gets one too, and a note that the earlier log is gone), and a
// note when the config's machines were put back in the run's order.
void Controller::begin_log(const Registry& registry, const std::string& log_path, bool new_log,
                           bool reordered) {
  if (new_log || !journal_->resumed())
    write_header(registry, journal_->resumed() ? world_->now().to_seconds() : 0.0);
  if (new_log && journal_->resumed()) {
    const std::string line = log_path +
                             ": the event log was empty or missing although the journal resumes "
                             "generation " +
                             std::to_string(journal_->state().gen) +
                             ": the earlier log was deleted or rotated away; this one begins at "
                             "run time " +
                             fmt_s(world_->now().to_seconds()) + " s with a header of its own";
    world_->note(line);
    std::cerr << log_stamp() << " faultline live: " << line << "\n";
  }
  if (reordered)
    world_->note(config_.file +
                 ": the machines are listed in another order than in the run it resumes: the "
                 "run's order is kept, so that the journal's and the event log's machine ids "
                 "name the same machines as before");
}

// The event log's first record: what `sim replay` and `faultline report` need to read it.
void Controller::write_header(const Registry& registry, double t_s) {
  const ClusterSpec spec = config_.cluster_spec();
  traces::EventLogHeader h;
  h.stack = config_.stack;
  h.params = {config_.params.values().begin(), config_.params.values().end()};
  h.choices = {config_.params.choices().begin(), config_.params.choices().end()};
  h.seed = config_.seed;
  h.machines = spec.machines;
  h.gpus_per_machine = spec.gpus_per_machine;
  h.tp = spec.tp;
  h.pp = spec.pp;
  h.dp = spec.dp;
  h.standby_machines = spec.standby_machines;
  h.nominal_step_time_s = config_.job.nominal_step_time_s;
  h.checkpoint_every_steps = journal_->state().ckpt_every;
  h.config_file = std::filesystem::absolute(config_.file).string();
  h.machine_names = names_of(config_);
  log_->header(t_s, h);
}

void Controller::start_metrics() {
  std::string token, err;
  if (!config_.metrics_token_file.empty()) {
    if (!load_token(config_.metrics_token_file, &token, &err)) throw std::runtime_error(err);
    if (tokens_equal(token, token_) ||
        (!status_token_.empty() && tokens_equal(token, status_token_)))
      throw std::runtime_error(config_.metrics_token_file +
                               ": token: the metrics credential equals a control credential");
  }
  const int fd = listen_tcp(config_.metrics_host, config_.metrics_port, &err);
  if (fd < 0)
    throw std::runtime_error(config_.file + ": metrics_listen: cannot listen on " +
                             config_.metrics_host + ":" + std::to_string(config_.metrics_port) +
                             ": " + err);
  metrics_ = std::make_unique<MetricsServer>(reactor_, fd, std::move(token),
                                             [this] { return render(world_->metrics()); });
}

Controller::~Controller() {
  metrics_.reset();
  sessions_.clear();
  acceptor_.close();
  lock_.release();  // releases the state directory
}

void Controller::check_fd_limit() {
  // What the controller can hold at once is bounded by design: one session per machine, the
  // clients of each access, the unauthenticated connections, /metrics's connections, and a
  // reserve for its own files, pipes and timers. The soft limit goes up to the hard one; a
  // hard limit below the bound is said now (accept() then fails with EMFILE: accepts pause a
  // quarter second at a time, noted, instead of spinning).
  const rlim_t need = config_.machines.size() + config_.standby.size() + 2 * kMaxClientsPerAccess +
                      kMaxUnauthenticated + (metrics_ ? kMaxConnections : 0) + kReservedFds;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur >= need) return;
  std::cerr << log_stamp() << " faultline live: the fd limit (RLIMIT_NOFILE) is " << rl.rlim_cur
            << ", below the " << need << " this config can hold at once ("
            << config_.machines.size() << " machines, " << config_.standby.size()
            << " standbys, clients, unauthenticated and /metrics connections, and " << kReservedFds
            << " of its own); raise LimitNOFILE (ulimit -n)\n";
}

int Controller::run(double duration_s) {
  run_started_ = reactor_.now();
  check_fd_limit();
  acceptor_.start([this] { on_accept(); });
  // SIGTERM/SIGINT stop the controller only: the agents keep the job running and a
  // restarted controller adopts it. `faultline live stop` ends the whole run.
  reactor_.on_signal(SIGTERM, [this] { reactor_.stop(); });
  reactor_.on_signal(SIGINT, [this] { reactor_.stop(); });
  if (duration_s > 0)
    reactor_.add_timer(Duration::seconds(duration_s), [this] { shutdown("run duration reached"); });
  // The policy starts once every machine's agent has said hello, or after
  // kStartupWaitS with whatever has connected (a missing machine is then a failure the
  // policy handles like any other).
  reactor_.add_timer(Duration::seconds(kStartupWaitS), [this] { start_world(); });
  std::uint64_t finish_timer = 0;
  std::function<void()> poll_finished = [&] {
    finish_timer = reactor_.add_timer(Duration::seconds(0.5), poll_finished);
    watch_storage();
    if (world_->finished())
      shutdown(world_->ended_verdict().empty()
                   ? "the job finished"
                   : "the policy ended the run: " + world_->ended_verdict());
  };
  poll_finished();
  reactor_.run();
  if (finish_timer) reactor_.cancel_timer(finish_timer);
  watch_storage();  // a last try for what still waits
  int code = world_->ended_verdict().empty() ? 0 : kExitEndedRun;
  std::cout << std::flush;
  if (journal_->health().failing)
    std::cerr << log_stamp() << " faultline live: the journal could not be saved since "
              << utc_stamp(journal_->health().since_unix_ms) << " ("
              << journal_->health().last_error
              << "): a restarted controller resumes from the previous journal\n";
  const traces::StorageHealth& h = log_->health();
  if (const std::uint64_t lost = h.lost + h.pending + world_->lost_before_restart(); lost > 0) {
    // What still waits in the backlog now is lost with the process.
    std::cerr << log_stamp() << " faultline live: the event log " << log_->path()
              << " is incomplete: " << lost << " records lost to write failures (" << h.last_error
              << ")" << (code == 0 ? "; exit status " + std::to_string(kExitLostRecords) : "")
              << "\n";
    if (code == 0) code = kExitLostRecords;
  }
  std::cerr << std::flush;
  return code;
}

void Controller::watch_storage() {
  storage_.watch(*log_, *journal_, [this](const std::string& line) {
    if (!shutting_down_) world_->note(line);  // never after the summary
  });
}

bool Controller::awaited(MachineId m) const {
  // A resumed run does not wait for machines its journal has out of service (evicted,
  // retired): their agents may never return (a drained Slurm node, a host in repair), and
  // the run goes on without them; one that does come back is taken as it connects.
  if (!journal_->resumed()) return true;
  const JournalState& st = journal_->state();
  auto has = [m](const std::vector<MachineId>& v) {
    return std::find(v.begin(), v.end(), m) != v.end();
  };
  return !has(st.evicted) && !has(st.retired);
}

void Controller::start_world() {
  if (world_started_) return;
  world_started_ = true;
  world_->start();
}

void Controller::shutdown(const std::string& why) {
  if (shutting_down_) return;
  shutting_down_ = true;
  start_world();
  world_->note("shutdown: " + why);
  const double ettr = world_->write_summary();
  // The load this controller carried (live-scale.sh reads it; on stderr, so that stdout's
  // last line stays the run's result).
  std::cerr << log_stamp() << " faultline live: load: " << heartbeats_
            << " heartbeats from agents, " << agent_messages_ << " other agent messages in "
            << (reactor_.now() - run_started_).to_seconds() << " s\n";
  std::cout << log_stamp() << " faultline live: " << why << "; measured ETTR " << ettr << "\n"
            << std::flush;
  for (auto& [sid, s] : sessions_.all())
    if (s.role == Session::Role::kAgent && s.open())
      s.conn->send(json{{"type", "shutdown"}, {"req", kOwnReqBase}});
  // Give the agents a moment to receive it, and a scraper its chance at the final values.
  const double linger_s = metrics_ ? std::max(0.5, config_.metrics_linger_s) : 0.5;
  reactor_.add_timer(Duration::seconds(linger_s), [this] { reactor_.stop(); });
}

bool Controller::send(MachineId m, const json& msg) {
  Session* s = sessions_.agent(m);
  return s && s->conn->send(msg);
}

bool Controller::connected(MachineId m) const { return sessions_.agent(m) != nullptr; }

double Controller::silent_s(MachineId m) const {
  const Session* s = sessions_.agent(m);
  return s ? (reactor_.now() - s->last_heard).to_seconds() : 0;
}

void Controller::arm_heartbeat(std::uint64_t sid) {
  Session* s = sessions_.find(sid);
  if (!s) return;
  if (s->timer) reactor_.cancel_timer(s->timer);
  s->timer = reactor_.add_timer(Duration::seconds(config_.heartbeat_timeout_s),
                                [this, sid] { check_heartbeat(sid); });
}

// The rules are docs/running-live.md's "Heartbeats and timeouts". The timer is not moved
// with every message (a busy fleet sends thousands a second): it fires, looks at how long
// the agent has been silent, and sleeps again for what is left.
void Controller::check_heartbeat(std::uint64_t sid) {
  Session* found = sessions_.find(sid);
  if (!found) return;
  Session& s = *found;
  s.timer = 0;
  const double silence = (reactor_.now() - s.last_heard).to_seconds();
  const double timeout = config_.heartbeat_timeout_s;
  auto again = [&](double after_s) {
    s.timer = reactor_.add_timer(Duration::seconds(after_s), [this, sid] { check_heartbeat(sid); });
  };
  if (silence < timeout) return again(timeout - silence);
  const std::string who = s.machine == kNoMachine ? s.conn->peer() : config_machine_name(s.machine);
  const bool answers = host_answers(s.fd, silence, timeout);
  if (answers && silence < config_.stalled_agent_timeout_s) {
    if (!s.stall_noted)
      world_->note("the agent of " + who + " is silent for " + fmt_s(silence) +
                   " s but its host answers (a stopped or starved process: a checkpoint save, "
                   "swap); waiting up to stalled_agent_timeout_s " +
                   fmt_s(config_.stalled_agent_timeout_s) + " s");
    s.stall_noted = true;
    return again(std::min(config_.heartbeat_s, config_.stalled_agent_timeout_s - silence));
  }
  s.conn->close("no heartbeat for " + fmt_s(silence) + " s" +
                (answers ? " (its host answers: stalled_agent_timeout_s passed)"
                         : " and its host does not answer"));
}

void Controller::on_message(std::uint64_t sid, const json& msg) {
  Session* found = sessions_.find(sid);
  if (!found) return;
  Session& s = *found;
  // Every message is decoded before anything is done with it (realexec/net/messages.h); one
  // that does not decode is refused with its reason and noted, and the process carries on.
  try {
    if (s.role == Session::Role::kHello) return on_hello(sid, decode_hello(msg, kProtocolVersion));
    if (s.role == Session::Role::kChallenged) {
      const Auth auth = decode_auth(msg);
      const Hello& h = s.handshake.hello();
      if (!s.handshake.verify(h.read_only ? status_token_ : token_, auth))
        return refuse(sid, "bad token");
      return on_authenticated(sid, auth);
    }
    if (s.role == Session::Role::kClient) {
      if (s.idle_timer) arm_client_idle(sid);
      json req = 0;
      try {
        return on_client(sid, s, decode_client_request(msg, &req));
      } catch (const BadMessage& e) {
        note_refusal(s, e.reason);
        s.conn->send(json{{"type", "done"}, {"req", req}, {"ok", false}, {"detail", e.reason}});
        return;
      }
    }
    if (s.stall_noted)
      world_->note("the agent of " + config_machine_name(s.machine) + " is heard again after " +
                   fmt_s((reactor_.now() - s.last_heard).to_seconds()) + " s of silence");
    s.stall_noted = false;
    s.last_heard = reactor_.now();
    if (!s.timer) arm_heartbeat(sid);
    // An agent's messages are not requests: a refusal is noted, never answered (an answer
    // to an agent that did not understand it would be refused in turn, without end).
    if (auto t = msg.find("type"); t != msg.end() && t->is_string() && *t == "heartbeat")
      ++heartbeats_;
    else
      ++agent_messages_;
    world_->on_agent_message(s.machine, msg);
  } catch (const BadMessage& e) {
    if (s.role == Session::Role::kHello || s.role == Session::Role::kChallenged)
      return refuse(sid, e.reason);
    note_refusal(s, e.reason);
  } catch (const std::exception& e) {
    // A fault of ours while acting on a valid message: say so and drop that connection,
    // never the controller.
    world_->note("internal error on a message from " + s.conn->peer() + ": " + e.what() +
                 "; connection closed");
    s.conn->close("internal error");
  }
}

MachineId Controller::machine_id(const std::string& name) const {
  auto it = machine_ids_.find(name);
  return it == machine_ids_.end() ? kNoMachine : it->second;
}

bool Controller::all_awaited_connected() {
  // A cursor over the machines, so that N agents connecting cost O(N) and not O(N^2); at
  // the end one full pass confirms (an agent passed by the cursor may have gone again).
  const auto n = static_cast<MachineId>(config_.machines.size() + config_.standby.size());
  auto ready = [this](MachineId x) { return connected(x) || !awaited(x); };
  while (await_cursor_ < n && ready(await_cursor_)) ++await_cursor_;
  if (await_cursor_ < n) return false;
  for (MachineId x = 0; x < n; ++x) {
    if (!ready(x)) {
      await_cursor_ = x;
      return false;
    }
  }
  return true;
}

std::string Controller::config_machine_name(MachineId m) const {
  if (m >= 0 && static_cast<std::size_t>(m) < config_.machines.size() + config_.standby.size())
    return config_.machine(m).name;
  return "machine " + std::to_string(m);
}

void Controller::on_hello(std::uint64_t sid, const Hello& hello) {
  Session& s = sessions_.at(sid);
  if (hello.read_only && status_token_.empty())
    return refuse(sid, "read-only access is not configured (the config has no status_token_file)");
  if (hello.role == Hello::Role::kAgent && machine_id(hello.name) == kNoMachine)
    return refuse(sid, "unknown machine \"" + hello.name.substr(0, 64) + "\"");
  s.role = Session::Role::kChallenged;
  s.conn->send(s.handshake.challenge(hello.read_only ? status_token_ : token_, hello));
}

void Controller::on_authenticated(std::uint64_t sid, const Auth& auth) {
  Session& s = sessions_.at(sid);
  const Hello hello = s.handshake.hello();
  leave_unauthenticated(sid, s);
  if (s.timer) reactor_.cancel_timer(s.timer);
  s.timer = 0;
  s.conn->set_max_frame(kMaxFrameBytes);
  if (hello.role == Hello::Role::kClient) {
    make_room_clients(hello.read_only);
    s.role = Session::Role::kClient;
    s.read_only = hello.read_only;
    arm_client_idle(sid);
    s.conn->send(json{
        {"type", "welcome"}, {"role", "client"}, {"access", hello.read_only ? "read" : "admin"}});
    return;
  }
  const std::string& name = hello.name;
  const MachineId m = machine_id(name);
  if (m == kNoMachine) return refuse(sid, "unknown machine \"" + name.substr(0, 64) + "\"");
  if (const std::uint64_t old = sessions_.bound(m); old != 0 && old != sid) {
    Session* os = sessions_.find(old);
    // A session is bound to its machine: while the one there is live (heard from within
    // heartbeat_timeout_s) a second hello for the name is refused; a restarted agent gets
    // in once the old session has closed or gone silent.
    if (os && os->open() &&
        reactor_.now() - os->last_heard < Duration::seconds(config_.heartbeat_timeout_s))
      return refuse(sid, name + " already has a live session (from " + os->conn->peer() + ")");
    sessions_.unbind(m);
    if (os) {
      os->machine = kNoMachine;  // replaced: its close is not a loss
      os->conn->close("replaced by a new connection");
    }
  }
  s.role = Session::Role::kAgent;
  s.machine = m;
  s.last_heard = reactor_.now();
  sessions_.bind(m, sid);
  const bool in_job = world_->cluster().slot_of(m) >= 0;
  s.conn->send(json{{"type", "welcome"},
                    {"machine", name},
                    {"machine_id", m},
                    {"role", in_job ? "job" : "standby"}});
  arm_heartbeat(sid);
  world_->on_agent_connected(m, auth);
  if (!world_started_ && all_awaited_connected()) reactor_.defer([this] { start_world(); });
}

void Controller::on_close(std::uint64_t sid, const std::string& why) {
  Session* found = sessions_.find(sid);
  if (!found) return;
  Session& s = *found;
  const MachineId m = s.machine;
  const bool agent = s.role == Session::Role::kAgent;
  if (s.role == Session::Role::kChallenged) {
    const Hello& h = s.handshake.hello();
    note_unauthenticated("connection from " + s.conn->peer() + " (" + h.proof_role() +
                         (h.name.empty() ? "" : " " + h.name) +
                         ") closed before answering the challenge: it did not prove the token (" +
                         why + ")");
  }
  if (s.role == Session::Role::kHello && why != "peer closed the connection")
    // Frame-level garbage (a bad length, bytes that are no JSON, bad UTF-8) closes the
    // connection before any message: the reason is said, like any refusal.
    note_unauthenticated("connection from " + s.conn->peer() + " closed before its hello: " + why);
  if (s.timer) reactor_.cancel_timer(s.timer);
  if (s.idle_timer) reactor_.cancel_timer(s.idle_timer);
  // Destroy the connection after this callback returns.
  auto conn = std::shared_ptr<Conn>(std::move(s.conn));
  leave_unauthenticated(sid, s);
  sessions_.erase(sid);  // s is gone
  reactor_.defer([conn] {});
  if (agent && m != kNoMachine && sessions_.closed_agent(m, sid) && !shutting_down_)
    world_->on_agent_lost(m, why);
}

}  // namespace faultline::live
