// `faultline sim replay`'s tests' event logs (tests/sim/replay_*_test.cc): a live run as the
// tests write it, the records a controller logs, the closed form of the progress a job keeps,
// and the replay run through the CLI.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/cli.h"

namespace faultline::testing::replay_log {

using nlohmann::json;

// A live run as the tests write it: 4 machines x 1 GPU, dp 4, steps of 1 s, a checkpoint
// after every 30th step that stalls the next step by 3 s, process start 5 s.
constexpr double kStep = 1.0, kStall = 3.0, kInit = 5.0, kHorizon = 600.0;
constexpr int kEvery = 30;

class LogFile {
 public:
  explicit LogFile(const std::string& tag)
      : path_((std::filesystem::temp_directory_path() /
               ("faultline-replay-" + std::to_string(::getpid()) + "-" + tag + ".jsonl"))
                  .string()) {}
  ~LogFile() { std::filesystem::remove(path_); }
  void add(json record) { lines_.push_back(record.dump()); }
  void raw(const std::string& line) { lines_.push_back(line); }
  // The lines in time order, as a controller writes them (the reader refuses a log whose time
  // goes backwards): a stable sort by t_s; a line without one keeps its place after the line
  // before it.
  const std::string& write(bool trailing_newline = true) {
    std::vector<std::pair<double, std::size_t>> order;
    double t = 0;
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      const json j = json::parse(lines_[i], nullptr, false);
      if (j.is_object() && j.contains("t_s") && j["t_s"].is_number()) t = j["t_s"].get<double>();
      order.emplace_back(t, i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> sorted;
    for (const auto& [when, i] : order) sorted.push_back(lines_[i]);
    lines_ = std::move(sorted);
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    for (std::size_t i = 0; i < lines_.size(); ++i)
      f << lines_[i] << (i + 1 < lines_.size() || trailing_newline ? "\n" : "");
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> lines_;
};

inline json header(const std::string& stack = "requeue") {
  return {{"t_s", 0},
          {"kind", "header"},
          {"format", "faultline-eventlog"},
          {"version", 1},
          {"stack", stack},
          {"params", {{"checkpoint_interval_s", 30}, {"checkpoint_write_s", 0.5}}},
          {"seed", 3},
          {"cluster",
           {{"machines", 4},
            {"gpus_per_machine", 1},
            {"tp", 1},
            {"pp", 1},
            {"dp", 4},
            {"standby_machines", 1}}},
          {"nominal_step_time_s", kStep},
          {"checkpoint_every_steps", kEvery},
          {"config_file", "live.json"}};
}

inline json action(double t, int id, json a) {
  return {{"t_s", t}, {"kind", "action"}, {"id", id}, {"action", a}};
}
inline json outcome(double t, int id, double dur) {
  return {{"t_s", t},   {"kind", "outcome"}, {"id", id},
          {"ok", true}, {"detail", ""},      {"duration_s", dur}};
}
inline json fault(double t, int machine, int slot, const std::string& kind,
                  const std::string& detail = "", std::optional<bool> persistent = std::nullopt) {
  json f = {{"t_s", t},     {"kind", "fault"}, {"machine", machine},
            {"slot", slot}, {"fault", kind},   {"detail", detail}};
  if (persistent) f["persistent"] = *persistent;
  return f;
}
inline json process_exit(double t, int machine, int code, const std::string& signature) {
  return {{"t_s", t},
          {"kind", "event"},
          {"event",
           {{"type", "ProcessExit"},
            {"machine", machine},
            {"exit_code", code},
            {"signature", signature}}}};
}
inline json progress(double t, long step, bool restart = false) {
  return {{"t_s", t}, {"kind", "progress"}, {"step", step}, {"loss", 2.0}, {"restart", restart}};
}
inline json summary(double elapsed, long final_step, long first_step = 0, double step = kStep) {
  const double productive = (final_step - first_step) * step;
  return {{"t_s", elapsed},
          {"kind", "summary"},
          {"elapsed_s", elapsed},
          {"final_step", final_step},
          {"first_step", first_step},
          {"productive_s", productive},
          {"ettr", productive / elapsed},
          {"step_time_s", step}};
}

// The opening of a byterobust run that checkpoints every step in memory with a peer copy:
// header (with the stack's recorded `params` and steps of `step` s), plan, the first start
// (done at `init`).
inline void begin_every_step_run(LogFile& log, json params, double step, double init) {
  json h = header("byterobust");
  h["params"] = std::move(params);
  h["nominal_step_time_s"] = step;
  h["checkpoint_every_steps"] = 1;
  log.add(h);
  log.add(action(0, 1,
                 {{"type", "SetCheckpointPlan"},
                  {"interval_s", 0.0},
                  {"blocking_s", 0.02},
                  {"tier", "memory+peer"},
                  {"reason", "every step"},
                  {"remote_interval_s", 3600.0}}));
  log.add(action(0, 2, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(init, 2, init));
}

// A live run's first start: the initial StartJob (action 1) at 0 s, done at `init`.
inline void initial_start(LogFile& log, double init = kInit) {
  log.add(action(0, 1, {{"type", "StartJob"}, {"reason", "initial start"}, {"mechanism", "none"}}));
  log.add(outcome(init, 1, init));
}

// The live timeline of a job that trains `from`..`to` (wall s) restarting from
// `committed` steps: progress samples, one per step, a checkpoint every kEvery steps
// stalling the next step. Returns the last step completed by `to`, and the committed
// (checkpointed) step at `to`.
inline std::pair<long, long> run_steps(LogFile& log, double from, double to, long committed) {
  double t = from;
  long step = committed;
  bool first = true;
  while (true) {
    const double dt = kStep + (step > committed && step % kEvery == 0 ? kStall : 0);
    if (t + dt > to + 1e-9) break;
    t += dt;
    ++step;
    log.add(progress(t, step, first && committed > 0));
    first = false;
  }
  long ckpt = committed;
  for (long s = committed + 1; s <= step; ++s)
    if (s % kEvery == 0 && s < step) ckpt = s;  // saved once the stall after it is done
  return {step, ckpt};
}

// Training time kept by a job that alternates `tau` of training and `delta` of
// checkpoint stall, from wall time `from` to `to`, starting from a fresh segment:
// closed form, with the progress of the last, partial segment kept.
struct Kept {
  double committed = 0;  // in complete checkpoints
  double pending = 0;    // since the last one
};
inline Kept train(double from, double to, double tau, double delta) {
  const double wall = to - from;
  const double cycles = std::floor(wall / (tau + delta));
  const double rest = wall - cycles * (tau + delta);
  Kept k;
  k.committed = cycles * tau + (rest >= tau + delta ? tau : 0);
  k.pending = std::min(rest, tau);
  if (rest >= tau && rest < tau + delta) k.pending = tau;  // in the stall: not yet committed
  return k;
}

inline json replay(std::vector<std::string> args) {
  args.insert(args.begin(), {"sim", "replay"});
  args.push_back("--format");
  args.push_back("json");
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return json::object();
  return json::parse(r.out);
}

// A run that never restarted (its first start done at `init`, then training to kHorizon),
// replayed with one replica; `tag` names its log.
inline json replay_one_start(const std::string& tag, double init) {
  LogFile log(tag);
  log.add(header());
  initial_start(log, init);
  const long last = run_steps(log, init, kHorizon, 0).first;
  log.add(summary(kHorizon, last));
  return replay({log.write(), "--replicas", "1"});
}

// A one-replica replay of `log` with its decisions written (--decisions): the result and the
// lines of decisions.log.
struct Decisions {
  json result;
  std::vector<std::string> lines;
};
inline Decisions replay_decisions(LogFile& log) {
  const std::string dir = log.path() + ".out";
  Decisions d{replay({log.write(), "--replicas", "1", "--out", dir, "--decisions"}), {}};
  std::ifstream f(dir + "/decisions.log");
  for (std::string line; std::getline(f, line);) d.lines.push_back(line);
  std::filesystem::remove_all(dir);
  return d;
}
// The first decision line that contains `text`; empty when there is none.
inline std::string first_line(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines)
    if (line.find(text) != std::string::npos) return line;
  return "";
}
// The time (s) a decision line is at (its "t="); -1 for a line without one.
inline double time_of(const std::string& line) {
  const auto at = line.find("t=");
  return at == std::string::npos ? -1 : std::stod(line.substr(at + 2));
}

}  // namespace faultline::testing::replay_log
