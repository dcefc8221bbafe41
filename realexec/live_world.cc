#include "realexec/live_world.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "policies/api/registry.h"
#include "realexec/wire.h"
#include "traces/config.h"
#include "traces/stats.h"

extern char** environ;

namespace faultline::live {

using nlohmann::json;
using traces::to_json;

namespace {

constexpr std::uint64_t kActionIdBlock = 256;
constexpr double kRequestTimeoutS = 30;
constexpr double kInjectTimeoutS =
    15;  // within `live inject`'s 20 s   // plain agent requests (kill, launch, capture)
constexpr double kReplayTimeoutS = 300;
constexpr int kGoodVersionSteps = 20;  // steps a version must run to become the rollback target
constexpr double kHealthyStep = 1.5;  // accounting: a step this much over the median is not nominal
constexpr int kMaxActionsPerSecond = 1000;
// How long a victim's exit (a collective timeout, a peer's connection lost) waits for the
// exit of the rank that caused it: a killed rank's exit reaches its agent at once, its
// peers' errors may overtake it by the agents' round trips.
constexpr double kPeerGraceS = 1.5;

// Log lines of a rank that failed because a peer did: gloo, the NCCL watchdog, PyTorch's
// TCPStore, and faultline-trainjob's collectives. Such a rank is a victim; the world does
// not name its machine (as the simulator's watchdog exit names none).
bool is_peer_symptom(const std::string& sig) {
  // faultline-trainjob's collectives fail only because of a peer ("collective: all_gather:
  // connection to rank 3 lost (closed by peer)", "... timed out ...").
  for (const char* s :
       {"Timed out waiting", "collective operation timeout", "Connection closed by peer",
        "Connection reset by peer", "collective: ", "DistNetworkError"})
    if (sig.find(s) != std::string::npos) return true;
  return false;
}

const char* probe_wire_name(ProbeKind k) { return probe_key(k); }

using traces::median;

AgentReply failed_reply(std::string detail, bool timed_out = false) {
  AgentReply r;
  r.ok = false;
  r.detail = std::move(detail);
  r.timed_out = timed_out;
  return r;
}

// One file's part of the status "storage" field.
json storage_status(const traces::StorageHealth& h, const std::string& path,
                    std::uint64_t lost_before = 0) {
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  return json{
      {"path", path},
      {"failing", h.failing},
      {"since", h.failing ? json(utc_stamp(h.since_unix_ms)) : json(nullptr)},
      {"failing_for_s",
       h.failing ? json(static_cast<double>(now_ms - h.since_unix_ms) / 1000) : json(nullptr)},
      {"pending", h.pending},
      {"lost", h.lost + lost_before},
      {"failed_writes", h.failed_writes},
      {"outages", h.outages},
      {"last_error", h.last_error}};
}

}  // namespace

// One action that waits for several agents.
struct LiveWorld::Pending {
  int remaining = 0;
};

LiveWorld::LiveWorld(const LiveConfig& config, const Registry& registry, Reactor& reactor,
                     MachineLink& link, traces::EventLogWriter& log, Journal& journal)
    : config_(config),
      reactor_(reactor),
      link_(link),
      log_(log),
      journal_(journal),
      cluster_(config.cluster_spec()),
      rng_({config.seed, 0x11fe}),
      policy_(registry.make(config.stack, config.params)) {
  auto& s = journal_.state();
  if (!journal_.resumed()) {
    s = JournalState{};
    s.origin_unix_ns = wall_now_ns();
    s.version = config_.job.version;
    s.good_version = config_.job.version;
    for (SlotId i = 0; i < cluster_.slots(); ++i) s.slots.push_back(cluster_.machine_in(i));
    s.standby = cluster_.standby();
  } else {
    remap_machines(s);
    // Rebuild the placement the previous controller left.
    for (MachineId m : s.evicted) {
      if (m >= 0 && m < cluster_.machine_count()) {
        if (cluster_.slot_of(m) >= 0) cluster_.vacate(cluster_.slot_of(m));
        cluster_.take_standby(m);
        cluster_.set_health(m, Health::kEvicted);
      }
    }
    for (SlotId i = 0; i < cluster_.slots() && i < static_cast<SlotId>(s.slots.size()); ++i) {
      const MachineId m = s.slots[i];
      if (m == kNoMachine) {
        if (cluster_.machine_in(i) != kNoMachine) cluster_.vacate(i);
      } else if (m < cluster_.machine_count()) {
        cluster_.take_standby(m);
        cluster_.place(m, i);
      }
    }
    for (MachineId m : std::vector<MachineId>(cluster_.standby()))
      if (std::find(s.standby.begin(), s.standby.end(), m) == s.standby.end())
        cluster_.take_standby(m);
    // Ids up to the ceiling may be in the log already (issued after the last save).
    next_action_ = std::max(s.next_action, s.action_ceiling);
    healthy_step_times_ = s.step_times;
    last_step_ = s.last_step;
  }
  // Run time is wall time since the journal's origin when this controller started, then
  // monotonic time from there (a wall clock stepped by NTP later does not move it).
  origin_ = journal_.resumed() ? Instant{reactor_.now().ns - (wall_now_ns() - s.origin_unix_ns)}
                               : reactor_.now();
  if (journal_.resumed() && now().ns < s.last_t_ns) {
    // The wall clock is behind the one that wrote the journal (a host whose clock is
    // off, a clock stepped back): the run's time continues from where it was instead.
    clock_behind_s_ = Duration{s.last_t_ns - now().ns}.to_seconds();
    origin_ = Instant{reactor_.now().ns - s.last_t_ns};
  }
}

void LiveWorld::remap_machines(JournalState& s) {
  // Ids index the config's machines; the journal says which names they were. An operator
  // who reordered (or renamed) machines in the config gets each id mapped back by name
  // (a name the config no longer has leaves the run), instead of reports refused as coming
  // from the wrong slot until a stall forces a restart.
  std::vector<std::string> now;
  for (const auto& m : config_.machines) now.push_back(m.name);
  for (const auto& m : config_.standby) now.push_back(m.name);
  if (s.machine_names.empty() || s.machine_names == now) return;
  std::map<MachineId, MachineId> to;
  for (std::size_t old = 0; old < s.machine_names.size(); ++old) {
    const auto it = std::find(now.begin(), now.end(), s.machine_names[old]);
    to[static_cast<MachineId>(old)] =
        it == now.end() ? kNoMachine : static_cast<MachineId>(it - now.begin());
  }
  const auto map_one = [&](MachineId m) { return to.count(m) ? to[m] : kNoMachine; };
  const auto map_all = [&](std::vector<MachineId>& v) {
    std::vector<MachineId> out;
    for (MachineId m : v)
      if (map_one(m) != kNoMachine) out.push_back(map_one(m));
    v = std::move(out);
  };
  for (MachineId& m : s.slots)
    if (m != kNoMachine) m = map_one(m);
  map_all(s.standby);
  map_all(s.evicted);
  map_all(s.retired);
  std::map<MachineId, int> strikes;
  for (const auto& [m, n] : s.strikes)
    if (map_one(m) != kNoMachine) strikes[map_one(m)] = n;
  s.strikes = std::move(strikes);
  remapped_ = true;
}

LiveWorld::~LiveWorld() {
  for (auto& [id, t] : timers_) reactor_.cancel_timer(t);
  for (auto& [req, t] : reply_timers_) reactor_.cancel_timer(t);
  if (start_timer_) reactor_.cancel_timer(start_timer_);
  if (adopt_timer_) reactor_.cancel_timer(adopt_timer_);
}

Instant LiveWorld::now() const { return Instant{reactor_.now().ns - origin_.ns}; }

void LiveWorld::log(const std::string& kind, json fields) {
  const double t = now().to_seconds();
  fields["t_s"] = t;
  fields["kind"] = kind;
  if (!log_.write(fields) && on_log_pending_) on_log_pending_(t);
}

void LiveWorld::note(std::string_view reason) { log("note", {{"text", std::string(reason)}}); }

void LiveWorld::save_journal() {
  auto& s = journal_.state();
  s.slots.clear();
  for (SlotId i = 0; i < cluster_.slots(); ++i) s.slots.push_back(cluster_.machine_in(i));
  s.standby = cluster_.standby();
  s.evicted.clear();
  for (MachineId m = 0; m < cluster_.machine_count(); ++m)
    if (cluster_.health(m) == Health::kEvicted) s.evicted.push_back(m);
  s.machine_names.clear();
  for (const auto& m : config_.machines) s.machine_names.push_back(m.name);
  for (const auto& m : config_.standby) s.machine_names.push_back(m.name);
  s.next_action = next_action_;
  s.action_ceiling = std::max(s.action_ceiling, next_action_);
  s.last_t_ns = std::max(s.last_t_ns, now().ns);
  s.last_step = last_step_;
  s.step_times = healthy_step_times_;
  // Noted once per outage, not once per save (the event log may be failing too, and its
  // backlog is bounded); the controller reports the outage and its end.
  const bool was_failing = journal_.health().failing;
  std::string err;
  if (!journal_.save(&err) && !was_failing)
    note("journal write failed: " + err +
         "; the previous journal stays, retrying at the next save");
}

void LiveWorld::start() {
  if (journal_.resumed()) {
    log("restart",
        {{"reason", "controller restarted; resuming generation " +
                        std::to_string(journal_.state().gen) + " from " + journal_.path()}});
    if (remapped_)
      note(
          "the config's machines are in another order than when the journal was saved: mapped back "
          "by name");
    if (clock_behind_s_ > 0)
      note("the wall clock is " + std::to_string(clock_behind_s_) +
           " s behind the journal's last save: run time continues from the journal instead");
    adopting_ = journal_.state().running;
  }
  save_journal();
  started_ = true;
  delivering_ = true;
  policy_->start(*this);
  delivering_ = false;
  drain();
}

// --- events ----------------------------------------------------------------------------

void LiveWorld::deliver(Event e) {
  if (closed_) return;  // after the summary: the run is over
  if (!started_) {
    note("before the policy started: " + describe(e));
    return;
  }
  queue_.push_back(std::move(e));
  if (!delivering_ && !drain_scheduled_) {
    drain_scheduled_ = true;
    reactor_.defer([this] {
      drain_scheduled_ = false;
      drain();
    });
  }
}

void LiveWorld::drain() {
  if (delivering_) return;
  delivering_ = true;
  while (!queue_.empty()) {
    Event e = std::move(queue_.front());
    queue_.pop_front();
    log("event", {{"event", to_json(e)}});
    policy_->on_event(e, *this);
  }
  delivering_ = false;
}

void LiveWorld::outcome(ActionId id, bool ok, const std::string& detail, Instant started) {
  log("outcome",
      {{"id", id}, {"ok", ok}, {"detail", detail}, {"duration_s", (now() - started).to_seconds()}});
}

// --- requests to agents ------------------------------------------------------------------

std::uint64_t LiveWorld::request(MachineId m, json msg, Duration timeout, Reply on_reply) {
  const std::uint64_t req = next_req_++;
  msg["req"] = req;
  if (!link_.send(m, msg)) {
    reactor_.defer([on_reply] { on_reply(failed_reply("agent not connected")); });
    return req;
  }
  replies_[req] = {m, std::move(on_reply)};
  reply_timers_[req] = reactor_.add_timer(timeout, [this, req] {
    reply_timers_.erase(req);
    auto it = replies_.find(req);
    if (it == replies_.end()) return;
    Reply r = std::move(it->second.second);
    replies_.erase(it);
    r(failed_reply("agent did not answer in time", true));
  });
  return req;
}

void LiveWorld::fail_requests_of(MachineId m, const std::string& why) {
  std::vector<std::uint64_t> reqs;
  for (const auto& [req, p] : replies_)
    if (p.first == m) reqs.push_back(req);
  for (auto req : reqs) {
    Reply r = std::move(replies_[req].second);
    replies_.erase(req);
    if (auto t = reply_timers_.find(req); t != reply_timers_.end()) {
      reactor_.cancel_timer(t->second);
      reply_timers_.erase(t);
    }
    r(failed_reply(why));
  }
}

const LiveMachine& LiveWorld::machine_config(MachineId m) const {
  const int jobs = static_cast<int>(config_.machines.size());
  return m < jobs ? config_.machines[m] : config_.standby[m - jobs];
}

MachineSet LiveWorld::job_machines() const {
  MachineSet out;
  for (SlotId s = 0; s < cluster_.slots(); ++s)
    if (cluster_.machine_in(s) != kNoMachine) out.push_back(cluster_.machine_in(s));
  return out;
}

// --- actions -----------------------------------------------------------------------------

ActionId LiveWorld::act(Action a) {
  const ActionId id = next_action_++;
  if (closed_) return id;
  if (next_action_ > journal_.state().action_ceiling) {
    // Ids are reserved in blocks, the block saved before an id of it is used: a restarted
    // controller starts after the block and never repeats an id of the log.
    journal_.state().action_ceiling = next_action_ + kActionIdBlock;
    save_journal();
  }
  log("action", {{"id", id}, {"action", to_json(a)}});
  // A policy that acts without end (each failure answered by a new action) would flood
  // the log; stop the run with a clear message instead.
  if (now() - burst_start_ > Duration::seconds(1)) {
    burst_start_ = now();
    burst_actions_ = 0;
  }
  if (++burst_actions_ > kMaxActionsPerSecond) {
    note("policy livelock: more than " + std::to_string(kMaxActionsPerSecond) +
         " actions in one second; stopping");
    std::fprintf(stderr,
                 "faultline live: policy livelock (more than %d actions in one second); stopping\n",
                 kMaxActionsPerSecond);
    reactor_.stop();
    return id;
  }
  const Instant t = now();
  std::visit(
      [&](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, StartJob> || std::is_same_v<T, HotUpdate> ||
                      std::is_same_v<T, RollBack> || std::is_same_v<T, AcquireMachines>) {
          if (!journal_.state().ended_verdict.empty()) {
            const std::string why = "the run was ended: " + journal_.state().ended_verdict;
            outcome(id, false, why, t);
            deliver(ActionFailed{id, why});
            return;
          }
        }
        if constexpr (std::is_same_v<T, StopJob>) {
          do_stop(id, x);
        } else if constexpr (std::is_same_v<T, EndRun>) {
          // The job stops for good; the controller exits with kExitEndedRun.
          journal_.state().ended_verdict = x.verdict.empty() ? "ended" : x.verdict;
          save_journal();
          note("the run is ended: " + journal_.state().ended_verdict + " (" + x.reason + ")");
          do_stop(id, StopJob{"end of the run: " + x.reason});
          finished_ = true;
        } else if constexpr (std::is_same_v<T, StartJob>) {
          if (running_) {  // world.h: a start is refused while the job runs (stop it first)
            outcome(id, false, "job already running", t);
            deliver(ActionFailed{id, "job already running"});
            return;
          }
          if (!x.version.empty()) {  // a held update merged into this restart
            if (!config_.job.versions.count(x.version)) {
              outcome(id, false, "unknown code version " + x.version, t);
              deliver(ActionFailed{
                  id, "unknown code version \"" + x.version + "\" (not in job.versions)"});
              return;
            }
            journal_.state().version = x.version;
          }
          do_start(id, x.reason);
        } else if constexpr (std::is_same_v<T, EvictMachines>) {
          do_evict(id, x);
        } else if constexpr (std::is_same_v<T, AcquireMachines>) {
          do_acquire(id, x);
        } else if constexpr (std::is_same_v<T, SetCheckpointPlan>) {
          // The tolerance keeps 30 s at 1 s steps at 30 steps despite rounding.
          const double every =
              x.interval.ns <= 0
                  ? 1
                  : std::ceil(x.interval.to_seconds() / config_.job.nominal_step_time_s - 1e-6);
          journal_.state().ckpt_every = static_cast<int>(std::max(1.0, every));
          outcome(id, true,
                  "checkpoint every " + std::to_string(journal_.state().ckpt_every) +
                      " steps (applies from the next launch)",
                  t);
          save_journal();
        } else if constexpr (std::is_same_v<T, WatchSteps>) {
          watch_ = x;
          outcome(id, true, "step samples every " + std::to_string(x.every.to_seconds()) + " s", t);
        } else if constexpr (std::is_same_v<T, EnableOracle>) {
          outcome(id, false, "live mode has no ground truth", t);
          deliver(
              ActionFailed{id, "live mode has no ground truth (oracle is a simulation baseline)"});
        } else if constexpr (std::is_same_v<T, Note>) {
          note(x.text);
        } else if constexpr (std::is_same_v<T, EnableInspection>) {
          if (x.interval.ns <= 0) {
            outcome(id, false, "inspection interval must be positive", t);
            deliver(ActionFailed{id, "inspection interval must be positive"});
            return;
          }
          do_inspect(x);
          outcome(id, true,
                  "inspection of " + x.kind + " every " + std::to_string(x.interval.to_seconds()) +
                      " s",
                  t);
        } else if constexpr (std::is_same_v<T, RunProbe>) {
          do_probe(id, x);
        } else if constexpr (std::is_same_v<T, CaptureStacks>) {
          do_capture(id);
        } else if constexpr (std::is_same_v<T, RunReplay>) {
          do_replay(id, x);
        } else if constexpr (std::is_same_v<T, HotUpdate>) {
          if (!config_.job.versions.count(x.version)) {
            outcome(id, false, "unknown code version " + x.version, t);
            deliver(ActionFailed{
                id, "unknown code version \"" + x.version + "\" (not in job.versions)"});
            return;
          }
          journal_.state().version = x.version;
          do_start(id, "hot update to " + x.version);
        } else if constexpr (std::is_same_v<T, RollBack>) {
          journal_.state().version = journal_.state().good_version;
          do_start(id, "roll back to " + journal_.state().good_version);
        } else if constexpr (std::is_same_v<T, SetStandbyPool>) {
          const int have = static_cast<int>(cluster_.standby().size());
          outcome(id, have >= x.size,
                  "pool of " + std::to_string(x.size) + " wanted, " + std::to_string(have) +
                      " standby machines configured and parked",
                  t);
        } else if constexpr (std::is_same_v<T, AvoidMachines>) {
          // Live mode's scheduler is its standby list: these join a slot last.
          avoid_ = x.machines;
          outcome(id, true,
                  std::to_string(x.machines.size()) + " machines taken from the standbys last", t);
        } else if constexpr (std::is_same_v<T, MitigateSlowdown>) {
          // The job's layout (micro-batches per rank, layers per stage) is fixed at launch.
          const std::string why = !running_
                                      ? std::string("job not running")
                                      : std::string("live mode cannot ") + mitigation_name(x.how) +
                                            " a running job (its layout is fixed at launch)";
          outcome(id, false, why, t);
          deliver(ActionFailed{id, why});
        } else {
          static_assert(!std::is_same_v<T, T>, "every action has a branch above");
        }
      },
      a);
  return id;
}

