// The controller's journal on a disk that really fills (issue 15): a failed save keeps the
// previous journal whole, leaves no temporary file behind, is reported in health() and
// works again at the next save once there is room.
#include "realexec/controller/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "tests/support/full_disk.h"

namespace faultline::live {
namespace {

// The journal's directory on a disk the test fills (tests/support/full_disk.h).
class FullDiskJournal : public ::testing::Test {
 protected:
  void fill() { disk_.fill(8, false); }
  void free_space() { disk_.free_space(); }
  std::string slurp(const std::string& path) const {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  faultline::testing::FullDiskDir disk_{"faultline-journal"};
  const std::string dir_ = disk_.path();
  const bool mounted_ = disk_.mounted();
};

TEST_F(FullDiskJournal, AFailedSaveKeepsThePreviousJournalWholeAndTheNextSaveWorksOnceThereIsRoom) {
  const std::string path = dir_ + "/journal.json";
  Journal j(path);
  j.state().gen = 1;
  j.state().version = "v1";
  std::string err;
  ASSERT_TRUE(j.save(&err)) << err;
  const std::string first = slurp(path);
  EXPECT_FALSE(j.health().failing);

  fill();
  j.state().gen = 2;
  EXPECT_FALSE(j.save(&err));
  EXPECT_EQ(err, path + ".tmp: " + std::strerror(mounted_ ? ENOSPC : EFBIG));
  EXPECT_EQ(slurp(path), first) << "the previous journal stays, whole";
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"))
      << "no partial temporary file is left to hold space";
  EXPECT_TRUE(j.health().failing);
  EXPECT_EQ(j.health().outages, 1u);
  EXPECT_EQ(j.health().pending, 1u);
  EXPECT_EQ(j.health().last_error, err);
  EXPECT_FALSE(j.retry());
  EXPECT_EQ(j.health().failed_writes, 2u);
  EXPECT_EQ(j.health().outages, 1u) << "one outage, however many saves fail in it";

  free_space();
  EXPECT_TRUE(j.retry());
  EXPECT_FALSE(j.health().failing);
  EXPECT_EQ(j.health().pending, 0u);
  Journal back(path);
  ASSERT_TRUE(back.load(&err)) << err;
  EXPECT_EQ(back.state().gen, 2);
}

// The account of lost time survives a restart through the journal (issue 39): every phase's
// seconds and the open stop period come back exactly as saved.
// The outage marker a previous controller left is checked before its gap is believed: a
// marker claiming 1.8e19 waiting records once made a healthy run report them lost (exit 4).
TEST(OutageMarkerFile, AnImplausibleMarkerIsIgnoredWithItsReasonAPlausibleOneIsRead) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("faultline-outage-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "outage").string();
  auto marker = [&](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
    auto m = std::make_unique<OutageMarker>(path);
    std::string err;
    EXPECT_TRUE(m->open(&err)) << err;
    return m;
  };
  const std::string fields =
      R"("lost":0,"since_unix_ms":1764800000000,"error":"events.jsonl: No space left on device")";
  auto ok = marker(R"({"open":true,"pending":12,"first_t_s":3.5,"last_t_s":9.0,)" + fields + "}");
  ASSERT_TRUE(ok->previous().has_value());
  EXPECT_EQ(ok->previous()->pending, 12u);
  EXPECT_EQ(ok->ignored(), "");

  auto huge = marker(R"({"open":true,"pending":18000000000000000000,"first_t_s":3.5,)"
                     R"("last_t_s":9.0,)" +
                     fields + "}");
  EXPECT_FALSE(huge->previous().has_value());
  EXPECT_NE(huge->ignored().find("pending 18000000000000000000 is not in [1, 100000]"),
            std::string::npos)
      << huge->ignored();

  auto backwards =
      marker(R"({"open":true,"pending":3,"first_t_s":9.0,"last_t_s":1.0,)" + fields + "}");
  EXPECT_FALSE(backwards->previous().has_value());
  EXPECT_NE(backwards->ignored().find("first_t_s"), std::string::npos);

  auto broken = marker(R"({"open":true,"pending":"many"})");
  EXPECT_FALSE(broken->previous().has_value());
  EXPECT_NE(broken->ignored().find("not an outage marker"), std::string::npos);

  auto cleared = marker(R"({"open":false})");  // what a controller leaves when all is written
  EXPECT_FALSE(cleared->previous().has_value());
  EXPECT_EQ(cleared->ignored(), "");
  std::filesystem::remove_all(dir);
}

TEST(JournalAccount, LostTimeAndTheOpenStopRoundTrip) {
  const std::string dir = ::testing::TempDir() + "/faultline-journal-account";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/journal.json";
  Journal j(path);
  j.state().gen = 3;
  j.state().version = "v1";
  j.state().lost_s = {{"detection", 1.25}, {"diagnosis", 0.5},  {"failover", 7.125},
                      {"recompute", 3.0},  {"checkpoint", 0.1}, {"degraded", 2.0},
                      {"warmup", 0.75},    {"restore", 0},      {"waiting_for_machines", 4.5}};
  JournalState::Stop stop;
  stop.category = "rank_exit";
  stop.cause = "rank 3 on m1 exited: killed";
  stop.began_ns = 10'000'000'000;
  stop.detected_ns = 10'400'000'000;
  stop.restart_began_ns = 12'000'000'000;
  stop.waited_ns = 300'000'000;
  stop.waiting_since_ns = 12'500'000'000;
  j.state().stop = stop;
  std::string err;
  ASSERT_TRUE(j.save(&err)) << err;

  Journal back(path);
  ASSERT_TRUE(back.load(&err)) << err;
  ASSERT_TRUE(back.resumed());
  EXPECT_EQ(back.state().lost_s, j.state().lost_s);
  ASSERT_TRUE(back.state().stop.has_value());
  EXPECT_EQ(*back.state().stop, stop);

  // Saved again with the job running (no stop period): none comes back.
  back.state().stop.reset();
  ASSERT_TRUE(back.save(&err)) << err;
  Journal again(path);
  ASSERT_TRUE(again.load(&err)) << err;
  EXPECT_FALSE(again.state().stop.has_value());
  EXPECT_EQ(again.state().lost_s, j.state().lost_s);
  std::filesystem::remove_all(dir);
}

// A journal from before the account resumes with zeros and no stop period; a phase name this
// version does not know (a newer journal) is dropped; a negative or non-numeric value is a
// one-line error, never a crash.
TEST(JournalAccount, OlderNewerAndCorruptAccountsAreHandled) {
  const std::string base =
      R"({"origin_unix_ns":1,"gen":1,"version":"v1","good_version":"v1","running":true,)"
      R"("slots":[0,1],"standby":[2],"evicted":[],"ckpt_every":10,"first_step":0,)"
      R"("last_step":5,"next_action":4,"step_times":[0.1])";
  Journal old("old.json");
  std::string err;
  ASSERT_TRUE(old.parse(base + "}", &err)) << err;
  EXPECT_TRUE(old.state().lost_s.empty());
  EXPECT_FALSE(old.state().stop.has_value());

  Journal newer("newer.json");
  ASSERT_TRUE(newer.parse(base + R"(,"lost_s":{"failover":2.5,"teleport":9}})", &err)) << err;
  EXPECT_EQ(newer.state().lost_s, (std::map<std::string, double>{{"failover", 2.5}}));

  for (const std::string bad :
       {R"(,"lost_s":{"failover":-1}})", R"(,"lost_s":{"failover":"x"}})", R"(,"lost_s":[1]})",
        R"(,"stop":{"category":"rank_exit"}})",
        R"(,"stop":{"category":"c","cause":"","began_ns":5,"detected_ns":2,)"
        R"("restart_began_ns":-1,"waited_ns":0}})"}) {
    Journal j("bad.json");
    err.clear();
    EXPECT_FALSE(j.parse(base + bad, &err)) << bad;
    EXPECT_EQ(err.rfind("bad.json: (journal): expected a faultline controller journal", 0), 0u)
        << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
  }
}

// Issue 52 (live mode keeps its word): a restarted controller's /metrics started its incident
// counters and latency histograms from zero, and forgot which replicas were out of the quorum
// (it relaunched the whole job). Both are journaled now, and come back as they were saved.
TEST(JournalIncidents, CountersHistogramsAndTheReplicasOutRoundTrip) {
  const std::string dir = ::testing::TempDir() + "/faultline-journal-incidents";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/journal.json";
  Journal j(path);
  j.state().gen = 2;
  j.state().version = "v1";
  auto& in = j.state().incidents;
  in.opened = {{"rank_exit", 2}, {"replica_drop", 3}};
  in.closed = {{{"rank_exit", "recovered"}, 2}, {{"replica_drop", "recovered"}, 2}};
  in.detection = {{0.5, 1, 5}, {1, 0, 3, 1}, 9.25};
  in.recovery = {{0.5, 1, 5}, {0, 0, 2, 2}, 31.5};
  j.state().replicas_out = {
      {3, "replica 3 on m3 dropped out: hang", 5'000'000'000, 12'000'000'000}};
  std::string err;
  ASSERT_TRUE(j.save(&err)) << err;

  Journal back(path);
  ASSERT_TRUE(back.load(&err)) << err;
  EXPECT_EQ(back.state().incidents, in);
  EXPECT_EQ(back.state().replicas_out, j.state().replicas_out);
  std::filesystem::remove_all(dir);
}

// A journal without the new fields (every journal before them) loads with zeros and no replica
// out; a field of the wrong type or out of range is refused in one line naming it.
TEST(JournalIncidents, OlderJournalsLoadAndWrongFieldsAreRefusedInOneLine) {
  const std::string base =
      R"({"format":2,"origin_unix_ns":1,"gen":1,"version":"v1","good_version":"v1",)"
      R"("running":true,"slots":[0,1],"standby":[2],"evicted":[],"ckpt_every":10,)"
      R"("first_step":0,"last_step":5,"next_action":4,"step_times":[0.1])";
  Journal old("old.json");
  std::string err;
  ASSERT_TRUE(old.parse(base + "}", &err)) << err;
  EXPECT_EQ(old.state().incidents, JournalState::Incidents{});
  EXPECT_TRUE(old.state().replicas_out.empty());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"(,"incidents":{"opened":{"rank_exit":"2"}}})", "incidents.opened.rank_exit"},
      {R"(,"incidents":{"opened":{"rank_exit":-1}}})", "incidents.opened.rank_exit"},
      {R"(,"incidents":[]})", "incidents:"},
      {R"(,"incidents":{"closed":[["rank_exit",1]]}})", "incidents.closed"},
      {R"(,"incidents":{"detection":{"bounds":[1,0.5],"buckets":[0,0,0],"sum":0}}})",
       "incidents.detection.bounds"},
      {R"(,"incidents":{"recovery":{"bounds":[1],"buckets":[0],"sum":0}}})",
       "incidents.recovery.buckets"},
      {R"(,"replicas_out":{"replica":1}})", "replicas_out:"},
      {R"(,"replicas_out":[{"replica":"1","cause":"","began_ns":0,"detected_ns":0}]})",
       "replicas_out[0].replica: expected an integer, got a string \"1\""},
      {R"(,"replicas_out":[{"replica":1,"cause":"","began_ns":0.5,"detected_ns":0}]})",
       "replicas_out[0].began_ns"},
      {R"(,"replicas_out":[{"replica":1,"cause":"","began_ns":9,"detected_ns":2}]})",
       "replicas_out[0]: expected began_ns <= detected_ns"}};
  for (const auto& [field, names] : bad) {
    Journal j("bad.json");
    err.clear();
    EXPECT_FALSE(j.parse(base + field, &err)) << field;
    EXPECT_EQ(err.rfind("bad.json: (journal): expected a faultline controller journal", 0), 0u)
        << err;
    EXPECT_NE(err.find(names), std::string::npos) << "names " << names << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
  }
}

// The journal reads with the one strict reader (json/strict_object.h): a key this release
// does not write is refused naming the keys its object takes, a value of the wrong type is
// named with what it is, in one line; a truncated or corrupt journal is refused the same way
// (the controller then stops with that line rather than resume from a guess).
TEST(JournalFields, AnUnknownKeyOrAWrongTypeIsRefusedInOneLineNamingTheField) {
  const std::string base =
      R"({"format":2,"origin_unix_ns":1,"gen":1,"version":"v1","good_version":"v1",)"
      R"("running":true,"slots":[0,1],"standby":[2],"evicted":[],"ckpt_every":10,)"
      R"("first_step":0,"last_step":5,"next_action":4,"step_times":[0.1])";
  const std::string prefix = "bad.json: (journal): expected a faultline controller journal (";
  const auto error_of = [](const std::string& text) {
    Journal j("bad.json");
    std::string err;
    EXPECT_FALSE(j.parse(text, &err)) << text;
    EXPECT_FALSE(j.resumed());
    return err;
  };
  EXPECT_EQ(
      error_of(base + R"(,"gne":2})").rfind(prefix + "gne: unknown key; expected one of: ", 0), 0u)
      << error_of(base + R"(,"gne":2})");
  EXPECT_EQ(error_of(base + R"(,"stop":{"category":"c","cause":"","began_ns":1,)"
                            R"("detected_ns":2,"restart_began_ns":-1,"waited_ns":0,"x":1}})"),
            prefix +
                "stop.x: unknown key; expected one of: began_ns, category, cause, detected_ns, "
                "restart_began_ns, waited_ns, waiting_since_ns)");
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string text = base + "}";
    return text.replace(text.find(from), from.size(), to);
  };
  EXPECT_EQ(error_of(with(R"("running":true)", R"("running":"yes")")),
            prefix + "running: expected true or false, got a string \"yes\")");
  EXPECT_EQ(error_of(with("[0.1]", R"([0.1,"x"])")),
            prefix + "step_times[1]: expected a number, got a string \"x\")");
  EXPECT_EQ(error_of(with("[0,1]", "[0,1.5]")),
            prefix + "slots[1]: expected an integer, got a number 1.5)");
  // Truncated anywhere: refused in one line, never a crash.
  const std::string whole = base + "}";
  for (std::size_t n = 0; n < whole.size(); n += 7) {
    const std::string err = error_of(whole.substr(0, n));
    EXPECT_EQ(err.rfind(prefix, 0), 0u) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

// Issue 52, broken item 2: a journal written by the previous release (format 1: a monotonic
// time origin, no last_t_ns) read after a reboot restarted run time at 0 (log time went back
// from 861 s to 1 s; live status showed ETTR 5,791%). It is migrated from the event log now:
// run time goes on from the log's last record plus the wall time since the log was written;
// without a log it is refused in one line, as is a journal of a newer format. Log time never
// goes back, even when the journal was saved before the log's last records.
TEST(JournalFormat, AnEarlierReleasesJournalIsMigratedFromTheLogOrRefused) {
  const std::string dir = ::testing::TempDir() + "/faultline-journal-format";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string rest =
      R"("gen":3,"version":"v1","good_version":"v1","running":true,)"
      R"("slots":[0,1],"standby":[2],"evicted":[],"ckpt_every":10,"first_step":0,)"
      R"("last_step":5,"next_action":4,"step_times":[0.1]})";
  // The previous release's journal, whose boot had been up 12 hours.
  const std::string v1 = R"({"origin_ns":43200000000000,)" + rest;
  const std::string log = dir + "/events.jsonl";
  std::ofstream(log) << R"({"t_s":0,"kind":"header"})"
                     << "\n"
                     << R"({"t_s":861.25,"kind":"note","text":"last before the reboot"})"
                     << "\n"
                     << R"({"t_s":862,"kind":"no)";  // torn by the crash
  std::filesystem::last_write_time(
      log, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(100));
  const std::optional<EventLogEnd> end = event_log_end(log);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->t_ns, 861250000000);

