// LiveWorld's core: construction and resume from the journal, the journal and event-log
// glue, event delivery, requests to agents with their replies and timeouts, the policy's
// timers, act()'s dispatch with one act_on overload per action kind, status() and the ETTR
// accounting with its incidents. The job's ranks live in live_ranks.cc, stop-time tests in
// stop_tests.cc, agents and the machine pool in live_fleet.cc, metrics in live_metrics.cc.
#include "realexec/controller/live_world.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "policies/api/refusals.h"
#include "policies/api/registry.h"
#include "realexec/net/wire.h"
#include "traces/config.h"
#include "traces/time_phases.h"

namespace faultline::live {

using nlohmann::json;
using traces::to_json;

namespace {

constexpr std::uint64_t kActionIdBlock = 256;
constexpr int kMaxActionsPerSecond = 1000;

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

// Rebuilds the placement the previous controller left (a resumed journal's evicted machines,
// slots and standbys) on the config's cluster.
void rebuild_placement(ClusterView& cluster, const JournalState& s) {
  for (MachineId m : s.evicted) {
    if (m >= 0 && m < cluster.machine_count()) {
      if (cluster.slot_of(m) >= 0) cluster.vacate(cluster.slot_of(m));
      cluster.take_standby(m);
      cluster.set_health(m, Health::kEvicted);
    }
  }
  for (SlotId i = 0; i < cluster.slots() && i < static_cast<SlotId>(s.slots.size()); ++i) {
    const MachineId m = s.slots[i];
    if (m == kNoMachine) {
      if (cluster.machine_in(i) != kNoMachine) cluster.vacate(i);
    } else if (m < cluster.machine_count()) {
      cluster.take_standby(m);
      cluster.place(m, i);
    }
  }
  for (MachineId m : std::vector<MachineId>(cluster.standby()))
    if (std::find(s.standby.begin(), s.standby.end(), m) == s.standby.end())
      cluster.take_standby(m);
}

}  // namespace

LiveWorld::LiveWorld(const LiveConfig& config, const Registry& registry, Reactor& reactor,
                     MachineLink& link, traces::EventLogWriter& log, Journal& journal)
    : tests_({config, cluster_, reactor, link, requests_, [this] { return now(); },
              [this] { return job_machines(); }, [this](std::string_view text) { note(text); },
              [this](ActionId id, bool ok, const std::string& detail, Instant started) {
                outcome(id, ok, detail, started);
              },
              [this](ActionId id, const std::string& why, Instant t) { refuse(id, why, t); },
              [this](Event e) { deliver(std::move(e)); }}),
      repairs_({config, cluster_, reactor, journal, requests_, link, [this] { return now(); },
                [this](std::string_view text) { note(text); }, [this] { save_journal(); },
                [this](ProbeKind test, const MachineSet& machines, Duration deadline,
                       RepairPipeline::ProbeDone done) {
                  tests_.run(test, machines, deadline, std::move(done));
                },
                [this] { acquisitions_.retry(); }}),
      config_(config),
      reactor_(reactor),
      link_(link),
      log_(log),
      journal_(journal),
      cluster_(config.cluster_spec()),
      rng_({config.seed, 0x11fe}),
      policy_(registry.make(config.stack, config.params)),
      requests_(reactor, link),
      policy_timers_(reactor),
      delivery_(reactor,
                [this](const Event& e) {
                  this->log("event", {{"event", to_json(e)}});
                  policy_->on_event(e, *this);
                }),
      start_(reactor),
      victim_timer_(reactor),
      acquisitions_({config, cluster_, link, [this] { return now(); },
                     [this](std::string_view text) { note(text); },
                     [this](ActionId id, bool ok, const std::string& detail, Instant started) {
                       outcome(id, ok, detail, started);
                     },
                     [this](ActionId id, const std::string& why, Instant t) { refuse(id, why, t); },
                     [this](Event e) { deliver(std::move(e)); }, [this] { save_journal(); },
                     [this](MachineId m) { repairs_.take_out(m); },
                     [this](Instant since) { account_.waited(since); }}),
      replicas_({config, cluster_, reactor, link, requests_, journal, ranks_, incidents_,
                 [this] { return now(); }, [this] { return running_; },
                 [this] { return start_.pending(); }, [this](std::string_view text) { note(text); },
                 [this](ActionId id, bool ok, const std::string& detail, Instant started) {
                   outcome(id, ok, detail, started);
                 },
                 [this](ActionId id, const std::string& why, Instant t) { refuse(id, why, t); },
                 [this](Event e) { deliver(std::move(e)); }, [this] { save_journal(); },
                 [this](MachineId m, std::int64_t rank, int code, const std::string& signature) {
                   report_exit(m, rank, code, signature);
                 }}),
      account_({journal, incidents_, progress_, replicas_.set(), cluster_,
                config.job.nominal_step_time_s, [this] { return now(); },
                [this] { return running_; }, [this] { save_journal(); },
                [this](json record) { this->log("account", std::move(record)); },
                [this] { return acquisitions_.waiting_since(); }}),
      migrations_({config, cluster_, reactor, link, requests_, replicas_.set(), replicas_.quorums(),
                   journal, acquisitions_.avoided(), [this] { return now(); },
                   [this] { return running_; }, [this] { return start_.pending(); },
                   [this](std::string_view text) { note(text); },
                   [this](ActionId id, bool ok, const std::string& detail, Instant started) {
                     outcome(id, ok, detail, started);
                   },
                   [this](ActionId id, const std::string& why, Instant t) { refuse(id, why, t); },
                   [this](Event e) { deliver(std::move(e)); }, [this] { save_journal(); },
                   [this](MachineId m) { repairs_.take_out(m); }}) {
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
    rebuild_placement(cluster_, s);  // the placement the previous controller left
    // Ids up to the ceiling may be in the log already (issued after the last save).
    next_action_ = std::max(s.next_action, s.action_ceiling);
    progress_.resume(s.last_step, s.step_times);
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
    // The origin moves to this clock, so that the next restart on it counts the downtime
    // before it: kept on the clock that was ahead, every later restart would find this one
    // behind again and drop its downtime (ETTR above 100%).
    s.origin_unix_ns = wall_now_ns() - s.last_t_ns;
  }
  account_.resume();
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
  start_.timer().cancel();
  if (adoption_.timer) reactor_.cancel_timer(adoption_.timer);
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
  s.last_step = progress_.last_step();
  s.step_times = progress_.healthy_step_times();
  s.stop = account_.journal_stop();
  incident_stats_to_journal();
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
    adoption_.active = journal_.state().running;
    incident_stats_from_journal();
  }
  save_journal();
  started_ = true;
  delivery_.run([this] { policy_->start(*this); });
}