TimerId LiveWorld::set_timer(Duration after, std::uint64_t tag) {
  const TimerId id = next_timer_++;
  timers_[id] = reactor_.add_timer(after, [this, id, tag] {
    timers_.erase(id);
    deliver(TimerFired{id, tag});
  });
  return id;
}

void LiveWorld::cancel_timer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  reactor_.cancel_timer(it->second);
  timers_.erase(it);
}

void LiveWorld::kill_all(std::function<void()> then) {
  const std::int64_t gen = journal_.state().gen;
  auto pending = std::make_shared<int>(0);
  auto done = std::make_shared<std::function<void()>>(std::move(then));
  MachineSet targets = job_machines();
  for (MachineId m = 0; m < cluster_.machine_count(); ++m)
    if (cluster_.slot_of(m) < 0 && link_.connected(m) && adopted_ranks_.count(m))
      targets.push_back(m);
  *pending = static_cast<int>(targets.size()) + 1;
  auto finish = [pending, done] {
    if (--*pending == 0) (*done)();
  };
  for (MachineId m : targets)
    request(m, json{{"type", "kill"}, {"gen", gen}}, Duration::seconds(kRequestTimeoutS),
            [finish](const AgentReply&) { finish(); });
  finish();
}

void LiveWorld::job_broken(const std::string& category, const std::string& cause) {
  if (running_) {
    // The job stopped training: an incident opens, from its last step report (a hang or a
    // slowdown began before it was detected), until every rank runs again.
    const Instant began =
        last_progress_at_.ns > 0 && last_progress_at_ < now() ? last_progress_at_ : now();
    incidents_.push_back(Incident{began, std::nullopt, cause, category, now(), std::nullopt});
    if (incidents_.size() > 1000) incidents_.erase(incidents_.begin());
    ++incident_stats_.opened[category];
    incident_stats_.detection.observe((now() - began).to_seconds());
    running_ = false;
    journal_.state().running = false;
    save_journal();
  }
}

