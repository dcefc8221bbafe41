// `faultline sim replay` of silent data corruptions: seen in the step samples and located by
// replay, or failing the bit-wise test from the first step, phase by phase as they ran live.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/sim/replay_log.h"
#include "tests/support/cli.h"

namespace faultline::testing {
namespace {

using namespace replay_log;

// The phases of a live run with two silent data corruptions, each seen only in the step
// samples (the job reports a NaN loss and trains on; it has no NaN check that exits),
// each located by replay and replaced from a pool of one standby, which the machine
// taken out rejoins 30 s after its eviction (its repair check passed). Every phase has a
// known length, so the replayed ETTR is a sum written out here. Replayed as an exit at
// once, or with the pool refilled after the scheduler's large-cluster default (120 s),
// the replay took other paths and other times (59.8% for the demo's 81.4%).
TEST(SimReplay, NanSeenInStepSamplesAndPoolReturnsReplayPhaseByPhase) {
  constexpr double kBitwise = 2, kReplay = 3, kWake = 0.5, kBack = 30;
  LogFile log("sdc-phases");
  begin_every_step_run(log, {{"standby_pool", 1}}, kStep, kInit);
  int id = 3;
  double t0 = kInit;  // the job trains from here
  long step = 0;
  std::vector<double> restarts;
  // A corruption on `machine` (slot `slot`) at `at`. Returns when the job trains again.
  // `bitwise`: the policy runs the bit-wise test first (not for a NaN soon after the last
  // round's restart: it goes straight to replay).
  auto sdc = [&](double at, int machine, int slot, bool bitwise) {
    for (double t = t0 + 1; t <= at + 1e-9; t += 1) log.add(progress(t, ++step));
    // after=3: the corruption escapes the one-step bit-wise test (after=0 would fail it).
    log.add(fault(at, machine, slot, "sdc", "after=3", true));
    // The NaN is in the next step's sample: the policy stops the job, bit-wise (passes),
    // replay (two phases), evicts and takes the standby, restarts from the last step.
    double t = at + kStep;
    log.add({{"t_s", t}, {"kind", "note"}, {"text", "detected: metric anomaly loss NaN"}});
    log.add(action(t, id, {{"type", "StopJob"}, {"reason", "metric anomaly: loss"}}));
    log.add(outcome(t, id++, 0.01));
    if (bitwise) {
      log.add(action(t, id,
                     {{"type", "RunProbe"},
                      {"test", "bitwise"},
                      {"machines", {0, 1, 2, 3}},
                      {"deadline_s", 60.0},
                      {"reason", "NaN"}}));
      log.add(outcome(t + kBitwise, id++, kBitwise));
      t += kBitwise;
    }
    for (int phase = 0; phase < 2; ++phase) {
      log.add(action(t, id,
                     {{"type", "RunReplay"}, {"groups", {{0, 1}, {2, 3}}}, {"reason", "replay"}}));
      log.add(outcome(t + kReplay, id++, kReplay));
      t += kReplay;
    }
    const double evicted = t;
    log.add(action(t, id,
                   {{"type", "EvictMachines"},
                    {"machines", {machine}},
                    {"reason", "dual-phase replay located it"},
                    {"mechanism", "replay"}}));
    log.add(outcome(t, id++, 0.0));
    log.add(action(t, id,
                   {{"type", "AcquireMachines"},
                    {"mode", "standby"},
                    {"slots", {slot}},
                    {"reason", "dual-phase replay located it"},
                    {"mechanism", "replay"}}));
    log.add(outcome(t + kWake, id++, kWake));
    t += kWake;
    log.add(action(
        t, id, {{"type", "StartJob"}, {"reason", "replacements ready"}, {"mechanism", "none"}}));
    log.add(outcome(t + kInit, id++, kInit));
    t += kInit;
    log.add(progress(t, step, true));
    log.add(
        {{"t_s", evicted + kBack},
         {"kind", "note"},
         {"text", "m" + std::to_string(machine) +
                      " passed its repair check (gpu_diag, bit-wise); back in the standby pool"}});
    t0 = t;
    return t;
  };
  const double back1 = sdc(200.5, 1, 1, true);
  const double back2 = sdc(301.3, 2, 2, false);
  for (double t = t0 + 1; t <= kHorizon + 1e-9; t += 1) log.add(progress(t, ++step));
  log.add(summary(kHorizon, step));
  // Each incident: NaN sample 1 s, bit-wise 2 s (the first only), two replay phases 6 s,
  // standby 0.5 s, start 5 s; the part of the step under way at the fault is lost (the job
  // saves every step). The second eviction, 100 s after the first, finds the pool refilled.
  EXPECT_DOUBLE_EQ(back1, 215.0);
  EXPECT_NEAR(back2, 313.8, 1e-9);
  const double kept = (200 - kInit) + (301 - back1) + (kHorizon - back2);  // 195 + 86 + 286.2
  EXPECT_NEAR(kept, 567.2, 1e-9);
  EXPECT_EQ(step, 567);  // the live count: whole steps

  const std::string dir = log.path() + ".out";
  const json r = replay({log.write(), "--replicas", "2", "--out", dir});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("replay", 0.0), 2.0);
  EXPECT_DOUBLE_EQ(r["sim"]["standby_exhaustions_per_replica"].get<double>(), 0);
  EXPECT_NEAR(r["calibration"]["cluster.scheduler.reschedule_base_s"]["value"].get<double>(),
              kBack - kBitwise, 1e-9);  // a return is the pool refill plus its self-check
  EXPECT_NEAR(r["sim"]["ettr"]["mean"].get<double>(), kept / kHorizon, 1e-6);
  EXPECT_NEAR(r["sim_ettr"]["mean"].get<double>(), kept / kHorizon, 1e-6);
  EXPECT_NEAR(r["live"]["ettr"].get<double>(), 567.0 / kHorizon, 1e-12);
  EXPECT_NEAR(r["ettr_diff_pts"].get<double>(), 0, 0.05);
}

// `live inject --fault sdc` without a detail is `sdc after=0`: the corruption starts at the
// first step of every process on the machine, the one-step bit-wise test's too, which fails
// there, and the policy evicts the machine at once (stop_time_eviction). The replay gave every
// sdc a bit-wise recall of 0 and localized it by replay instead: the decisions parted.
TEST(SimReplay, AnSdcFromTheFirstStepFailsTheBitwiseTestAsItDidLive) {
  LogFile log("sdc-after-0");
  json h = header("byterobust");
  h["params"] = {{"standby_pool", 1}};
  log.add(h);
  initial_start(log);
  long step = 0;
  for (double t = kInit + 1; t <= 200 + 1e-9; t += 1) log.add(progress(t, ++step));
  log.add(fault(200.5, 1, 1, "sdc", "", true));
  double t = 200.5 + kStep;
  log.add({{"t_s", t}, {"kind", "note"}, {"text", "detected: metric anomaly grad_norm x1e30"}});
  log.add(action(t, 2, {{"type", "StopJob"}, {"reason", "metric anomaly: grad_norm"}}));
  log.add(outcome(t, 2, 0.01));
  log.add(action(t, 3,
                 {{"type", "RunProbe"},
                  {"test", "bitwise"},
                  {"machines", {0, 1, 2, 3}},
                  {"deadline_s", 60.0},
                  {"reason", "NaN: bit-wise alignment on every machine"}}));
  log.add(outcome(t + 2, 3, 2));
  t += 2;
  log.add({{"t_s", t},
           {"kind", "event"},
           {"event",
            {{"type", "ProbeResult"},
             {"action", 3},
             {"test", "bitwise"},
             {"failed", {1}},
             {"timed_out", false}}}});
  log.add(action(t, 4,
                 {{"type", "EvictMachines"},
                  {"machines", {1}},
                  {"reason", "failed bitwise"},
                  {"mechanism", "stop_time_eviction"}}));
  log.add(outcome(t, 4, 0.0));
  log.add(action(t, 5,
                 {{"type", "AcquireMachines"},
                  {"mode", "standby"},
                  {"slots", {1}},
                  {"reason", "failed bitwise"},
                  {"mechanism", "stop_time_eviction"}}));
  log.add(outcome(t + 0.5, 5, 0.5));
  t += 0.5;
  log.add(action(t, 6,
                 {{"type", "StartJob"}, {"reason", "replacements ready"}, {"mechanism", "none"}}));
  log.add(outcome(t + kInit, 6, kInit));
  t += kInit;
  step = 180;  // the last checkpoint before the corruption
  log.add(progress(t, step, true));
  for (double u = t + 1; u <= kHorizon + 1e-9; u += 1) log.add(progress(u, ++step));
  log.add(summary(kHorizon, step));
  const json r = replay({log.write(), "--replicas", "1"});
  ASSERT_TRUE(r.contains("sim"));
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("stop_time_eviction", 0.0), 1.0)
      << r["sim"]["resolved_by_per_replica"].dump();
  EXPECT_DOUBLE_EQ(r["sim"]["resolved_by_per_replica"].value("replay", 0.0), 0.0);
  // Every live decision taken (the log leaves out the live set-up, which the replay adds).
  EXPECT_EQ(r["decisions"]["matched"], r["decisions"]["live"]) << r["decisions"].dump(2);
}

}  // namespace
}  // namespace faultline::testing