// --- events ----------------------------------------------------------------------------

void LiveWorld::deliver(Event e) {
  if (closed_) return;  // after the summary: the run is over
  if (!started_) {
    note("before the policy started: " + describe(e));
    return;
  }
  delivery_.push(std::move(e));
}

void LiveWorld::outcome(ActionId id, bool ok, const std::string& detail, Instant started) {
  log("outcome",
      {{"id", id}, {"ok", ok}, {"detail", detail}, {"duration_s", (now() - started).to_seconds()}});
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
  if (!burst_.admit(now(), kMaxActionsPerSecond)) {
    note("policy livelock: more than " + std::to_string(kMaxActionsPerSecond) +
         " actions in one second; stopping");
    std::fprintf(stderr,
                 "faultline live: policy livelock (more than %d actions in one second); stopping\n",
                 kMaxActionsPerSecond);
    reactor_.stop();
    return id;
  }
  const Instant t = now();
  // The contract's refusals first, worded as every World words them; live mode's own come
  // in the overloads.
  const std::string& verdict = journal_.state().ended_verdict;
  if (auto why = refusal(a, {.cluster = cluster_,
                             .job_running = running_,
                             .ended = !verdict.empty(),
                             .verdict = verdict})) {
    refuse(id, *why, t);
    return id;
  }
  // An action kind without an overload does not compile.
  std::visit([&](const auto& x) { act_on(id, x, t); }, a);
  return id;
}

void LiveWorld::refuse(ActionId id, const std::string& why, Instant t) {
  outcome(id, false, why, t);
  deliver(ActionFailed{id, why});
}

void LiveWorld::act_on(ActionId id, const StopJob& a, Instant) { do_stop(id, a); }

void LiveWorld::act_on(ActionId id, const EndRun& a, Instant) {
  // The job stops for good; the controller exits with kExitEndedRun.
  journal_.state().ended_verdict = a.verdict.empty() ? "ended" : a.verdict;
  save_journal();
  note("the run is ended: " + journal_.state().ended_verdict + " (" + a.reason + ")");
  do_stop(id, StopJob{"end of the run: " + a.reason}, false);
  finished_ = true;
}