void LiveWorld::do_stop(ActionId id, const StopJob& a) {
  const Instant t = now();
  job_broken("policy_stop", "stopped: " + a.reason);
  if (starting_) {  // a start in flight is abandoned
    if (start_timer_) reactor_.cancel_timer(start_timer_);
    start_timer_ = 0;
    starting_ = 0;
  }
  kill_all([this, id, t] {
    outcome(id, true, "every rank killed", t);
    deliver(JobStopped{id});
  });
}

void LiveWorld::do_start(ActionId id, const std::string& why) {
  const Instant t = now();
  for (SlotId s = 0; s < cluster_.slots(); ++s) {
    if (cluster_.machine_in(s) == kNoMachine) {
      outcome(id, false, "slot " + std::to_string(s) + " has no machine", t);
      deliver(ActionFailed{id, "cannot start: slot " + std::to_string(s) + " has no machine"});
      return;
    }
  }
  if (start_timer_) reactor_.cancel_timer(start_timer_);
  start_timer_ = 0;
  starting_ = id;
  start_began_ = t;
  launch_gen_ = -1;
  if (!incidents_.empty() && !incidents_.back().resolved && !incidents_.back().restart_began)
    incidents_.back().restart_began = t;
  if (adopting_) {
    // A restarted controller: wait for the slots' agents to report what they run.
    adopt_action_ = id;
    const auto check = [this] {
      adopt_timer_ = 0;
      if (!adopting_) return;
      adopting_ = false;
      auto& s = journal_.state();
      bool all = true;
      std::set<std::int64_t> gens;
      for (MachineId m : job_machines()) {
        if (static_cast<int>(adopted_ranks_[m].size()) != config_.job.gpus_per_machine) all = false;
        gens.insert(adopted_gen_.count(m) ? adopted_gen_[m] : -1);
      }
      if (all && gens.size() == 1 && *gens.begin() > s.gen) {
        note("the journal is stale (generation " + std::to_string(s.gen) +
             ", saved before a storage outage); " + "every machine of the job runs generation " +
             std::to_string(*gens.begin()) + ": adopting that");
        s.gen = *gens.begin();
        s.running = true;
        save_journal();
      }
      all = all && gens.size() == 1 && *gens.begin() == s.gen;
      if (all && starting_ == adopt_action_) {
        running_ = true;
        job_running();
        starting_ = 0;
        steps_since_start_ = 0;
        sample_ = PendingSample{now()};
        outcome(adopt_action_, true,
                "adopted generation " + std::to_string(s.gen) + " still running", start_began_);
        deliver(JobStarted{adopt_action_, std::max<std::int64_t>(0, last_step_)});
        return;
      }
      // Ranks that ended while no controller watched: their exits never reached a log.
      // Each is a gap in the log, said and counted, before the job is launched again.
      const std::int64_t g = config_.job.gpus_per_machine;
      for (MachineId m : job_machines()) {
        const int slot = cluster_.slot_of(m);
        if (!link_.connected(m) || !adopted_ranks_.count(m)) continue;
        if (adopted_gen_.count(m) && adopted_gen_[m] != s.gen) continue;
        for (std::int64_t r = slot * g; r < (slot + 1) * g; ++r)
          if (!adopted_ranks_[m].count(r)) {
            note("event log gap: rank " + std::to_string(r) + " on " + machine_config(m).name +
                 " (generation " + std::to_string(s.gen) +
                 ") ended while no controller was running; its exit is lost");
            lost_before_restart(1);
          }
      }
      note("cannot adopt generation " + std::to_string(s.gen) +
           ": not every rank is alive; relaunching");
      kill_all([this] {
        if (starting_ == adopt_action_) launch(adopt_action_, start_began_);
      });
    };
    bool all_connected = true;
    for (MachineId m : job_machines())
      all_connected &= link_.connected(m) && adopted_ranks_.count(m);
    if (all_connected) {
      reactor_.defer(check);
    } else {
      adopt_timer_ = reactor_.add_timer(Duration::seconds(2 * config_.heartbeat_timeout_s), check);
    }
    return;
  }
  note("start: " + why);
  kill_all([this, id, t] {
    if (starting_ == id) launch(id, t);
  });
}

void LiveWorld::launch(ActionId id, Instant started) {
  auto& s = journal_.state();
  ++s.gen;
  launch_gen_ = s.gen;
  running_ = false;
  s.running = false;
  started_ranks_.clear();
  clean_exits_.clear();
  exit_reported_ = false;
  rank_steps_.clear();
  victim_.reset();
  if (victim_timer_) reactor_.cancel_timer(victim_timer_);
  victim_timer_ = 0;
  start_step_ = 0;
  save_journal();
  const int g = config_.job.gpus_per_machine;
  const int world = cluster_.slots() * g;
  const std::string master = machine_config(cluster_.machine_in(0)).addr;
  for (SlotId slot = 0; slot < cluster_.slots(); ++slot) {
    const MachineId m = cluster_.machine_in(slot);
    json ranks = json::array();
    for (int l = 0; l < g; ++l) ranks.push_back({{"rank", slot * g + l}, {"local_rank", l}});
    request(m,
            json{{"type", "launch"},
                 {"gen", s.gen},
                 {"version", s.version},
                 {"ranks", ranks},
                 {"world_size", world},
                 {"master_addr", master},
                 {"master_port", config_.job.master_port},
                 {"ckpt_every", s.ckpt_every}},
            Duration::seconds(kRequestTimeoutS), [this, id, m](const AgentReply& r) {
              if (starting_ != id || r.ok) return;
              const std::string why =
                  "launch failed on " + machine_config(m).name + ": " + r.detail;
              starting_ = 0;
              if (start_timer_) reactor_.cancel_timer(start_timer_);
              start_timer_ = 0;
              outcome(id, false, why, start_began_);
              deliver(StartFailed{id, m, why});
            });
  }
  start_timer_ = reactor_.add_timer(Duration::seconds(config_.job.startup_timeout_s), [this, id] {
    start_timer_ = 0;
    if (starting_ != id) return;
    starting_ = 0;
    outcome(id, false,
            "ranks did not all start within job.startup_timeout_s = " +
                traces::json_brief(config_.job.startup_timeout_s) + " s",
            start_began_);
    deliver(StartFailed{id, kNoMachine, "job start timed out"});
  });
}

void LiveWorld::do_evict(ActionId id, const EvictMachines& a) {
  const Instant t = now();
  std::string names;
  for (MachineId m : a.machines) {
    // Only machines in the job's slots (action.h): a standby or an evicted machine is left as is.
    if (m < 0 || m >= cluster_.machine_count() || cluster_.slot_of(m) < 0) continue;
    cluster_.vacate(cluster_.slot_of(m));
    cluster_.set_health(m, Health::kEvicted);
    names += (names.empty() ? "" : ", ") + machine_config(m).name;
    if (link_.connected(m))
      request(m, json{{"type", "kill"}, {"gen", journal_.state().gen}},
              Duration::seconds(kRequestTimeoutS), [](const AgentReply&) {});
    if (a.retire) {
      retire(m, "the policy retired it (" + a.reason + ")");
    } else {
      taken_out(m);
    }
  }
  if (names.empty()) {
    outcome(id, true, "nothing to evict: no machine of the job named (" + a.reason + ")", t);
    return;
  }
  job_broken("eviction", "evicted " + names + " (" + a.reason + ")");
  save_journal();
  outcome(id, true, "evicted " + names + " (" + a.reason + ")", t);
}

void LiveWorld::do_acquire(ActionId id, const AcquireMachines& a) {
  const Instant t = now();
  if (a.mode == AcquireMode::kOracle) {
    outcome(id, false, "no oracle in live mode", t);
    deliver(ActionFailed{id, "live mode has no oracle spares"});
    return;
  }
  if (a.mode == AcquireMode::kRequeue) {
    // A requeued job gets healthy machines: a slot whose agent is gone is refilled.
    for (SlotId s = 0; s < cluster_.slots(); ++s) {
      const MachineId m = cluster_.machine_in(s);
      if (m != kNoMachine && !link_.connected(m)) {
        cluster_.vacate(s);
        cluster_.set_health(m, Health::kEvicted);
        note("requeue: " + machine_config(m).name + " is unreachable and is left out");
        taken_out(m);
      }
    }
  }
  std::vector<SlotId> slots = a.slots;
  if (slots.empty() || a.mode == AcquireMode::kRequeue)
    for (SlotId s = 0; s < cluster_.slots(); ++s)
      if (cluster_.machine_in(s) == kNoMachine &&
          std::find(slots.begin(), slots.end(), s) == slots.end())
        slots.push_back(s);
  std::vector<SlotId> empty;
  for (SlotId s : slots)
    if (s >= 0 && s < cluster_.slots() && cluster_.machine_in(s) == kNoMachine) empty.push_back(s);
  MachineSet ready;
  for (MachineId m : cluster_.standby())
    if (link_.connected(m) && cluster_.health(m) != Health::kEvicted) ready.push_back(m);
  if (ready.size() < empty.size()) {
    const std::string why = std::to_string(empty.size()) + " slots to fill, " +
                            std::to_string(ready.size()) + " standby machines connected";
    // Every mode waits, as a job waits in a scheduler's queue, until enough machines are
    // parked (a standby connects or an operator repairs a machine): a standby shortfall is
    // filled as the scheduler would fill it (action.h), as in the simulator.
    note(std::string(mode_name(a.mode)) + " waits for machines: " + why);
    waiting_acquire_ = WaitingAcquire{id, empty, t};
    return;
  }
  place_into(id, empty, ready, t);
}

