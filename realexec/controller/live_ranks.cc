// The job's ranks as LiveWorld sees them: stopping and starting the job (with the adoption
// of a generation a previous controller left running), launching ranks, and believing what
// agents report about them: step reports (samples for the policy's detection, the good
// code version, healthy step times), clean and failed exits, and the attribution of an exit
// caused by a peer. Here the job is judged broken or running again, which opens and closes
// incidents.
#include <algorithm>

#include "policies/api/refusals.h"
#include "realexec/controller/live_world.h"
#include "realexec/controller/live_world_internal.h"
#include "traces/config.h"
#include "traces/stats.h"

namespace faultline::live {

using nlohmann::json;
using world_detail::kRequestTimeoutS;

namespace {

constexpr int kGoodVersionSteps = 20;  // steps a version must run to become the rollback target
// How long a victim's exit (a collective timeout, a peer's connection lost) waits for the
// exit of the rank that caused it: a killed rank's exit reaches its agent at once, its
// peers' errors may overtake it by the agents' round trips.
constexpr double kPeerGraceS = 1.5;
// In place (job.in_place): how long a stop waits for a rank to say it holds in place (a peer's
// death reaches it at its next collective) before it is killed.
constexpr double kHoldGraceS = 2;

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

}  // namespace

void LiveWorld::kill_all(std::function<void()> then) {
  const std::int64_t gen = journal_.state().gen;
  auto pending = std::make_shared<int>(0);
  auto done = std::make_shared<std::function<void()>>(std::move(then));
  MachineSet targets = job_machines();
  for (MachineId m = 0; m < cluster_.machine_count(); ++m)
    if (cluster_.slot_of(m) < 0 && link_.connected(m) && adoption_.ranks.count(m))
      targets.push_back(m);
  *pending = static_cast<int>(targets.size()) + 1;
  auto finish = [pending, done] {
    if (--*pending == 0) (*done)();
  };
  for (MachineId m : targets)
    requests_.send(m, json{{"type", "kill"}, {"gen", gen}}, Duration::seconds(kRequestTimeoutS),
                   [finish](const AgentReply&) { finish(); });
  finish();
}

void LiveWorld::kill_sparing(std::function<void(HeldRanks)> then) {
  const std::int64_t gen = journal_.state().gen;
  auto pending = std::make_shared<int>(0);
  auto held = std::make_shared<HeldRanks>();
  auto done = std::make_shared<std::function<void(HeldRanks)>>(std::move(then));
  const MachineSet job = job_machines();
  MachineSet others;
  for (MachineId m = 0; m < cluster_.machine_count(); ++m)
    if (cluster_.slot_of(m) < 0 && link_.connected(m) && adoption_.ranks.count(m))
      others.push_back(m);
  *pending = static_cast<int>(job.size() + others.size()) + 1;
  auto finish = [pending, held, done] {
    if (--*pending == 0) (*done)(std::move(*held));
  };
  for (MachineId m : job)
    requests_.send(
        m,
        json{
            {"type", "kill"}, {"gen", gen}, {"spare_holding", true}, {"hold_grace_s", kHoldGraceS}},
        Duration::seconds(kRequestTimeoutS + kHoldGraceS),
        [this, m, held, finish](const AgentReply& r) {
          if (r.ok && r.spared && !r.spared->empty()) {
            const SlotId slot = cluster_.slot_of(m);
            const std::int64_t g = config_.job.gpus_per_machine;
            for (std::int64_t rank : *r.spared)  // its own slot's ranks only
              if (slot >= 0 && rank >= slot * g && rank < (slot + 1) * g)
                (*held)[m].push_back(rank);
          }
          finish();
        });
  for (MachineId m : others)
    requests_.send(m, json{{"type", "kill"}, {"gen", gen}}, Duration::seconds(kRequestTimeoutS),
                   [finish](const AgentReply&) { finish(); });
  finish();
}

// In place: a peer died; `rank` keeps its process and its state at `step` (16 a generation).
void LiveWorld::note_holding(MachineId m, std::int64_t rank, std::int64_t step) {
  if (ranks_.admit_holding_note())
    note("rank " + std::to_string(rank) + " on " + config_.machine(m).name +
         " holds in place after step " + std::to_string(step));
}

void LiveWorld::job_broken(const std::string& category, const std::string& cause) {
  if (migrations_.under_way())
    migrations_.fail("the job stopped during the migration (" + cause + ")");
  if (running_) {
    // The job stopped training: an incident opens, from its last step report (a hang or a
    // slowdown began before it was detected), until every rank runs again.
    const Instant began =
        progress_.last_progress_at().ns > 0 && progress_.last_progress_at() < now()
            ? progress_.last_progress_at()
            : now();
    incidents_.open(Incident{began, std::nullopt, cause, category, now(), std::nullopt});
    running_ = false;
    journal_.state().running = false;
    save_journal();
  }
}

void LiveWorld::do_stop(ActionId id, const StopJob& a, bool spare) {
  const Instant t = now();
  job_broken("policy_stop", "stopped: " + a.reason);
  start_.end();  // a start in flight is abandoned
  if (spare && config_.job.in_place) {
    kill_sparing([this, id, t](HeldRanks held) {
      std::size_t n = 0;
      for (const auto& [m, ranks] : held) n += ranks.size();
      outcome(id, true,
              n == 0 ? std::string("every rank killed")
                     : "every rank killed but " + std::to_string(n) + " holding in place",
              t);
      deliver(JobStopped{id});
    });
    return;
  }
  kill_all([this, id, t] {
    outcome(id, true, "every rank killed", t);
    deliver(JobStopped{id});
  });
}

void LiveWorld::do_start(ActionId id, const std::string& why, bool in_place) {
  const Instant t = now();
  // act() refused a start with an empty slot; an adoption (live_fleet.cc) comes back here
  // later, when a slot may have emptied since.
  if (auto why = empty_slot_refusal(cluster_)) return refuse(id, *why, t);
  start_.begin(id, t);
  account_.restart_began(t);
  if (adoption_.active) {
    // A restarted controller: wait for the slots' agents to report what they run.
    adoption_.action = id;
    const auto check = [this] {
      adoption_.timer = 0;
      if (!adoption_.active) return;
      adoption_.active = false;
      auto& s = journal_.state();
      bool all = true;
      std::set<std::int64_t> gens;
      // Replicas out of the quorum when the previous controller stopped run nothing to adopt
      // (when the policy runs replica groups still: otherwise the job is launched again).
      const std::set<std::int64_t> out =
          replicas_.set().enabled() ? incidents_.replicas_out() : std::set<std::int64_t>{};
      for (MachineId m : job_machines()) {
        if (out.count(cluster_.slot_of(m))) continue;
        if (static_cast<int>(adoption_.ranks[m].size()) != config_.job.gpus_per_machine)
          all = false;
        gens.insert(adoption_.gen.count(m) ? adoption_.gen[m] : -1);
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
      if (all && start_.id() == adoption_.action) {
        if (config_.job.replica_groups)  // as the journal's quorum left them
          for (SlotId slot = 0; slot < cluster_.slots(); ++slot)
            if (!out.count(slot)) replicas_.set().admit(slot);
        running_ = true;
        job_running();
        start_.end();
        progress_.started(now());
        outcome(adoption_.action, true,
                "adopted generation " + std::to_string(s.gen) + " still running", start_.began());
        deliver(JobStarted{adoption_.action, std::max<std::int64_t>(0, progress_.last_step())});
        if (!out.empty()) replicas_.resume_out(out, adoption_.ranks);
        return;
      }
      // Ranks that ended while no controller watched: their exits never reached a log.
      // Each is a gap in the log, said and counted, before the job is launched again.
      const std::int64_t g = config_.job.gpus_per_machine;
      for (MachineId m : job_machines()) {
        const int slot = cluster_.slot_of(m);
        if (!link_.connected(m) || !adoption_.ranks.count(m) || out.count(slot)) continue;
        if (adoption_.gen.count(m) && adoption_.gen[m] != s.gen) continue;
        for (std::int64_t r = slot * g; r < (slot + 1) * g; ++r)
          if (!adoption_.ranks[m].count(r)) {
            note("event log gap: rank " + std::to_string(r) + " on " + config_.machine(m).name +
                 " (generation " + std::to_string(s.gen) +
                 ") ended while no controller was running; its exit is lost");
            lost_before_restart(1);
          }
      }
      note("cannot adopt generation " + std::to_string(s.gen) +
           ": not every rank is alive; relaunching");
      kill_all([this] {
        if (start_.id() == adoption_.action) launch(adoption_.action, start_.began());
      });
    };
    bool all_connected = true;
    for (MachineId m : job_machines())
      all_connected &= link_.connected(m) && adoption_.ranks.count(m);
    if (all_connected) {
      reactor_.defer(check);
    } else {
      adoption_.timer =
          reactor_.add_timer(Duration::seconds(2 * config_.heartbeat_timeout_s), check);
    }
    return;
  }
  note("start: " + why);
  if (in_place) return start_in_place(id, t);
  kill_all([this, id, t] {
    if (start_.id() == id) launch(id, t);
  });
}

void LiveWorld::start_in_place(ActionId id, Instant t) {
  kill_sparing([this, id, t](HeldRanks held) {
    if (start_.id() != id) return;
    if (held.empty()) {
      note(
          "in-place restart not possible (no rank holds its state in place): a standard "
          "restart");
      kill_all([this, id, t] {
        if (start_.id() == id) launch(id, t);
      });
      return;
    }
    launch(id, t, &held);
  });
}

void LiveWorld::launch(ActionId id, Instant started, const HeldRanks* kept) {
  auto& s = journal_.state();
  ++s.gen;
  start_.launched(s.gen);
  running_ = false;
  s.running = false;
  note_unnoted_exits();
  ranks_.launch(now());
  victim_timer_.cancel();
  // A replica-group job starts in a quorum of every replica (replica_groups.cc).
  std::optional<Quorum> quorum;
  if (config_.job.replica_groups) {
    quorum = replicas_.launch_all();
  }
  save_journal();
  const int g = config_.job.gpus_per_machine;
  const int world = cluster_.slots() * g;
  const std::string master = config_.machine(cluster_.machine_in(0)).addr;
  // An in-place re-form meets on its own port, alternating, apart from the one the kept
  // ranks' previous group may still hold.
  const int port =
      kept ? config_.job.master_port + 1 + static_cast<int>(s.gen % 2) : config_.job.master_port;
  start_.set_in_place_note({});
  if (kept) {
    std::set<std::int64_t> stay;
    for (const auto& [m, ranks] : *kept) stay.insert(ranks.begin(), ranks.end());
    std::string k, l;
    for (std::int64_t r = 0; r < world; ++r) {
      std::string& to = stay.count(r) ? k : l;
      to += (to.empty() ? "" : ",") + std::to_string(r);
    }
    start_.set_in_place_note("in place: ranks " + k + " kept, ranks " + (l.empty() ? "none" : l) +
                             " relaunched; ");
    note("in-place restart of generation " + std::to_string(s.gen) + ": ranks " + k +
         " kept their processes, ranks " + (l.empty() ? "none" : l) + " relaunched");
  }
  for (SlotId slot = 0; slot < cluster_.slots(); ++slot) {
    const MachineId m = cluster_.machine_in(slot);
    json ranks = json::array();
    for (int l = 0; l < g; ++l) ranks.push_back({{"rank", slot * g + l}, {"local_rank", l}});
    json msg{{"type", "launch"},     {"gen", s.gen},
             {"version", s.version}, {"ranks", ranks},
             {"world_size", world},  {"master_addr", master},
             {"master_port", port},  {"ckpt_every", s.ckpt_every}};
    if (quorum) msg["replicas"] = replicas_.quorums().launch_field(*quorum);
    if (config_.job.in_place) msg["reform"] = true;
    if (kept) msg["in_place"] = true;
    requests_.send(
        m, std::move(msg), Duration::seconds(kRequestTimeoutS), [this, id, m](const AgentReply& r) {
          if (start_.id() != id || r.ok) return;
          const std::string why = "launch failed on " + config_.machine(m).name + ": " + r.detail;
          start_.end();
          outcome(id, false, start_.in_place_note() + why, start_.began());
          deliver(StartFailed{id, m, why});
        });
  }
  start_.timer().arm(Duration::seconds(config_.job.startup_timeout_s), [this, id] {
    if (start_.id() != id) return;
    start_.end();
    outcome(id, false,
            start_.in_place_note() + "ranks did not all start within job.startup_timeout_s = " +
                traces::json_brief(config_.job.startup_timeout_s) + " s",
            start_.began());
    deliver(StartFailed{id, kNoMachine, "job start timed out"});
  });
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
        config_.machine(m).name + " (slot " + std::to_string(slot) + ")");
  return true;
}

// A step far beyond what the job can have reached (a replica reporting step 10^15) is
// refused: believed, it would be the detector's progress, and every true step after it a
// stall that restarts a healthy job. Noted with the rank and its machine (the first 5, then
// one in 1000).
bool LiveWorld::believable_step(MachineId m, std::int64_t rank, std::int64_t step) {
  const StepProgress::Bound b =
      progress_.believable(std::max(ranks_.start_step(), ranks_.rank_step(rank)),
                           config_.job.nominal_step_time_s, now());
  if (static_cast<double>(step) <= b.most) return true;
  const std::uint64_t refused = progress_.refuse();
  if (refused <= 5 || refused % 1000 == 0)
    note("refused a step report of rank " + std::to_string(rank) + " on " +
         config_.machine(m).name + ": step " + std::to_string(step) +
         " is beyond what the job can have reached (step " + std::to_string(b.base) + " " +
         traces::json_brief(b.since_s) + " s ago; at most " +
         std::to_string(static_cast<std::int64_t>(b.most)) + "): " + std::to_string(refused) +
         " refused so far");
  return false;
}

void LiveWorld::on_report(MachineId m, const AgentReport& msg) {
  if (msg.gen != journal_.state().gen) return;
  const RankReport& r = msg.report;
  // The rank whose pipe it came from (the agent says), or failing that the one it claims.
  if (msg.rank >= 0 && r.rank && *r.rank != msg.rank)
    bad("report: report.rank " + std::to_string(*r.rank) + " differs from the rank of its pipe, " +
        std::to_string(msg.rank));
  const std::int64_t rank = msg.rank >= 0 ? msg.rank : r.rank.value_or(-1);
  if (migrations_.report(m, rank, r)) return;  // a migration's joiner (migrations.h)
  if (!runs_rank(m, rank, "report")) return;
  if (replicas_.report(m, rank, r)) return;
  if (r.type == "holding") return note_holding(m, rank, r.step.value_or(-1));
  if (r.type == "started" && start_.pending()) {
    // While the start kills, the journal's generation is the outgoing one: its late
    // "started" reports must not complete a start that has not launched yet.
    if (!start_.launched_gen(journal_.state().gen)) return;
    ranks_.started(rank);
    // The restored step of a run's first start is its base (a new run on old checkpoints).
    if (r.step && (progress_.last_step() < 0 || believable_step(m, rank, *r.step)))
      ranks_.set_start_step(*r.step);
    if (static_cast<int>(ranks_.started_count()) ==
        cluster_.slots() * config_.job.gpus_per_machine) {
      const ActionId id = start_.end();
      running_ = true;
      job_running();
      auto& s = journal_.state();
      s.running = true;
      if (s.first_step < 0) s.first_step = ranks_.start_step();
      progress_.started(now());
      save_journal();
      log("progress", {{"step", ranks_.start_step()}, {"loss", nullptr}, {"restart", true}});
      outcome(id, true,
              start_.in_place_note() + "every rank started from step " +
                  std::to_string(ranks_.start_step()) + " (" +
                  (r.restored_from.empty() ? std::string("?") : r.restored_from) + ")",
              start_.began());
      deliver(JobStarted{id, ranks_.start_step()});
    }
    return;
  }
  if (r.type != "step") return;
  const std::int64_t step = *r.step;  // a step report without one does not decode
  if (!believable_step(m, rank, step)) return;
  if (running_) {
    ranks_.record_step(rank, step, now());
  }
  if (rank != replicas_.step_rank())
    return;  // rank 0 (or the lowest replica training) carries the step
  const double step_time = r.step_time_s.value_or(0);
  const bool loss_nan = r.loss_nan();
  const bool grad_nan = r.grad_norm_nan();
  const std::optional<double> loss = loss_nan ? std::nullopt : r.loss;  // finite, or not known
  account_.step(step, step_time, r.checkpoint_step);
  progress_.advance(step, now());
  if (!loss)
    log("progress", {{"step", step}, {"loss", nullptr}, {"restart", false}});
  else
    log("progress", {{"step", step}, {"loss", *loss}, {"restart", false}});
  auto& s = journal_.state();
  if (progress_.steps_since_start() == kGoodVersionSteps && s.good_version != s.version) {
    s.good_version = s.version;
    note("code version " + s.version + " ran " + std::to_string(kGoodVersionSteps) +
         " steps cleanly");
    save_journal();
  }
  progress_.add_step_time(step_time);
  if (!running_) return;
  const std::optional<double> grad_norm = grad_nan ? std::nullopt : r.grad_norm;
  if (auto out = progress_.sample(step, step_time, loss, grad_norm, loss_nan || grad_nan, now()))
    deliver(*out);
}

void LiveWorld::on_exit(MachineId m, const AgentExit& msg) {
  if (msg.gen != journal_.state().gen) {
    // A rank of a generation already replaced: its crash, in its own words, is noted.
    if (msg.gen < journal_.state().gen)
      note_dropped_exit(m, msg.rank, msg.code, msg.signal, msg.signature,
                        "its generation was replaced");
    return;
  }
  if (migrations_.exit(m, msg)) return;  // a migration's joiner not in the slot yet
  if (!runs_rank(m, msg.rank, "exit")) return;
  const int code = msg.code;
  const int sig = msg.signal;
  const std::string& signature = msg.signature;
  const std::int64_t rank = msg.rank;
  if (code == 0 && sig == 0) {
    ranks_.clean_exit(rank);
    // With replica groups, every replica of the quorum (none rejoining) ends the job.
    const ReplicaSet& set = replicas_.set();
    const bool quorum_done = set.enabled() && running_ && set.joiners().empty() &&
                             std::all_of(set.members().begin(), set.members().end(),
                                         [&](std::int64_t r) { return ranks_.exited_cleanly(r); });
    if (quorum_done || static_cast<int>(ranks_.clean_exit_count()) ==
                           cluster_.slots() * config_.job.gpus_per_machine) {
      note("every rank finished its steps");
      job_broken("job_finished", "every rank finished its steps");
      finished_ = true;
    }
    return;
  }
  if (replicas_.exit(m, rank, sig ? 128 + sig : code, signature)) return;  // it drops out
  if (start_.pending()) {
    // Ranks of the previous generation die while a start kills them: not a failure of
    // this start, whose ranks are launched only after the kill.
    if (!start_.launched_gen(journal_.state().gen))
      return note_dropped_exit(m, rank, code, sig, signature);
    if (sig == 0 && is_peer_symptom(signature)) {
      hold_victim(m, rank, code, signature);
      return;
    }
    fail_start(m, rank, signature);
    return;
  }
  // Echoes of an exit already reported, or of the stop.
  if (!running_ || ranks_.exit_reported()) return note_dropped_exit(m, rank, code, sig, signature);
  const int status = sig ? 128 + sig : code;
  if (sig == 0 && is_peer_symptom(signature)) {
    hold_victim(m, rank, status, signature);
    return;
  }
  report_exit(m, rank, status, signature);
}

// An exit that opens no incident (the job stops, is stopped, or another exit broke it): an
// echo, unless the rank said why in its own words (not a peer's error, not a bare exit code).
// Such a crash is a fault of its own that the restart under way covers: the event log
// records it, kDroppedExitBurst at once and then one a second (every rank of a large job may
// exit at a stop); those past that are counted and the count noted (a cap of 16 per
// generation dropped 34 separate crashes of a long generation in the storm at 4,000 agents).
void LiveWorld::note_dropped_exit(MachineId m, std::int64_t rank, int code, int sig,
                                  const std::string& signature, const char* after) {
  if (sig != 0 || code == 0 || signature.empty() || is_peer_symptom(signature) ||
      signature.rfind("exit code ", 0) == 0)
    return;
  const Instant t = now();
  if (!ranks_.admit_dropped_note(t)) return;
  note_unnoted_exits();
  const std::string when = after      ? std::string("after ") + after
                           : running_ ? "while another rank's exit is handled"
                                      : "while the job is not running";
  note("rank " + std::to_string(rank) + " on " + config_.machine(m).name + " exited (code " +
       std::to_string(code) + ") " + when + ": " + signature +
       " (no new incident: the restart under way covers it)");
}

void LiveWorld::note_unnoted_exits() {
  const int unnoted = ranks_.take_unnoted();
  if (unnoted == 0) return;
  note(std::to_string(unnoted) +
       " more ranks exited in their own words while no incident could open, not noted one by "
       "one (" +
       std::to_string(RankGeneration::kDroppedExitBurst) + " notes at once, then one a second)");
}

// A start that failed because `rank` exited; its step is the one the rank had started
// from, when it had reported that it started (so a crash in its first step counts as one
// after that step).
void LiveWorld::fail_start(MachineId m, std::int64_t rank, const std::string& signature) {
  if (!start_.pending()) return;
  const ActionId id = start_.end();
  victim_timer_.cancel();
  ranks_.take_victim();
  outcome(id, false,
          start_.in_place_note() + "rank " + std::to_string(rank) +
              " exited while starting: " + signature,
          start_.began());
  deliver(StartFailed{id, m, signature, ranks_.has_started(rank) ? ranks_.start_step() : -1});
}

// A victim (a peer stopped answering) waits a little for the exit of the rank that caused it.
void LiveWorld::hold_victim(MachineId m, std::int64_t rank, int code,
                            const std::string& signature) {
  // The first victim speaks for them all.
  if (!ranks_.hold_victim(RankGeneration::Victim{m, rank, code, signature})) return;
  victim_timer_.arm(Duration::seconds(kPeerGraceS), [this] { attribute_victim_exit(); });
}

void LiveWorld::report_exit(MachineId m, std::int64_t rank, int code,
                            const std::string& signature) {
  if (!running_ || ranks_.exit_reported()) return;
  ranks_.mark_exit_reported();
  victim_timer_.cancel();
  ranks_.take_victim();
  job_broken("rank_exit", "rank " + std::to_string(rank) +
                              (m == kNoMachine ? "" : " on " + config_.machine(m).name) +
                              " exited: " + signature);
  deliver(ProcessExit{m, code, signature, ranks_.rank_step(rank)});
}

// No rank exited on its own within the grace: the victim's exit is reported as the
// collective's, naming the machine whose ranks stalled first when the step reports show
// one (all of its ranks behind every other rank), and no machine otherwise.
void LiveWorld::attribute_victim_exit() {
  const std::optional<RankGeneration::Victim> held = ranks_.take_victim();
  if (!held) return;
  const RankGeneration::Victim& v = *held;
  if (start_.pending()) {  // no rank exited on its own: the start failed where the victim was
    fail_start(v.machine, v.rank, v.signature);
    return;
  }
  if (!running_ || ranks_.exit_reported()) return;
  const RankGeneration::Laggard lag =
      ranks_.laggard(cluster_.slots(), config_.job.gpus_per_machine);
  const MachineId named = lag.slot >= 0 ? cluster_.machine_in(lag.slot) : kNoMachine;
  note("rank " + std::to_string(v.rank) + " on " + config_.machine(v.machine).name +
       " exited because a peer stopped answering (" + v.signature + "); " +
       (named == kNoMachine
            ? std::string("no machine's ranks are behind the others: the exit names no machine")
            : config_.machine(named).name + "'s ranks stalled first, after step " +
                  std::to_string(lag.behind) + " (every other rank reported step " +
                  std::to_string(lag.others) + " or later)"));
  report_exit(named, v.rank, v.code, v.signature);
}

void LiveWorld::job_running() {
  account_.running();
  // A launch brought every replica back (an adoption, only those the journal had in).
  for (std::int64_t r : incidents_.replicas_out())
    if (replicas_.set().member(r) && !replicas_.set().joining(r))
      replicas_.incident_closes(r, "recovered");
  Incident* open = incidents_.open_job_stop();
  if (!open) return;
  incidents_.resolve(*open, now(), "recovered");
  account_.closed(*open, ranks_.start_step());
}

}  // namespace faultline::live