void LiveWorld::act_on(ActionId id, const StartJob& a, Instant t) {
  if (!a.version.empty()) {  // a held update merged into this restart
    if (!config_.job.versions.count(a.version))
      return refuse(id, "unknown code version \"" + a.version + "\" (not in job.versions)", t);
    journal_.state().version = a.version;
  }
  // In place (job.in_place, live_ranks.cc): the ranks that hold their state stay, the others
  // are relaunched and take it from them. Where that cannot be, the start goes ahead as an
  // ordinary one, said in the event log (as the simulator's in_place_blocker), rather than
  // refused, which would send the stack to its fallback (a requeue of the whole job).
  if (a.in_place) {
    std::string blocker;
    if (!config_.job.in_place)
      blocker = "the job does not re-form in place (job.in_place is false)";
    else if (!a.version.empty())
      blocker = "a new code version";
    else if (config_.job.tp * config_.job.pp != 1)
      blocker = "the job is not purely data-parallel (tp * pp > 1): no rank holds another's state";
    if (blocker.empty()) return do_start(id, a.reason, true);
    note("in-place restart not possible (" + blocker + "): a standard restart");
  }
  do_start(id, a.reason);
}

void LiveWorld::act_on(ActionId id, const EvictMachines& a, Instant) { do_evict(id, a); }

void LiveWorld::act_on(ActionId id, const AcquireMachines& a, Instant) {
  acquisitions_.acquire(id, a);
}

void LiveWorld::act_on(ActionId id, const SetCheckpointPlan& a, Instant t) {
  // The tolerance keeps 30 s at 1 s steps at 30 steps despite rounding.
  const double every =
      a.interval.ns <= 0
          ? 1
          : std::ceil(a.interval.to_seconds() / config_.job.nominal_step_time_s - 1e-6);
  journal_.state().ckpt_every = static_cast<int>(std::max(1.0, every));
  outcome(id, true,
          "checkpoint every " + std::to_string(journal_.state().ckpt_every) +
              " steps (applies from the next launch)",
          t);
  save_journal();
}

void LiveWorld::act_on(ActionId id, const WatchSteps& a, Instant t) {
  progress_.watch(a);
  outcome(id, true, "step samples every " + std::to_string(a.every.to_seconds()) + " s", t);
}

void LiveWorld::act_on(ActionId id, const EnableOracle&, Instant t) {
  refuse(id, "live mode has no ground truth (oracle is a simulation baseline)", t);
}

void LiveWorld::act_on(ActionId, const Note& a, Instant) { note(a.text); }

void LiveWorld::act_on(ActionId id, const EnableInspection& a, Instant t) {
  tests_.inspect(a);  // act() refused an interval that is not positive
  outcome(id, true,
          "inspection of " + a.kind + " every " + std::to_string(a.interval.to_seconds()) + " s",
          t);
}

void LiveWorld::act_on(ActionId id, const RunProbe& a, Instant) { tests_.probe(id, a); }

void LiveWorld::act_on(ActionId id, const CaptureStacks&, Instant) { tests_.capture(id); }

void LiveWorld::act_on(ActionId id, const RunReplay& a, Instant) { tests_.replay(id, a); }

void LiveWorld::act_on(ActionId id, const HotUpdate& a, Instant t) {
  if (!config_.job.versions.count(a.version))
    return refuse(id, "unknown code version \"" + a.version + "\" (not in job.versions)", t);
  journal_.state().version = a.version;
  do_start(id, "hot update to " + a.version);
}

void LiveWorld::act_on(ActionId id, const RollBack&, Instant) {
  journal_.state().version = journal_.state().good_version;
  do_start(id, "roll back to " + journal_.state().good_version);
}

void LiveWorld::act_on(ActionId id, const SetStandbyPool& a, Instant t) {
  const int have = static_cast<int>(cluster_.standby().size());
  outcome(id, have >= a.size,
          "pool of " + std::to_string(a.size) + " wanted, " + std::to_string(have) +
              " standby machines configured and parked",
          t);
}

void LiveWorld::act_on(ActionId id, const AvoidMachines& a, Instant t) {
  // Live mode's scheduler is its standby list: these join a slot last.
  acquisitions_.avoid(a.machines);
  outcome(id, true, std::to_string(a.machines.size()) + " machines taken from the standbys last",
          t);
}

void LiveWorld::act_on(ActionId id, const EnableReplicaGroups& a, Instant t) {
  replicas_.enable(id, a, t);
}

void LiveWorld::act_on(ActionId id, const RejoinReplica& a, Instant t) {
  replicas_.rejoin(id, a, t);
}