void LiveWorld::place_into(ActionId id, const std::vector<SlotId>& empty, MachineSet ready,
                           Instant t) {
  // Machines the policy asked to be handed out last (AvoidMachines) join after the others.
  std::stable_partition(ready.begin(), ready.end(), [&](MachineId m) {
    return std::find(avoid_.begin(), avoid_.end(), m) == avoid_.end();
  });
  MachineSet placed;
  for (size_t i = 0; i < empty.size(); ++i) {
    cluster_.take_standby(ready[i]);
    cluster_.place(ready[i], empty[i]);
    placed.push_back(ready[i]);
  }
  save_journal();
  std::string names;
  for (MachineId m : placed) names += (names.empty() ? "" : ", ") + machine_config(m).name;
  outcome(id, true, placed.empty() ? "no empty slot" : "standby " + names + " joined", t);
  deliver(MachinesReady{id, placed});
}

void LiveWorld::retry_waiting_acquire() {
  if (!waiting_acquire_) return;
  MachineSet ready;
  for (MachineId m : cluster_.standby())
    if (link_.connected(m) && cluster_.health(m) != Health::kEvicted) ready.push_back(m);
  std::vector<SlotId> empty;
  for (SlotId s : waiting_acquire_->slots)
    if (cluster_.machine_in(s) == kNoMachine) empty.push_back(s);
  if (ready.size() < empty.size()) return;
  const WaitingAcquire w = *waiting_acquire_;
  waiting_acquire_.reset();
  place_into(w.id, empty, ready, w.started);
}

void LiveWorld::do_inspect(const EnableInspection& a) {
  inspections_[a.kind] = a.interval.to_seconds();
  json kinds = json::object();
  for (const auto& [k, v] : inspections_) kinds[k] = v;
  for (MachineId m = 0; m < cluster_.machine_count(); ++m)
    if (link_.connected(m))
      request(m, json{{"type", "inspect"}, {"kinds", kinds}}, Duration::seconds(kRequestTimeoutS),
              [](const AgentReply&) {});
}

void LiveWorld::run_reference(std::vector<std::string> argv,
                              std::function<void(std::optional<std::string>)> done) {
  // The controller's host is trusted hardware outside the job: it computes the
  // fault-free answer that bit-wise probes and replays are compared with.
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    reactor_.defer([done] { done(std::nullopt); });
    return;
  }
  const std::string dir = config_.state_dir + "/reference";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> env_s = {"FAULTLINE_CKPT_DIR=" + dir,
                                    "FAULTLINE_FAULT_FILE=" + dir + "/none",
                                    "RANK=0",
                                    "WORLD_SIZE=1",
                                    "LOCAL_RANK=0",
                                    "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=29399",
                                    "FAULTLINE_HOST_ADDR=127.0.0.1",
                                    "PATH=/usr/bin:/bin"};
  std::vector<char*> args, env;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    reactor_.defer([done] { done(std::nullopt); });
    return;
  }
  auto buf = std::make_shared<std::string>();
  const int fd = out[0];
  reactor_.add_fd(fd, EPOLLIN, [this, fd, buf](std::uint32_t) {
    char tmp[4096];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n > 0 && buf->size() < (1 << 16)) buf->append(tmp, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) reactor_.remove_fd(fd);
  });
  reactor_.watch_child(pid, [this, fd, buf, done](int status) {
    // Drain what is left, then parse the last JSON line with a hash.
    char tmp[4096];
    ssize_t n;
    while ((n = ::read(fd, tmp, sizeof tmp)) > 0) buf->append(tmp, static_cast<size_t>(n));
    reactor_.remove_fd(fd);
    ::close(fd);
    std::optional<std::string> hash;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      size_t pos = 0;
      while (pos < buf->size()) {
        size_t nl = buf->find('\n', pos);
        if (nl == std::string::npos) nl = buf->size();
        const json j = json::parse(buf->substr(pos, nl - pos), nullptr, false);
        if (j.is_object() && j.contains("hash") && j["hash"].is_string())
          hash = j["hash"].get<std::string>();
        pos = nl + 1;
      }
    }
    done(hash);
  });
}

void LiveWorld::do_probe(ActionId id, const RunProbe& a) {
  if (!a.groups.empty()) return do_grouped_probe(id, a);
  const Instant t = now();
  MachineSet machines;
  for (MachineId m : a.machines)
    if (m >= 0 && m < cluster_.machine_count()) machines.push_back(m);
  probe_machines(a.test, machines, a.deadline,
                 [this, id, t, test = a.test](const MachineSet& failed, bool timed_out,
                                              const std::string& details) {
                   std::string names;
                   for (MachineId m : failed)
                     names += (names.empty() ? "" : ", ") + machine_config(m).name;
                   outcome(id, true,
                           std::string(probe_wire_name(test)) + ": " +
                               (failed.empty() ? "all passed" : "failed on " + names) + details,
                           t);
                   deliver(ProbeResult{id, test, failed, timed_out});
                 });
}

void LiveWorld::do_grouped_probe(ActionId id, const RunProbe& a) {
  const Instant t = now();
  auto refuse = [&](const std::string& why) {
    outcome(id, false, why, t);
    deliver(ActionFailed{id, why});
  };
  if (a.test != ProbeKind::kInterAllGather)
    return refuse("groups: only inter_all_gather runs per group");
  // `machines` is not used: the groups say who takes part. An agent runs one inter_all_gather
  // at a time, so a machine in two groups would make one of them fail for nothing.
  std::map<MachineId, size_t> taken;  // machine -> its group
  // Each group's rank 0 listens on a master port on its host; only groups whose rank 0 share
  // a host (agents side by side) need ports apart, so a fleet of hosts never runs out of them.
  std::map<std::string, int> on_host;
  std::vector<int> ports;
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const std::string at = "groups[" + std::to_string(g) + "]";
    if (a.groups[g].size() < 2) return refuse(at + ": a group needs at least two machines");
    for (MachineId m : a.groups[g]) {
      if (m < 0 || m >= cluster_.machine_count())
        return refuse(at + ": machine " + std::to_string(m) + " is not in the fleet");
      if (auto [it, fresh] = taken.emplace(m, g); !fresh)
        return refuse(at + ": " + machine_config(m).name + " is in groups[" +
                      std::to_string(it->second) + "] already (a machine joins one group)");
    }
    const int port = config_.job.master_port + 100 + on_host[machine_config(a.groups[g][0]).addr]++;
    if (port > 65535)
      return refuse(at + ": master port " + std::to_string(port) +
                    " is above 65535 (too many groups on one host)");
    ports.push_back(port);
  }
  struct State {
    std::vector<MachineSet> groups;
    size_t remaining = 0;
    std::vector<bool> group_failed;
    std::vector<double> group_seconds;
    std::vector<std::string> details;
    std::vector<std::map<MachineId, double>>
        collective_s;  // each machine's own time of its group's all-gather
    bool timed_out = false;
  };
  auto st = std::make_shared<State>();
  st->groups = a.groups;
  st->remaining = a.groups.size();  // before any probe starts: a group may end at once
  st->group_failed.assign(a.groups.size(), false);
  st->group_seconds.assign(a.groups.size(), 0.0);
  st->details.resize(a.groups.size());
  st->collective_s.resize(a.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    probe_machines(
        a.test, a.groups[g], a.deadline,
        [this, id, t, st, g](const MachineSet& failed, bool timed_out, const std::string& details) {
          // The collective's own time when every machine of the group reported it (the
          // slowest sets it), as the simulator times it; else from the sending to the last
          // reply, process start included.
          st->group_seconds[g] = (now() - t).to_seconds();
          if (st->collective_s[g].size() == st->groups[g].size()) {
            st->group_seconds[g] = 0;
            for (const auto& [m, s] : st->collective_s[g])
              st->group_seconds[g] = std::max(st->group_seconds[g], s);
          }
          st->group_failed[g] = !failed.empty() || timed_out;
          st->timed_out |= timed_out;
          st->details[g] = details;
          if (--st->remaining > 0) return;
          // The whole of a failed group is listed (the contract): in a pair, which machine is at
          // fault is the caller's call, across the groups; the detail keeps what the agents said.
          MachineSet failed_all;
          std::string summary;
          for (size_t i = 0; i < st->groups.size(); ++i) {
            if (st->group_failed[i])
              failed_all.insert(failed_all.end(), st->groups[i].begin(), st->groups[i].end());
            char secs[32];
            std::snprintf(secs, sizeof secs, "%.2f", st->group_seconds[i]);
            summary += (i ? ", g" : "g") + std::to_string(i) + " " + secs + "s " +
                       (st->group_failed[i] ? "failed" : "ok");
            if (!st->details[i].empty())
              summary += " (" + st->details[i].substr(2) + ")";  // past its "; "
          }
          std::sort(failed_all.begin(), failed_all.end());
          failed_all.erase(std::unique(failed_all.begin(), failed_all.end()), failed_all.end());
          outcome(
              id, true,
              std::string(probe_wire_name(ProbeKind::kInterAllGather)) + " per group: " + summary,
              t);
          deliver(ProbeResult{id, ProbeKind::kInterAllGather, failed_all, st->timed_out,
                              st->group_failed, st->group_seconds});
        },
        ports[g], [st, g](MachineId m, double s) { st->collective_s[g][m] = s; });
  }
}