  Journal j(dir + "/journal.json");
  std::string err;
  ASSERT_TRUE(j.parse(v1, &err)) << err;
  EXPECT_EQ(j.format_read(), 1);
  ASSERT_TRUE(j.resume_after(end, &err)) << err;
  // Run time now: the log's 861.25 s plus the 100 s since it was written.
  const double now_s = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count() -
                                           j.state().origin_unix_ns) /
                       1e9;
  EXPECT_NEAR(now_s, 961.25, 2);
  EXPECT_EQ(j.state().last_t_ns, 861250000000);
  ASSERT_TRUE(j.save(&err)) << err;
  Journal back(dir + "/journal.json");
  ASSERT_TRUE(back.load(&err)) << err;
  EXPECT_EQ(back.format_read(), kJournalFormat) << "saved in this release's format";
  EXPECT_EQ(back.state().origin_unix_ns, j.state().origin_unix_ns);

  // Without a log to take the time from: refused in one line naming the file and field.
  Journal alone(dir + "/alone.json");
  ASSERT_TRUE(alone.parse(v1, &err)) << err;
  EXPECT_FALSE(alone.resume_after(std::nullopt, &err));
  EXPECT_EQ(
      err.rfind(dir + "/alone.json: origin_ns: expected origin_unix_ns (journal format 2)", 0), 0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;

  // Format 1 said as such reads as format 1.
  Journal said(dir + "/said.json");
  ASSERT_TRUE(said.parse(R"({"format":1,)" + v1.substr(1), &err)) << err;
  EXPECT_EQ(said.format_read(), 1);

  // A newer format: refused in one line.
  Journal newer(dir + "/newer.json");
  EXPECT_FALSE(newer.parse(R"({"format":3,"origin_unix_ns":1,)" + rest, &err));
  EXPECT_EQ(err.rfind(dir + "/newer.json: format: expected a journal of format 1 or 2", 0), 0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;

  // This release's journal saved at 500 s while the log went on to 861.25 s: time resumes
  // from the log's end, not the journal's.
  Journal current(dir + "/current.json");
  ASSERT_TRUE(
      current.parse(R"({"format":2,"origin_unix_ns":1,"last_t_ns":500000000000,)" + rest, &err))
      << err;
  ASSERT_TRUE(current.resume_after(end, &err)) << err;
  EXPECT_EQ(current.state().origin_unix_ns, 1) << "the origin is kept";
  EXPECT_EQ(current.state().last_t_ns, 861250000000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace faultline::live
