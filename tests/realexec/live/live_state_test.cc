// Live mode's state directory end to end: records lost to a full disk or a crash, operator
// mistakes, a paused controller, and an earlier release's journal.
#include "tests/realexec/live/live_cluster.h"

namespace {

using namespace faultline::live_e2e;

// The state directory on a 4 MiB tmpfs (root only), unmounted at the end (a copy kept when
// the test failed); ok() is false, with why(), when it cannot be mounted.
class TmpfsState {
 public:
  explicit TmpfsState(const LiveCluster& c)
      : dir_(c.dir() + "/state"), keep_(c.dir() + "/state-kept") {
    if (geteuid() != 0) {
      why_ = "needs root to mount a tmpfs for the state dir";
      return;
    }
    fs::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=4m") != 0) {
      why_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~TmpfsState() {
    if (!mounted_) return;
    if (::testing::Test::HasFailure()) sh("cp -a " + dir_ + " " + keep_);
    umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }
  void fill() const { sh("dd if=/dev/zero of=" + dir_ + "/filler bs=4k"); }
  void unfill() const { fs::remove(dir_ + "/filler"); }

 private:
  std::string dir_, keep_, why_;
  bool mounted_ = false;
};

// `live status --json`, null when it fails.
json status_of(LiveCluster& c) {
  if (c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json") != 0) return json();
  return json::parse(slurp(c.dir() + "/status.json"), nullptr, false);
}
// A field of a status by JSON pointer, null when absent (never throws).
json status_at(const json& st, const std::string& ptr) {
  const json::json_pointer p(ptr);
  return st.is_object() && st.contains(p) ? st.at(p) : json();
}
// Polls the status until `pred` holds; returns the last status seen.
json wait_status_of(LiveCluster& c, const std::function<bool(const json&)>& pred,
                    double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  json st;
  while (std::chrono::steady_clock::now() < end) {
    st = status_of(c);
    if (st.is_object() && pred(st)) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return st;
}

// Issue 37, item 3: disk full, then the controller killed. The records it held in memory
// were gone with no mark in the log (the injected fault's among them), the restarted status
// said `lost 0`, and the stale journal (saved before the outage: an older generation) made
// it kill healthy ranks ("not every rank is alive"). Now the outage is marked in a file
// allocated in advance, the restarted controller writes the gap into the log and counts it
// as lost, and it adopts the generation every machine runs.
TEST(LiveE2E, RecordsLostToAFullDiskAndACrashAreAGapInTheLogAndTheJobIsAdopted) {
  LiveCluster c("diskcrash", json::object());
  const TmpfsState tmpfs(c);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why();
  const std::string state = tmpfs.dir();
  const std::string log_path = state + "/events.jsonl";
  auto status = [&] { return status_of(c); };
  auto at = status_at;
  auto wait_status = [&](const std::function<bool(const json&)>& pred, double timeout_s) {
    return wait_status_of(c, pred, timeout_s);
  };
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const json journal_before = json::parse(slurp(state + "/journal.json"), nullptr, false);
  sh("dd if=/dev/zero of=" + state + "/filler bs=4k");
  ASSERT_EQ(
      at(wait_status([&](const json& st) { return at(st, "/storage/state") == "failing"; }, 20),
         "/storage/state"),
      "failing");
  // A fault during the outage: the job restarts as a new generation the journal cannot save.
  const long step_full = c.last_step();
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const json recovered = wait_status(
      [&](const json& st) {
        return st.value("running", false) && st.value("incident_count", 0L) >= 1 &&
               st.value("step", -1L) > step_full + 10;
      },
      45);
  ASSERT_TRUE(recovered.value("running", false)) << recovered.dump();
  const long pending = at(recovered, "/storage/event_log/pending").get<long>();
  ASSERT_GT(pending, 0);
  c.kill_controller(SIGKILL);
  tmpfs.unfill();
  EXPECT_EQ(json::parse(slurp(state + "/journal.json"), nullptr, false).value("gen", -1L),
            journal_before.value("gen", -2L))
      << "the journal on disk is the one from before the outage";

  c.start_controller(false);
  const json gap =
      c.wait_for([](const json& r) { return LiveCluster::is_note(r, "event log gap: "); }, 20);
  ASSERT_FALSE(gap.is_null()) << "no gap in the log";
  const std::string text = gap.value("text", "");
  const long lost = std::stol(text.substr(std::string("event log gap: ").size()));
  EXPECT_GE(lost, pending) << text;  // more may have waited by the time of the kill
  EXPECT_NE(text.find("No space left on device"), std::string::npos) << text;
  const json adopted = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "outcome" &&
               r.value("detail", "").find("adopted") != std::string::npos;
      },
      30);
  EXPECT_FALSE(adopted.is_null()) << "the restarted controller relaunched instead of adopting";
  const long before = c.last_step();
  ASSERT_FALSE(c.wait_step(before + 10, 60).is_null()) << "no training after the restart";
  const json st = status();
  EXPECT_EQ(at(st, "/storage/event_log/lost"), lost) << st.dump();
  c.stop_run();
  bool stale = false;
  for (const auto& r : c.records()) {
    EXPECT_FALSE(LiveCluster::is_note(r, "cannot adopt")) << r.dump();
    stale |= LiveCluster::is_note(r, "the journal is stale");
  }
  EXPECT_TRUE(stale);
  EXPECT_NO_THROW(faultline::traces::read_event_log(log_path));
}

// Issue 37, items 2, 5 and 9: an operator's mistakes and a paused controller leave the run
// whole. (2) A second `live run --fresh` on the state directory in use deleted the journal and
// unlinked the event log under the running controller before failing on its port; it is
// refused now, naming the holder's pid, with both files untouched. (9) `live inject --fault
// slow` without a factor said "injected" and the log recorded a fault the agent had refused
// (and `sim replay` then refused the log); a fault is recorded once its agent applied it.
// (5) A controller paused longer than the heartbeat timeout took every agent for lost on
// resume and evicted a healthy machine; their heartbeats are read first now.
TEST(LiveE2E, OperatorMistakesAndAPausedControllerLeaveTheRunWhole) {
  LiveCluster c("mistakes", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const std::string state = c.dir() + "/state";
  struct stat log_before {
  }, journal_before{};
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_before), 0);
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_before), 0);

  // (2) The second controller.
  const std::string second = c.dir() + "/second-controller.log";
  EXPECT_EQ(run_wait({kFaultline, "live", "run", c.config(), "--fresh"}, second), 2);
  const std::string said = slurp(second);
  EXPECT_NE(said.find(state + ": in use by the controller with pid " +
                      std::to_string(c.controller_pid())),
            std::string::npos)
      << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  struct stat log_after {
  }, journal_after{};
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_after), 0)
      << "the event log was deleted";
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_after), 0)
      << "the journal was deleted";
  EXPECT_EQ(log_after.st_ino, log_before.st_ino) << "the event log was replaced";
  EXPECT_GE(log_after.st_size, log_before.st_size);
  // The same with the lock file deleted (issue 52): it locked nothing of its own, a second
  // --fresh then took a lock on a new file and wiped the running controller's state.
  ASSERT_EQ(::unlink((state + "/controller.lock").c_str()), 0);
  EXPECT_EQ(run_wait({kFaultline, "live", "run", c.config(), "--fresh"}, second), 2);
  EXPECT_NE(slurp(second).find(state + ": in use by the controller with pid (unknown)"),
            std::string::npos)
      << slurp(second);
  ASSERT_EQ(::stat((state + "/events.jsonl").c_str(), &log_after), 0)
      << "the event log was deleted";
  ASSERT_EQ(::stat((state + "/journal.json").c_str(), &journal_after), 0)
      << "the journal was deleted";
  EXPECT_EQ(log_after.st_ino, log_before.st_ino) << "the event log was replaced";

  // (9) Faults the agents do not apply are refused, and never recorded.
  const std::string out = c.dir() + "/inject.log";
  EXPECT_EQ(c.client_to({"inject", c.config(), "--machine", "m1", "--fault", "slow"}, out), 1);
  EXPECT_NE(slurp(out).find("inject: detail: slow expects a slowdown factor in [1, 100]"),
            std::string::npos)
      << slurp(out);
  EXPECT_EQ(
      c.client_to({"inject", c.config(), "--machine", "m1", "--fault", "slow", "--detail", "0.5"},
                  out),
      1);
  // The agent's own refusal: a standby runs no rank to kill.
  EXPECT_EQ(c.client_to({"inject", c.config(), "--machine", "s0", "--fault", "kill"}, out), 1);
  EXPECT_NE(slurp(out).find("inject: the agent of s0 refused: no local rank 0 running"),
            std::string::npos)
      << slurp(out);

  // (5) The pause: twice the heartbeat timeout (3 s), the agents' heartbeats waiting unread.
  const long before_pause = c.last_step();
  ASSERT_EQ(::kill(c.controller_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::seconds(7));
  ASSERT_EQ(::kill(c.controller_pid(), SIGCONT), 0);
  ASSERT_FALSE(c.wait_step(before_pause + 30, 60).is_null()) << "no training after the pause";
  c.stop_run();

  int faults = 0, refused = 0;
  for (const auto& r : c.records()) {
    if (r.value("kind", "") == "fault") ++faults;
    if (LiveCluster::is_note(r, "the agent of s0 did not apply the injected kill")) ++refused;
    EXPECT_FALSE(LiveCluster::is_note(r, "agent of ") &&
                 r.value("text", "").find(" lost") != std::string::npos)
        << r.dump();
    EXPECT_FALSE(LiveCluster::is_note(r, "standby s0 lost")) << r.dump();
    EXPECT_FALSE(LiveCluster::is_action(r, "EvictMachines")) << r.dump();
  }
  EXPECT_EQ(faults, 0) << "a refused injection was recorded as ground truth";
  EXPECT_EQ(refused, 1);
  EXPECT_NO_THROW(faultline::traces::read_event_log(state + "/events.jsonl"))
      << "sim replay would refuse the log";
}