void LiveWorld::probe_machines(ProbeKind test, const MachineSet& machines, Duration deadline,
                               ProbeDone done, int master_port,
                               std::function<void(MachineId, double)> timed) {
  if (master_port == 0) master_port = config_.job.master_port + 100;
  const int deadline_ms = static_cast<int>(std::min(deadline.to_seconds(), 600.0) * 1000);
  struct State {
    int remaining = 0;
    MachineSet failed;
    std::map<MachineId, std::string> hashes;
    std::optional<std::string> reference;
    bool timed_out = false;
    std::string details;
    std::shared_ptr<RelayGroup> relay;        // a relayed inter_all_gather
    std::uint64_t relay_key = 0;              // its key in relays_
    std::map<MachineId, std::string> joined;  // machine -> how far its probe got in the rendezvous
  };
  auto st = std::make_shared<State>();
  const bool hashed = test == ProbeKind::kBitwise || test == ProbeKind::kStress;
  const int steps = config_.job.bitwise_steps * (test == ProbeKind::kStress ? 10 : 1);
  st->remaining = static_cast<int>(machines.size()) + (hashed ? 1 : 0) + 1;
  auto finish = [this, st, hashed, done, machines] {
    if (--st->remaining > 0) return;
    if (st->relay) {
      relays_.erase(st->relay_key);
      attribute_rendezvous(*st->relay, machines, st->joined, st->failed, st->details);
    }
    if (hashed) {
      // Without the reference run, a strict majority of machines defines the right answer;
      // with neither, the test is inconclusive and fails nobody on its hash.
      std::optional<std::string> expected = st->reference;
      if (!expected) {
        std::map<std::string, int> votes;
        for (const auto& [m, h] : st->hashes) ++votes[h];
        for (const auto& [h, n] : votes)
          if (2 * n > static_cast<int>(st->hashes.size())) expected = h;
      }
      if (expected)
        for (const auto& [m, h] : st->hashes)
          if (h != *expected) st->failed.push_back(m);
    }
    std::sort(st->failed.begin(), st->failed.end());
    st->failed.erase(std::unique(st->failed.begin(), st->failed.end()), st->failed.end());
    done(st->failed, st->timed_out, st->details);
  };
  if (hashed) {
    run_reference({config_.trainjob_bin, "--probe", "bitwise", "--seed",
                   std::to_string(config_.seed), "--steps", std::to_string(steps)},
                  [st, finish](std::optional<std::string> h) {
                    st->reference = h;
                    if (!h) st->details += "; the reference run failed";
                    finish();
                  });
  }
  const std::string master = machines.empty() ? "127.0.0.1" : machine_config(machines[0]).addr;
  // With probe_bin, inter_all_gather is faultline-probe's NCCL all-gather across the machines,
  // its unique id relayed by this controller (RelayGroup, on_rendezvous).
  const bool relayed =
      test == ProbeKind::kInterAllGather && !config_.probe_bin.empty() && !machines.empty();
  if (relayed) {
    st->relay = std::make_shared<RelayGroup>();
    st->relay->root = machines[0];
  }
  for (size_t i = 0; i < machines.size(); ++i) {
    const MachineId m = machines[i];
    json msg{{"type", "probe"},
             {"test", probe_wire_name(test)},
             {"deadline_ms", deadline_ms},
             {"rank", static_cast<int>(i)},
             {"world_size", static_cast<int>(machines.size())},
             {"master_addr", master},
             {"master_port", master_port},
             {"seed", config_.seed},
             {"steps", steps}};
    if (relayed) msg["rendezvous"] = true;
    const std::uint64_t req =
        request(m, msg, Duration::millis(deadline_ms + 10000),
                [this, m, st, finish, hashed, timed](const AgentReply& r) {
                  if (st->relay) st->joined[m] = r.rendezvous.value_or(r.ok ? "" : "unknown");
                  if (timed && r.ok && r.collective_s) timed(m, *r.collective_s);
                  if (!r.ok) {
                    st->failed.push_back(m);
                    if (r.timed_out) st->timed_out = true;
                    st->details += "; " + machine_config(m).name + ": " + r.detail;
                  } else if (hashed) {
                    if (r.hash)
                      st->hashes[m] = *r.hash;
                    else
                      st->failed.push_back(m);
                  }
                  finish();
                });
    if (relayed) {
      if (i == 0) {
        relays_[req] = st->relay;
        st->relay_key = req;
      } else {
        st->relay->others.emplace_back(m, req);
      }
    }
  }
  finish();
}

void LiveWorld::attribute_rendezvous(const RelayGroup& g, const MachineSet& machines,
                                     const std::map<MachineId, std::string>& joined,
                                     MachineSet& failed, std::string& details) const {
  auto names = [this](const MachineSet& ms) {
    std::string s;
    for (MachineId x : ms) s += (s.empty() ? "" : ", ") + machine_config(x).name;
    return s;
  };
  MachineSet missing;            // machines whose probe did not complete the rendezvous
  bool took_part = g.published;  // else no probe said anything about a rendezvous (older probes)
  for (MachineId x : machines) {
    auto it = joined.find(x);
    const std::string state = it == joined.end() ? "unknown" : it->second;
    took_part |= state == "ok" || state == "timed_out" || state == "failed";
    if (state != "ok" && !state.empty()) missing.push_back(x);
  }
  if (!took_part) return;
  if (missing.empty()) {
    details +=
        "; rendezvous relayed by the controller: every machine joined (" + names(machines) + ")";
    return;
  }
  if (failed.empty()) return;
  // An all-gather needs every rank: the machines that joined and then failed waited for the
  // missing ones. Without rank 0's id nobody could join: rank 0 is the one missing.
  const MachineSet culprits = g.published ? missing : MachineSet{g.root};
  failed = culprits;
  details += "; rendezvous: " + names(culprits) + " did not join" +
             (g.published ? "" : " (rank 0 never published the unique id)") +
             (missing.size() < machines.size() || !g.published ? "; the others waited for it" : "");
}

void LiveWorld::on_rendezvous(MachineId m, const AgentRendezvous& msg) {
  // Only rank 0 of a probe still waiting for its reply, once: anything else is refused and
  // noted, and relays nothing.
  const std::string req = std::to_string(msg.probe_req);
  auto it = relays_.find(msg.probe_req);
  auto pending = replies_.find(msg.probe_req);
  if (it == relays_.end() || pending == replies_.end() || pending->second.first != m ||
      it->second->root != m)
    bad("rendezvous: probe_req: " + req +
        " is not a running inter_all_gather probe of this machine as rank 0");
  RelayGroup& g = *it->second;
  if (g.published) bad("rendezvous: probe_req: " + req + " already published its blob");
  g.published = true;
  const std::string hex = to_hex(msg.blob);
  for (const auto& [other, other_req] : g.others) {
    // The agent writes it for its probe and answers; a refusal or a lost agent shows up as
    // that machine's probe not joining.
    request(other, json{{"type", "rendezvous"}, {"probe_req", other_req}, {"blob", hex}},
            Duration::seconds(kRequestTimeoutS), [this, other](const AgentReply& r) {
              if (!r.ok)
                note("rendezvous relay to " + machine_config(other).name + " failed: " + r.detail);
            });
  }
}

void LiveWorld::do_capture(ActionId id) {
  const Instant t = now();
  struct State {
    int remaining = 0;
    std::vector<std::string> by_slot;
  };
  auto st = std::make_shared<State>();
  st->by_slot.assign(cluster_.slots(), "");
  const MachineSet ms = job_machines();
  st->remaining = static_cast<int>(ms.size()) + 1;
  auto finish = [this, id, t, st] {
    if (--st->remaining > 0) return;
    outcome(id, true, "stacks of " + std::to_string(st->by_slot.size()) + " slots", t);
    deliver(StacksCaptured{id, StackSignatures(st->by_slot)});
  };
  for (MachineId m : ms) {
    const SlotId slot = cluster_.slot_of(m);
    request(m, json{{"type", "capture"}}, Duration::seconds(kRequestTimeoutS),
            [st, slot, finish](const AgentReply& r) {
              std::string sig;
              for (const auto& [rank, s] : r.by_rank)
                sig += (sig.empty() ? "" : " | ") + s;  // by rank: stable
              if (sig.empty()) sig = r.timed_out ? "<no answer>" : "<no process>";
              st->by_slot[slot] = sig;
              finish();
            });
  }
  finish();
}

void LiveWorld::do_replay(ActionId id, const RunReplay& a) {
  const Instant t = now();
  struct State {
    int remaining = 0;
    std::vector<bool> failed;
    std::vector<std::vector<std::string>> hashes;
    std::optional<std::string> reference;
  };
  auto st = std::make_shared<State>();
  st->failed.assign(a.groups.size(), false);
  st->hashes.resize(a.groups.size());
  int requests = 0;
  for (const auto& g : a.groups) requests += static_cast<int>(g.size());
  st->remaining = requests + 2;
  auto finish = [this, id, t, st] {
    if (--st->remaining > 0) return;
    std::string verdict;
    for (size_t g = 0; g < st->failed.size(); ++g) {
      for (const auto& h : st->hashes[g])
        if (!st->reference || h != *st->reference) st->failed[g] = true;
      verdict += st->failed[g] ? "F" : ".";
    }
    outcome(id, st->reference.has_value(),
            "groups " + verdict + (st->reference ? "" : " (reference run failed)"), t);
    deliver(ReplayResult{id, st->failed});
  };
  const int steps = config_.job.replay_steps;
  run_reference({config_.trainjob_bin, "--replay", "--steps", std::to_string(steps), "--seed",
                 std::to_string(config_.seed)},
                [st, finish](std::optional<std::string> h) {
                  st->reference = h;
                  finish();
                });
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const auto& group = a.groups[g];
    if (group.empty()) continue;
    const std::string master = machine_config(group[0]).addr;
    for (size_t i = 0; i < group.size(); ++i) {
      const MachineId m = group[i];
      json msg{{"type", "replay"},
               {"steps", steps},
               {"rank", static_cast<int>(i)},
               {"world_size", static_cast<int>(group.size())},
               {"master_addr", master},
               {"master_port", config_.job.master_port + 200 + static_cast<int>(g)},
               {"deadline_ms", static_cast<int>(kReplayTimeoutS * 1000)},
               {"from_init", true},
               {"seed", config_.seed}};
      request(m, msg, Duration::seconds(kReplayTimeoutS + 10),
              [st, g, i, finish](const AgentReply& r) {
                if (!r.ok) st->failed[g] = true;
                if (i == 0) {
                  if (r.hash)
                    st->hashes[g].push_back(*r.hash);
                  else
                    st->failed[g] = true;
                }
                finish();
              });
    }
  }
  finish();
}