void LiveWorld::act_on(ActionId id, const MitigateSlowdown& a, Instant t) {
  // act() refused it when the job is not running. The job's layout (micro-batches per rank,
  // layers per stage) is fixed at launch.
  refuse(id,
         std::string("live mode cannot ") + mitigation_name(a.how) +
             " a running job (its layout is fixed at launch)",
         t);
}
TimerId LiveWorld::set_timer(Duration after, std::uint64_t tag) {
  return policy_timers_.set(after, [this, tag](TimerId id) { deliver(TimerFired{id, tag}); });
}

void LiveWorld::cancel_timer(TimerId id) { policy_timers_.cancel(id); }

json LiveWorld::status() const {
  const auto& s = journal_.state();
  json slots = json::array();
  for (SlotId i = 0; i < cluster_.slots(); ++i) {
    const MachineId m = cluster_.machine_in(i);
    slots.push_back(m == kNoMachine ? json(nullptr) : json(config_.machine(m).name));
  }
  json standby = json::array();
  for (MachineId m : cluster_.standby()) standby.push_back(config_.machine(m).name);
  // Machines out of the job and the pool: under repair (checks run), given up on, retired.
  json repairing = json::array(), retired = json::array();
  for (const auto& [m, r] : repairs_.queue().repairs())
    repairing.push_back({{"machine", config_.machine(m).name},
                         {"checks", r.checks},
                         {"state", r.given_up  ? "left to an operator"
                                   : r.running ? "checking"
                                               : "waiting"}});
  for (MachineId m : s.retired) retired.push_back(config_.machine(m).name);
  // Every machine by state, for the operator's table.
  json machines = json::array();
  for (MachineId m = 0; m < cluster_.machine_count(); ++m) {
    std::string state;
    using MachineState = RepairPipeline::MachineState;
    switch (repairs_.state(m)) {
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
    machines.push_back({{"machine", config_.machine(m).name},
                        {"state", state},
                        {"connected", link_.connected(m)},
                        {"strikes", s.strikes.count(m) ? s.strikes.at(m) : 0}});
  }
  json incidents = json::array();
  const std::vector<Incident>& kept = incidents_.incidents();
  const std::size_t from = kept.size() > 20 ? kept.size() - 20 : 0;
  for (std::size_t i = from; i < kept.size(); ++i) {
    const Incident& in = kept[i];
    const bool rejoining = in.replica >= 0 && replicas_.set().joining(in.replica);
    incidents.push_back(
        {{"began_s", in.began.to_seconds()},
         {"resolved_s", in.resolved ? json(in.resolved->to_seconds()) : json(nullptr)},
         {"phase", in.resolved        ? "resolved"
                   : in.replica >= 0  ? (rejoining ? "replica rejoining" : "replica out")
                   : start_.pending() ? "restarting"
                                      : "diagnosis and recovery"},
         {"category", in.category},
         {"cause", in.cause}});
  }
  const std::uint64_t opened = incidents_.opened_total();  // every incident of the run
  const LostTimeAccount::Accounting acc = account_.accounting();
  json out{{"t_s", now().to_seconds()},
           {"gen", s.gen},
           {"version", s.version},
           {"running", running_},
           {"step", progress_.last_step()},
           {"slots", slots},
           {"standby", standby},
           {"stack", config_.stack},
           {"repairing", repairing},
           {"retired", retired},
           {"machines", machines},
           {"ettr_so_far", acc.ettr},
           {"account", account_.to_json(account_.as_of())},
           {"incident_count", opened},
           {"incidents", incidents},
           {"ended_verdict", s.ended_verdict},
           {"storage",
            {{"state", log_.health().failing || journal_.health().failing ? "failing" : "ok"},
             {"event_log", storage_status(log_.health(), log_.path(), lost_before_restart_)},
             {"journal", storage_status(journal_.health(), journal_.path())}}}};
  if (config_.job.replica_groups) out["replicas"] = replicas_.status();
  return out;
}

double LiveWorld::write_summary() {
  const LostTimeAccount::Accounting acc = account_.close();  // the final account, written
  closed_ = true;
  log("summary", {{"elapsed_s", acc.elapsed_s},
                  {"final_step", acc.last},
                  {"first_step", acc.first},
                  {"productive_s", acc.productive_s},
                  {"ettr", acc.ettr},
                  {"step_time_s", acc.step_time_s}});
  save_journal();
  return acc.ettr;
}

}  // namespace faultline::live