// Issue 52, broken item 2: a journal written by the previous release (format 1: its origin a
// CLOCK_MONOTONIC value of the boot that wrote it, no last_t_ns), read after a reboot,
// restarted run time at 0: the log's time went back from 861 s to 1 s, `live status` showed
// ETTR 5,791%, and `sim replay` took the log. Here this run's journal is turned into one of
// format 1 written on a boot that had been up 30 days (longer than this one): the restarted
// controller migrates it from the event log, the log's time goes on, the ETTR stays a
// fraction, and the log reads back.
TEST(LiveE2E, AnEarlierReleasesJournalReadAfterARebootKeepsTheRunsTime) {
  LiveCluster c("journal-v1", json::object());
  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(20, 60).is_null());
  c.kill_controller(SIGKILL);
  const std::string state = c.dir() + "/state";
  json j = json::parse(slurp(state + "/journal.json"));
  ASSERT_TRUE(j.contains("origin_unix_ns")) << j.dump();
  for (const char* later : {"format", "origin_unix_ns", "last_t_ns", "action_ceiling",
                            "machine_names", "lost_s", "stop", "replica_quorum", "replica_share_s"})
    j.erase(later);
  j["origin_ns"] = std::int64_t{30} * 86400 * 1000000000;
  std::ofstream(state + "/journal.json") << j.dump();
  double t_before = 0;
  for (const auto& r : c.records()) t_before = std::max(t_before, r.value("t_s", 0.0));
  c.start_controller(false);
  ASSERT_FALSE(c.wait_step(c.last_step() + 10, 60).is_null()) << "no training after the restart";
  const json migrated = c.wait_for(
      [](const json& r) {
        return r.value("kind", "") == "note" &&
               r.value("text", "").find("a journal of format 1 (an earlier release) migrated") !=
                   std::string::npos;
      },
      5);
  EXPECT_FALSE(migrated.is_null()) << "the migration is noted";
  ASSERT_EQ(c.client_to({"status", c.config(), "--json"}, c.dir() + "/status.json"), 0);
  const json st = json::parse(slurp(c.dir() + "/status.json"), nullptr, false);
  ASSERT_TRUE(st.is_object());
  EXPECT_GT(st["ettr_so_far"].get<double>(), 0.0);
  EXPECT_LE(st["ettr_so_far"].get<double>(), 1.0) << "ETTR is a fraction";
  c.stop_run();
  double prev = 0;
  int back = 0;
  for (const auto& r : c.records()) {
    const double t = r.value("t_s", 0.0);
    back += t < prev;
    prev = std::max(prev, t);
  }
  EXPECT_EQ(back, 0) << "the log's time went back";
  EXPECT_GT(prev, t_before);
  EXPECT_NO_THROW(faultline::traces::read_event_log(state + "/events.jsonl"))
      << "sim replay would refuse the log";
}