// --- what agents tell ----------------------------------------------------------------------

void LiveWorld::on_agent_connected(MachineId m, const Auth& auth) {
  const auto& s = journal_.state();
  // A generation newer than the journal's is taken too: the journal may be stale (a save
  // that failed on a full disk before the controller died); adoption then needs every
  // machine of the job to run that same generation.
  if (auth.gen && *auth.gen >= s.gen) {
    adopted_ranks_[m] = std::set<std::int64_t>(auth.alive_ranks.begin(), auth.alive_ranks.end());
    adopted_gen_[m] = *auth.gen;
  } else {
    adopted_ranks_[m] = {};
    adopted_gen_.erase(m);
  }
  if (!inspections_.empty()) {
    json kinds = json::object();
    for (const auto& [k, v] : inspections_) kinds[k] = v;
    request(m, json{{"type", "inspect"}, {"kinds", kinds}}, Duration::seconds(kRequestTimeoutS),
            [](const AgentReply&) {});
  }
  // A machine outside the job and the pool (evicted, or a standby whose agent was lost)
  // whose agent is back: check it, unless retired or given up on.
  if (cluster_.slot_of(m) < 0 && auth.gen && !auth.alive_ranks.empty()) {
    // Ranks on a machine outside the job: left from before its eviction (its agent was
    // silent then, so the kill never reached it). They die now, before anything else runs
    // there (they may hold the GPU, or the rendezvous port).
    note(machine_config(m).name + " is outside the job but still runs " +
         std::to_string(auth.alive_ranks.size()) + " ranks of generation " +
         std::to_string(*auth.gen) + ": killing them");
    request(m, json{{"type", "kill"}}, Duration::seconds(kRequestTimeoutS),
            [](const AgentReply&) {});
  }
  if (cluster_.slot_of(m) < 0 && !in_pool(m) && !is_retired(m)) {
    Repair& r = repairs_[m];
    if (!r.running && !r.given_up && r.timer == 0) {
      if (r.since.ns == 0) r.since = now();
      schedule_repair(m, Duration::seconds(config_.repair.check_after_s));
    }
  }
  retry_waiting_acquire();
  if (adopting_ && adopt_timer_) {
    bool all = true;
    for (MachineId x : job_machines()) all &= link_.connected(x) && adopted_ranks_.count(x);
    if (all) {
      reactor_.cancel_timer(adopt_timer_);
      adopt_timer_ = reactor_.add_timer(Duration::zero(), [this] {
        // Re-enter do_start's check through a fresh start of the adoption timer path.
        adopt_timer_ = 0;
        const ActionId id = adopt_action_;
        do_start(id, "adopt");
      });
    }
  }
}

void LiveWorld::on_agent_lost(MachineId m, const std::string& why) {
  fail_requests_of(m, "agent lost: " + why);
  adopted_ranks_.erase(m);
  adopted_gen_.erase(m);
  if (cluster_.slot_of(m) >= 0) {
    note("agent of " + machine_config(m).name + " lost: " + why);
    deliver(InspectionAlert{m, "host", "agent lost: " + why});
  } else if (cluster_.take_standby(m)) {
    note("standby " + machine_config(m).name + " lost (" + why +
         "); removed from the pool until its agent is back and it passes a repair check");
    save_journal();
  }
}

void LiveWorld::on_agent_message(MachineId m, const json& msg) {
  const AgentMessage decoded = decode_agent_message(msg);  // throws BadMessage: nothing done
  if (const auto* reply = std::get_if<AgentReply>(&decoded)) {
    auto it = replies_.find(reply->req);
    if (it == replies_.end() || it->second.first != m) return;
    Reply r = std::move(it->second.second);
    replies_.erase(it);
    if (auto tm = reply_timers_.find(reply->req); tm != reply_timers_.end()) {
      reactor_.cancel_timer(tm->second);
      reply_timers_.erase(tm);
    }
    r(*reply);
  } else if (const auto* report = std::get_if<AgentReport>(&decoded)) {
    on_report(m, *report);
  } else if (const auto* exit = std::get_if<AgentExit>(&decoded)) {
    on_exit(m, *exit);
  } else if (const auto* rdv = std::get_if<AgentRendezvous>(&decoded)) {
    on_rendezvous(m, *rdv);
  } else if (const auto* alert = std::get_if<AgentAlert>(&decoded)) {
    last_alert_[m] = now();               // a machine under repair fails its check on it
    if (cluster_.slot_of(m) < 0) return;  // standby or evicted: nothing the job policy acts on
    deliver(InspectionAlert{m, alert->kind, alert->detail});
  }
}

// An agent speaks for the ranks of its own slot only: a report or an exit about any other
// rank (a confused or hostile agent, a standby) is never believed. A machine in no slot is
// ignored without a word (an evicted machine's ranks may still be dying); one in a slot that
// names a rank of another slot is refused.
bool LiveWorld::runs_rank(MachineId m, std::int64_t rank, const char* what) const {
  const int slot = cluster_.slot_of(m);
  if (slot < 0) return false;
  const std::int64_t g = config_.job.gpus_per_machine;
  if (rank < slot * g || rank >= (slot + 1) * g)
    bad(std::string(what) + ": rank " + std::to_string(rank) + " is not run by " +
        machine_config(m).name + " (slot " + std::to_string(slot) + ")");
  return true;
}

void LiveWorld::on_report(MachineId m, const AgentReport& msg) {
  if (msg.gen != journal_.state().gen) return;
  const RankReport& r = msg.report;
  // The rank whose pipe it came from (the agent says), or failing that the one it claims.
  if (msg.rank >= 0 && r.rank && *r.rank != msg.rank)
    bad("report: report.rank " + std::to_string(*r.rank) + " differs from the rank of its pipe, " +
        std::to_string(msg.rank));
  const std::int64_t rank = msg.rank >= 0 ? msg.rank : r.rank.value_or(-1);
  if (!runs_rank(m, rank, "report")) return;
  if (r.type == "started" && starting_) {
    // While the start kills, the journal's generation is the outgoing one: its late
    // "started" reports must not complete a start that has not launched yet.
    if (launch_gen_ != journal_.state().gen) return;
    started_ranks_.insert(rank);
    if (r.step) start_step_ = *r.step;
    if (static_cast<int>(started_ranks_.size()) ==
        cluster_.slots() * config_.job.gpus_per_machine) {
      const ActionId id = starting_;
      starting_ = 0;
      if (start_timer_) reactor_.cancel_timer(start_timer_);
      start_timer_ = 0;
      running_ = true;
      job_running();
      auto& s = journal_.state();
      s.running = true;
      if (s.first_step < 0) s.first_step = start_step_;
      steps_since_start_ = 0;
      sample_ = PendingSample{now()};
      save_journal();
      log("progress", {{"step", start_step_}, {"loss", nullptr}, {"restart", true}});
      outcome(id, true,
              "every rank started from step " + std::to_string(start_step_) + " (" +
                  (r.restored_from.empty() ? std::string("?") : r.restored_from) + ")",
              start_began_);
      deliver(JobStarted{id, start_step_});
    }
    return;
  }
  if (r.type != "step") return;
  const std::int64_t step = *r.step;  // a step report without one does not decode
  if (running_) rank_steps_[rank] = step;
  if (rank != 0) return;  // rank 0 carries the global loss and step
  const double step_time = r.step_time_s.value_or(0);
  const bool loss_nan = r.loss_nan();
  const bool grad_nan = r.grad_norm_nan();
  const std::optional<double> loss = loss_nan ? std::nullopt : r.loss;  // finite, or not known
  last_step_ = step;
  last_progress_at_ = now();
  ++steps_since_start_;
  if (!loss)
    log("progress", {{"step", step}, {"loss", nullptr}, {"restart", false}});
  else
    log("progress", {{"step", step}, {"loss", *loss}, {"restart", false}});
  auto& s = journal_.state();
  if (steps_since_start_ == kGoodVersionSteps && s.good_version != s.version) {
    s.good_version = s.version;
    note("code version " + s.version + " ran " + std::to_string(kGoodVersionSteps) +
         " steps cleanly");
    save_journal();
  }
  // Healthy step times, for the ETTR accounting's nominal step (not for detection, which
  // is the policy's): past the first steps of a run and not far above the median so far.
  if (std::isfinite(step_time) && step_time > 0 && steps_since_start_ > 2 &&
      (healthy_step_times_.empty() || step_time <= kHealthyStep * median(healthy_step_times_))) {
    healthy_step_times_.push_back(step_time);
    if (healthy_step_times_.size() > 4096) healthy_step_times_.erase(healthy_step_times_.begin());
  }
  if (!running_ || !watch_) return;
  // Observations for the policy's detection module, at the cadence it asked for: the steps
  // since the last sample, their mean step time, the latest finite loss and gradient norm,
  // and whether any of them was NaN.
  sample_.steps += 1;
  if (std::isfinite(step_time) && step_time > 0) sample_.time_s += step_time;
  sample_.nan |= loss_nan || grad_nan;
  if (loss) sample_.loss = *loss;
  if (!grad_nan && r.grad_norm) sample_.grad_norm = *r.grad_norm;
  if (sample_.nan || watch_->every.ns <= 0 || now() - sample_.since >= watch_->every) {
    StepSample out;
    out.step = step;
    out.step_time_s = sample_.time_s / static_cast<double>(sample_.steps);
    out.loss = sample_.loss;
    out.grad_norm = sample_.grad_norm;
    out.nan = sample_.nan;
    sample_ = PendingSample{now()};
    deliver(out);
  }
}

void LiveWorld::on_exit(MachineId m, const AgentExit& msg) {
  if (msg.gen != journal_.state().gen) return;
  if (!runs_rank(m, msg.rank, "exit")) return;
  const int code = msg.code;
  const int sig = msg.signal;
  const std::string& signature = msg.signature;
  const std::int64_t rank = msg.rank;
  if (code == 0 && sig == 0) {
    clean_exits_.insert(rank);
    if (static_cast<int>(clean_exits_.size()) == cluster_.slots() * config_.job.gpus_per_machine) {
      note("every rank finished its steps");
      job_broken("job_finished", "every rank finished its steps");
      finished_ = true;
    }
    return;
  }
  if (starting_) {
    // Ranks of the previous generation die while a start kills them: not a failure of
    // this start, whose ranks are launched only after the kill.
    if (launch_gen_ != journal_.state().gen) return;
    if (sig == 0 && is_peer_symptom(signature)) {
      hold_victim(m, rank, code, signature);
      return;
    }
    fail_start(m, rank, signature);
    return;
  }
  if (!running_ || exit_reported_) return;  // echoes of an exit already reported
  const int status = sig ? 128 + sig : code;
  if (sig == 0 && is_peer_symptom(signature)) {
    hold_victim(m, rank, status, signature);
    return;
  }
  report_exit(m, rank, status, signature);
}

// A start that failed because `rank` exited; its step is the one the rank had started
// from, when it had reported that it started (so a crash in its first step counts as one
// after that step).
void LiveWorld::fail_start(MachineId m, std::int64_t rank, const std::string& signature) {
  if (!starting_) return;
  const ActionId id = starting_;
  starting_ = 0;
  if (start_timer_) reactor_.cancel_timer(start_timer_);
  start_timer_ = 0;
  if (victim_timer_) reactor_.cancel_timer(victim_timer_);
  victim_timer_ = 0;
  victim_.reset();
  outcome(id, false, "rank " + std::to_string(rank) + " exited while starting: " + signature,
          start_began_);
  deliver(StartFailed{id, m, signature, started_ranks_.count(rank) ? start_step_ : -1});
}

// A victim (a peer stopped answering) waits a little for the exit of the rank that caused it.
void LiveWorld::hold_victim(MachineId m, std::int64_t rank, int code,
                            const std::string& signature) {
  if (victim_) return;  // the first victim speaks for them all
  victim_ = VictimExit{m, rank, code, signature};
  victim_timer_ = reactor_.add_timer(Duration::seconds(kPeerGraceS), [this] {
    victim_timer_ = 0;
    attribute_victim_exit();
  });
}

// The last step `rank` reported in this run of the job (the restored step before its first).
std::int64_t LiveWorld::rank_step(std::int64_t rank) const {
  const auto it = rank_steps_.find(rank);
  return it != rank_steps_.end() ? it->second : start_step_;
}

void LiveWorld::report_exit(MachineId m, std::int64_t rank, int code,
                            const std::string& signature) {
  if (!running_ || exit_reported_) return;
  exit_reported_ = true;
  if (victim_timer_) reactor_.cancel_timer(victim_timer_);
  victim_timer_ = 0;
  victim_.reset();
  job_broken("rank_exit", "rank " + std::to_string(rank) +
                              (m == kNoMachine ? "" : " on " + machine_config(m).name) +
                              " exited: " + signature);
  deliver(ProcessExit{m, code, signature, rank_step(rank)});
}

// No rank exited on its own within the grace: the victim's exit is reported as the
// collective's, naming the machine whose ranks stalled first when the step reports show
// one (all of its ranks behind every other rank), and no machine otherwise.
void LiveWorld::attribute_victim_exit() {
  if (!victim_) return;
  const VictimExit v = *victim_;
  victim_.reset();
  if (starting_) {  // no rank exited on its own: the start failed where the victim was
    fail_start(v.machine, v.rank, v.signature);
    return;
  }
  if (!running_ || exit_reported_) return;
  const int g = config_.job.gpus_per_machine;
  const SlotId slots = cluster_.slots();
  std::vector<std::int64_t> lo(static_cast<std::size_t>(slots)),
      hi(static_cast<std::size_t>(slots));
  SlotId laggard = 0;
  for (SlotId s = 0; s < slots; ++s) {
    const auto i = static_cast<std::size_t>(s);
    lo[i] = std::numeric_limits<std::int64_t>::max();
    hi[i] = -1;
    for (int k = 0; k < g; ++k) {
      const std::int64_t st = rank_step(static_cast<std::int64_t>(s) * g + k);
      lo[i] = std::min(lo[i], st);
      hi[i] = std::max(hi[i], st);
    }
    if (hi[i] < hi[static_cast<std::size_t>(laggard)]) laggard = s;
  }
  const std::int64_t behind = hi[static_cast<std::size_t>(laggard)];
  std::int64_t others = std::numeric_limits<std::int64_t>::max();
  for (SlotId s = 0; s < slots; ++s)
    if (s != laggard) others = std::min(others, lo[static_cast<std::size_t>(s)]);
  const MachineId named = slots > 1 && behind < others ? cluster_.machine_in(laggard) : kNoMachine;
  note("rank " + std::to_string(v.rank) + " on " + machine_config(v.machine).name +
       " exited because a peer stopped answering (" + v.signature + "); " +
       (named == kNoMachine
            ? std::string("no machine's ranks are behind the others: the exit names no machine")
            : machine_config(named).name + "'s ranks stalled first, after step " +
                  std::to_string(behind) + " (every other rank reported step " +
                  std::to_string(others) + " or later)"));
  report_exit(named, v.rank, v.code, v.signature);
}

// --- operator -------------------------------------------------------------------------------

void LiveWorld::request_code_update(const std::string& version, bool urgent) {
  record_fault(kNoMachine, "update", version, false);
  deliver(CodeUpdateRequested{version, urgent});
}

void LiveWorld::record_fault(MachineId m, const std::string& kind, const std::string& detail,
                             bool persistent) {
  log("fault", {{"machine", m},
                {"slot", m >= 0 && m < cluster_.machine_count() ? cluster_.slot_of(m) : -1},
                {"fault", kind},
                {"detail", detail},
                {"persistent", persistent}});
}

void LiveWorld::inject(MachineId m, const std::string& fault, const std::string& detail,
                       bool persistent,
                       std::function<void(bool ok, const std::string& detail)> done) {
  const json msg{{"type", "inject"}, {"fault", fault}, {"detail", detail}};
  if (fault == "machine_down") {
    record_fault(m, fault, detail, persistent);
    request(m, msg, Duration::seconds(kInjectTimeoutS), [](const AgentReply&) {});
    return done(true, "");
  }
  request(m, msg, Duration::seconds(kInjectTimeoutS),
          [this, m, fault, detail, persistent, done = std::move(done)](const AgentReply& r) {
            if (r.ok) {
              record_fault(m, fault, detail, persistent);
              return done(true, r.detail);
            }
            note("the agent of " + machine_config(m).name + " did not apply the injected " + fault +
                 " (" + r.detail + "): not a fault of this run");
            done(false, r.detail);
          });
}

bool LiveWorld::repaired(MachineId m) {
  if (m < 0 || m >= cluster_.machine_count() || cluster_.slot_of(m) >= 0) return false;
  const auto& sb = cluster_.standby();
  if (std::find(sb.begin(), sb.end(), m) != sb.end()) return false;
  if (auto r = repairs_.find(m); r != repairs_.end()) {
    if (r->second.timer) reactor_.cancel_timer(r->second.timer);
    repairs_.erase(r);
  }
  auto& js = journal_.state();
  js.strikes.erase(m);
  js.retired.erase(std::remove(js.retired.begin(), js.retired.end(), m), js.retired.end());
  cluster_.set_health(m, Health::kHealthy);
  cluster_.add_standby(m);
  note(machine_config(m).name + " repaired; back in the standby pool");
  save_journal();
  retry_waiting_acquire();
  return true;
}

// --- the repair pipeline ------------------------------------------------------------------------

bool LiveWorld::is_retired(MachineId m) const {
  const auto& r = journal_.state().retired;
  return std::find(r.begin(), r.end(), m) != r.end();
}

bool LiveWorld::in_pool(MachineId m) const {
  const auto& sb = cluster_.standby();
  return std::find(sb.begin(), sb.end(), m) != sb.end();
}

void LiveWorld::retire(MachineId m, const std::string& why) {
  auto& s = journal_.state();
  if (!is_retired(m)) s.retired.push_back(m);
  if (auto r = repairs_.find(m); r != repairs_.end() && r->second.timer)
    reactor_.cancel_timer(r->second.timer);
  repairs_.erase(m);
  note(machine_config(m).name + " retired: " + why + "; only an operator's repair returns it");
}

void LiveWorld::taken_out(MachineId m) {
  auto& s = journal_.state();
  const int strikes = ++s.strikes[m];
  if (config_.repair.retire_after > 0 && strikes >= config_.repair.retire_after) {
    retire(m, "taken out of the job " + std::to_string(strikes) + " times (repair.retire_after = " +
                  std::to_string(config_.repair.retire_after) + ")");
    return;
  }
  Repair& r = repairs_[m];
  if (r.timer) reactor_.cancel_timer(r.timer);
  r = Repair{};
  r.since = now();
  schedule_repair(m, Duration::seconds(config_.repair.check_after_s));
}