// Issue 15: on a full disk the controller's event log stopped mid-record, silently, and
// 16 s of events were lost. Here the state dir is a 4 MiB tmpfs that a filler file takes
// whole while the job trains (and a rank is killed, so that the journal must be saved):
// the status says so, stderr says so once, the run goes on; once the filler is gone the
// log catches up in order and decodes. A disk still full at the end loses what waited:
// exit status 4, and the last line says so.
TEST(LiveE2E, AFullStateDiskIsReportedOnceTheRunGoesOnAndTheEventLogCatchesUp) {
  LiveCluster c("diskfull", json::object());
  const TmpfsState tmpfs(c);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why();
  const std::string state = tmpfs.dir();
  const std::string log_path = state + "/events.jsonl";
  auto fill = [&] { tmpfs.fill(); };
  auto status = [&] { return status_of(c); };
  auto at = status_at;
  auto storage = [&](const json& st, const std::string& file, const std::string& key) {
    return at(st, "/storage/" + file + "/" + key);
  };
  auto wait_status = [&](const std::function<bool(const json&)>& pred, double timeout_s) {
    return wait_status_of(c, pred, timeout_s);
  };
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };

  c.start_controller();
  c.start_agents();
  ASSERT_FALSE(c.wait_step(10, 60).is_null()) << "training did not reach step 10";
  const json healthy = status();
  ASSERT_TRUE(healthy.is_object());
  EXPECT_EQ(at(healthy, "/storage/state"), "ok") << healthy.dump();

  // The disk fills: the status says the event log is failing, with records pending.
  fill();
  const json full =
      wait_status([&](const json& st) { return at(st, "/storage/state") == "failing"; }, 20);
  EXPECT_EQ(storage(full, "event_log", "failing"), true) << full.dump();
  const json pending = storage(full, "event_log", "pending");
  EXPECT_TRUE(pending.is_number() && pending.get<long>() > 0)
      << "records wait in memory: " << pending;
  EXPECT_EQ(storage(full, "event_log", "lost"), 0);
  EXPECT_EQ(storage(full, "event_log", "last_error"), log_path + ": No space left on device");
  EXPECT_TRUE(storage(full, "event_log", "since").is_string());
  EXPECT_EQ(c.client_to({"status", c.config()}, c.dir() + "/status.txt"), 0);
  const std::string table = slurp(c.dir() + "/status.txt");
  EXPECT_NE(table.find("storage: FAILING since "), std::string::npos) << table;
  EXPECT_NE(table.find("No space left on device"), std::string::npos) << table;
  std::cout << table;

  // A rank dies while the disk is full: the run recovers (the journal cannot be saved,
  // the previous one stays) and trains on; the controller stays up.
  const long step_full = full.value("step", -1L);
  ASSERT_EQ(c.inject("m1", "kill"), 0);
  const json recovered = wait_status(
      [&](const json& st) {
        return st.value("running", false) && st.value("step", -1L) > step_full + 10 &&
               st.value("incident_count", 0L) >= 1 && at(st, "/storage/journal/failing") == true;
      },
      45);
  ASSERT_TRUE(recovered.is_object());
  EXPECT_GT(recovered.value("step", -1L), step_full + 10)
      << "the job did not train on while the disk was full";
  EXPECT_EQ(storage(recovered, "journal", "failing"), true) << recovered.dump();
  EXPECT_EQ(storage(recovered, "event_log", "failing"), true);
  EXPECT_TRUE(c.controller_alive());
  const json journal_before = json::parse(slurp(state + "/journal.json"), nullptr, false);
  EXPECT_TRUE(journal_before.is_object()) << "the previous journal stays whole";

  // Room again: everything that waited is written, in order, and the log decodes.
  fs::remove(state + "/filler");
  const json ok = wait_status([&](const json& st) { return at(st, "/storage/state") == "ok"; }, 10);
  EXPECT_EQ(storage(ok, "event_log", "failing"), false) << ok.dump();
  EXPECT_EQ(storage(ok, "event_log", "pending"), 0);
  EXPECT_EQ(storage(ok, "event_log", "lost"), 0);
  EXPECT_EQ(storage(ok, "journal", "failing"), false);
  EXPECT_GT(json::parse(slurp(state + "/journal.json"), nullptr, false).value("gen", 0L),
            journal_before.value("gen", 0L))
      << "the journal was saved again, with the new generation";
  // The controller reports a recovery on its next storage check (every 0.5 s), which may
  // come after the status already says "ok": wait for both notes before reading the log.
  auto noted = [&](const std::string& what) {
    return !c.wait_for(
                 [&](const json& r) {
                   return r.value("kind", "") == "note" && r.value("text", "").rfind(what, 0) == 0;
                 },
                 10)
                .is_null();
  };
  EXPECT_TRUE(noted("storage: the event log is written again"));
  EXPECT_TRUE(noted("storage: the journal is saved again"));
  faultline::traces::EventLog log;
  ASSERT_NO_THROW(log = faultline::traces::read_event_log(log_path));
  EXPECT_FALSE(log.torn_tail);
  // Every step of rank 0 is in the log, within each incarnation one after the other:
  // nothing of the outage is missing.
  ASSERT_GT(log.progress.size(), 20u);
  for (std::size_t i = 1; i < log.progress.size(); ++i) {
    if (!log.progress[i].value.restart) {
      EXPECT_EQ(log.progress[i].value.step, log.progress[i - 1].value.step + 1)
          << "line " << log.progress[i].line;
    }
  }
  EXPECT_EQ(log.faults.size(), 1u) << "the kill injected during the outage";
  bool caught_up = false;
  for (const auto& n : log.notes)
    caught_up |= n.value.rfind("storage: the event log is written again", 0) == 0 &&
                 n.value.find(", 0 lost") != std::string::npos;
  EXPECT_TRUE(caught_up) << "a note says where the log was written late";
  const std::string out = slurp(c.dir() + "/controller.log");
  std::cout << out;
  EXPECT_EQ(count(out, "storage: writing the event log failed"), 1) << out;
  EXPECT_EQ(count(out, "No space left on device"), 2)
      << "the event log's line and the journal's, once each\n"
      << out;
  EXPECT_EQ(count(out, "storage: the event log is written again"), 1) << out;
  EXPECT_EQ(count(out, "storage: saving the journal failed"), 1) << out;
  EXPECT_EQ(count(out, "storage: the journal is saved again"), 1) << out;

  // Full again at the end: what waits when the controller exits is lost, and it says so. The
  // event log itself must be failing (the journal, larger, can fail first while the log's
  // short records still fit in the filler's last page).
  fill();
  wait_status([&](const json& st) { return at(st, "/storage/event_log/failing") == true; }, 20);
  EXPECT_EQ(c.client({"stop", c.config()}), 0);
  EXPECT_EQ(c.wait_controller_exit(20), 4) << "lost records: exit status 4";
  std::string last = slurp(c.dir() + "/controller.log");
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_NE(last.find("faultline live: the event log " + log_path + " is incomplete: "),
            std::string::npos)
      << last;
  EXPECT_NE(last.find("records lost to write failures"), std::string::npos) << last;
  std::cout << last << "\n";
  fs::remove(state + "/filler");
  EXPECT_NO_THROW(log = faultline::traces::read_event_log(log_path));
  EXPECT_FALSE(log.torn_tail);
}

}  // namespace