void LiveWorld::schedule_repair(MachineId m, Duration after) {
  Repair& r = repairs_[m];
  if (r.timer) reactor_.cancel_timer(r.timer);
  r.timer = reactor_.add_timer(after, [this, m] {
    auto it = repairs_.find(m);
    if (it == repairs_.end()) return;
    it->second.timer = 0;
    run_repair_check(m);
  });
}

void LiveWorld::run_repair_check(MachineId m) {
  auto it = repairs_.find(m);
  if (it == repairs_.end() || it->second.running) return;
  if (cluster_.slot_of(m) >= 0 || in_pool(m) || is_retired(m)) {
    repairs_.erase(it);
    return;
  }
  if (!link_.connected(m)) return;  // checked when its agent is back (on_agent_connected)
  Repair& r = it->second;
  r.running = true;
  ++r.checks;
  const Duration deadline = Duration::seconds(60);
  // Whatever still runs there dies first: a machine is checked, and handed out again, only
  // without old ranks on it.
  request(m, json{{"type", "kill"}}, Duration::seconds(kRequestTimeoutS),
          [this, m, deadline](const AgentReply& killed) {
            if (!killed.ok)
              return repair_failed(m, "its old ranks were not killed (" + killed.detail + ")");
            probe_repaired(m, deadline);
          });
}

// gpu_diag, then the bit-wise test; a machine that passes both (and raised no alert since it
// was taken out) is back in the standby pool.
void LiveWorld::probe_repaired(MachineId m, Duration deadline) {
  probe_machines(
      ProbeKind::kGpuDiag, {m}, deadline,
      [this, m, deadline](const MachineSet& failed, bool, const std::string& details) {
        if (!failed.empty()) return repair_failed(m, "gpu_diag failed" + details);
        probe_machines(
            ProbeKind::kBitwise, {m}, deadline,
            [this, m](const MachineSet& failed2, bool, const std::string& details2) {
              if (!failed2.empty()) return repair_failed(m, "bit-wise test failed" + details2);
              auto it2 = repairs_.find(m);
              if (it2 == repairs_.end()) return;
              if (auto a = last_alert_.find(m);
                  a != last_alert_.end() && a->second >= it2->second.since)
                return repair_failed(m, "it raised an inspection alert since it was taken out");
              const int checks = it2->second.checks;
              repairs_.erase(it2);
              if (cluster_.slot_of(m) >= 0 || in_pool(m) || is_retired(m)) return;
              cluster_.set_health(m, Health::kHealthy);
              cluster_.add_standby(m);
              note(machine_config(m).name + " passed its repair check (gpu_diag, bit-wise" +
                   (checks > 1 ? ", check " + std::to_string(checks) : std::string()) +
                   "); back in the standby pool");
              save_journal();
              retry_waiting_acquire();
            });
      });
}

void LiveWorld::repair_failed(MachineId m, const std::string& why) {
  auto it = repairs_.find(m);
  if (it == repairs_.end()) return;
  Repair& r = it->second;
  r.running = false;
  if (r.checks >= config_.repair.max_checks) {
    r.given_up = true;
    note(machine_config(m).name + " failed its repair check " + std::to_string(r.checks) +
         " times (" + why + "); left to an operator: faultline live inject CONFIG --machine " +
         machine_config(m).name + " --fault repair");
    return;
  }
  note(machine_config(m).name + " failed its repair check (" + why + "); next check in " +
       traces::json_brief(config_.repair.retry_after_s) + " s");
  r.since = now();
  schedule_repair(m, Duration::seconds(config_.repair.retry_after_s));
}

json LiveWorld::status() const {
  const auto& s = journal_.state();
  json slots = json::array();
  for (SlotId i = 0; i < cluster_.slots(); ++i) {
    const MachineId m = cluster_.machine_in(i);
    slots.push_back(m == kNoMachine ? json(nullptr) : json(machine_config(m).name));
  }
  json standby = json::array();
  for (MachineId m : cluster_.standby()) standby.push_back(machine_config(m).name);
  // Machines out of the job and the pool: under repair (checks run), given up on, retired.
  json repairing = json::array(), retired = json::array();
  for (const auto& [m, r] : repairs_)
    repairing.push_back({{"machine", machine_config(m).name},
                         {"checks", r.checks},
                         {"state", r.given_up  ? "left to an operator"
                                   : r.running ? "checking"
                                               : "waiting"}});
  for (MachineId m : s.retired) retired.push_back(machine_config(m).name);
  // Every machine by state, for the operator's table.
  json machines = json::array();
  for (MachineId m = 0; m < cluster_.machine_count(); ++m) {
    std::string state;
    switch (machine_state(m)) {
      case MachineState::kJob:
        state = "job slot " + std::to_string(cluster_.slot_of(m));
        break;
      case MachineState::kStandby:
        state = "standby";
        break;
      case MachineState::kRetired:
        state = "retired";
        break;
      case MachineState::kLeftToOperator:
        state = "left to an operator";
        break;
      case MachineState::kRepairCheck:
        state = "repair check";
        break;
      case MachineState::kAwaitingRepair:
        state = "awaiting repair check";
        break;
      case MachineState::kOut:
        state = "out";
        break;
    }
    machines.push_back({{"machine", machine_config(m).name},
                        {"state", state},
                        {"connected", link_.connected(m)},
                        {"strikes", s.strikes.count(m) ? s.strikes.at(m) : 0}});
  }
  json incidents = json::array();
  const std::size_t from = incidents_.size() > 20 ? incidents_.size() - 20 : 0;
  for (std::size_t i = from; i < incidents_.size(); ++i) {
    const Incident& in = incidents_[i];
    incidents.push_back(
        {{"began_s", in.began.to_seconds()},
         {"resolved_s", in.resolved ? json(in.resolved->to_seconds()) : json(nullptr)},
         {"phase", in.resolved ? "resolved"
                   : starting_ ? "restarting"
                               : "diagnosis and recovery"},
         {"cause", in.cause}});
  }
  const Accounting acc = accounting();
  return json{{"t_s", now().to_seconds()},
              {"gen", s.gen},
              {"version", s.version},
              {"running", running_},
              {"step", last_step_},
              {"slots", slots},
              {"standby", standby},
              {"stack", config_.stack},
              {"repairing", repairing},
              {"retired", retired},
              {"machines", machines},
              {"ettr_so_far", acc.ettr},
              {"incident_count", incidents_.size()},
              {"incidents", incidents},
              {"ended_verdict", s.ended_verdict},
              {"storage",
               {{"state", log_.health().failing || journal_.health().failing ? "failing" : "ok"},
                {"event_log", storage_status(log_.health(), log_.path(), lost_before_restart_)},
                {"journal", storage_status(journal_.health(), journal_.path())}}}};
}

LiveWorld::MachineState LiveWorld::machine_state(MachineId m) const {
  if (cluster_.slot_of(m) >= 0) return MachineState::kJob;
  if (in_pool(m)) return MachineState::kStandby;
  if (is_retired(m)) return MachineState::kRetired;
  if (auto r = repairs_.find(m); r != repairs_.end())
    return r->second.given_up  ? MachineState::kLeftToOperator
           : r->second.running ? MachineState::kRepairCheck
                               : MachineState::kAwaitingRepair;
  return MachineState::kOut;
}

void LiveWorld::job_running() {
  if (!first_running_at_) first_running_at_ = now();
  if (incidents_.empty() || incidents_.back().resolved) return;
  Incident& in = incidents_.back();
  in.resolved = now();
  ++incident_stats_.closed[{in.category, "recovered"}];
  incident_stats_.recovery.observe((*in.resolved - in.detected).to_seconds());
  const PhaseSeconds p = phases(in, *in.resolved);
  incident_stats_.closed_phases.detection += p.detection;
  incident_stats_.closed_phases.diagnosis += p.diagnosis;
  incident_stats_.closed_phases.restart += p.restart;
}

LiveWorld::PhaseSeconds LiveWorld::phases(const Incident& in, Instant until) {
  // Each boundary clamped to `until`, so an open incident's phases grow with time and sum
  // to its duration so far.
  const auto at_most = [&](Instant t) { return t < until ? t : until; };
  const Instant detected = at_most(in.detected);
  const Instant restart = at_most(in.restart_began.value_or(until));
  PhaseSeconds p;
  p.detection = (detected - at_most(in.began)).to_seconds();
  p.diagnosis = (restart - detected).to_seconds();
  p.restart = (until - restart).to_seconds();
  return p;
}

std::vector<double> LiveWorld::IncidentStats::latency_bounds() {
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600};
}

LiveWorld::Accounting LiveWorld::accounting_at(Instant at) const {
  const auto& s = journal_.state();
  Accounting a;
  a.step_time_s =
      healthy_step_times_.empty() ? config_.job.nominal_step_time_s : median(healthy_step_times_);
  a.first = std::max<std::int64_t>(0, s.first_step);
  a.last = std::max<std::int64_t>(a.first, last_step_);
  a.elapsed_s = at.to_seconds();
  a.productive_s = static_cast<double>(a.last - a.first) * a.step_time_s;
  a.ettr = a.elapsed_s > 0 ? a.productive_s / a.elapsed_s : 0;
  return a;
}

double LiveWorld::write_summary() {
  closed_at_ = now();
  if (!incidents_.empty() && !incidents_.back().resolved)
    ++incident_stats_.closed[{incidents_.back().category, "run_ended"}];
  const Accounting acc = accounting();
  const double step_time = acc.step_time_s;
  const std::int64_t first = acc.first;
  const std::int64_t last = acc.last;
  const double elapsed = acc.elapsed_s;
  const double productive = acc.productive_s;
  const double ettr = acc.ettr;
  closed_ = true;
  log("summary", {{"elapsed_s", elapsed},
                  {"final_step", last},
                  {"first_step", first},
                  {"productive_s", productive},
                  {"ettr", ettr},
                  {"step_time_s", step_time}});
  save_journal();
  return ettr;
}

}  // namespace faultline::live
