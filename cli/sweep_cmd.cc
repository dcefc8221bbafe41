// `faultline sim sweep`: what-if studies over scenario fields, on one machine (forked
// processes) or over MPI ranks (faultline-mpi, see sweep_mpi.cc). The engine is
// sim/sweep.h; `sim tune` (tune_cmd.cc) searches with the same engine.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/sweep_plan.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress_bar.h"
#include "cli/sweep_common.h"
#include "policies/builtin.h"
#include "policies/module.h"
#include "sim/sweep.h"

namespace faultline::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kSweepAbout =
    R"(Simulates every point of a parameter grid over the scenario, each point with the same
replicas and seeds (common random numbers: same scenario seed and replica index, same
fault arrivals at every point), so differences between points are not noise. Writes a
tidy CSV (one row per point: the parameters, replicas, then mean, lo and hi of the 95%
CI of every metric) and JSON. Resumable: points already computed under --out DIR are
not computed again, and an interrupted sweep keeps its finished work items. Points are
keyed by their inputs (scenario file bytes, --set, --seed, --replicas, the point's
values), not by the simulator's version: use a fresh DIR after changing the simulator.
)";

constexpr const char* kSweepEpilog =
    R"(metrics (columns METRIC_mean, METRIC_lo, METRIC_hi): ettr; productive_s, detection_s,
diagnosis_s, failover_s, restore_s, recompute_s, checkpoint_s, degraded_s,
warmup_s, waiting_for_machines_s, unproductive_s (seconds per replica); incidents, faults_injected, evictions_true,
evictions_false, checkpoints (per replica); gpu_hours_lost (per replica);
evictions_false_positive, standby_exhaustions, remote_checkpoint_fallbacks (per replica);
with the scenario's costs also cost, cost_per_trained_day and goodput_per_cost (per
replica). A job of fixed work (job.work_days) adds time_to_train_days_mean|lo|hi,
_p50|_p90|_p99 with their bootstrap CIs (_lo, _hi; empty where a censored replica reaches
them) and time_to_train_censored. sweep.json has, per point, also sim compare's fields of
a stack (ettr, time_to_train, resolved_by_per_replica, evictions, max_fruitless_rounds, ...).

example:
  faultline sim sweep scenarios/byterobust-dense-9600.json --jobs 2 --out sweep-ckpt \
      --grid policy.params.standby_pool=0,2,8,-1 \
      --grid policy.params.checkpoint=peer,memory,remote

internal (used by faultline-mpi): --plan prints the pending work of --out DIR as JSON;
--work P:A:B[,P:A:B...] computes replicas [A, B) of point P into DIR without aggregating.)";

// Items "P:A:B,P:A:B" of --work.
bool parse_items(const std::string& s, std::vector<sim::WorkItem>* out) {
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    sim::WorkItem it;
    char c1 = 0, c2 = 0;
    std::istringstream is(part);
    if (!(is >> it.point >> c1 >> it.first >> c2 >> it.last) || c1 != ':' || c2 != ':' || !is.eof())
      return false;
    out->push_back(it);
  }
  return !out->empty();
}

// What the command line of sim sweep asks for.
struct SweepArgs : CommonArgs {
  std::vector<analysis::Axis> axes;
  int zip_axis = -1;  // the axis of the --zip fields; -1: none yet
  bool mpi = false, plan_only = false;
  std::string work;      // --work items
  std::string baseline;  // --baseline KEY=VALUE[+...]
};

// Adds --grid KEY=V1,... as an axis of its own, or (`zip`) --zip KEY=A,... to the one axis
// of all --zip fields (the first --zip makes it). Returns "", or the usage error.
std::string add_axis(bool zip, const std::string& arg, SweepArgs& c) {
  try {
    auto [key, values] = analysis::parse_axis_arg(arg, zip ? "--zip" : "--grid");
    if (zip && c.zip_axis >= 0) {
      analysis::Axis& ax = c.axes[c.zip_axis];
      if (values.size() != ax.values.size())
        return "--zip " + key + ": " + std::to_string(values.size()) + " values, but " +
               ax.keys[0] + " has " + std::to_string(ax.values.size());
      ax.keys.push_back(key);
      for (size_t k = 0; k < values.size(); ++k) ax.values[k].push_back(values[k]);
      return "";
    }
    if (zip) c.zip_axis = static_cast<int>(c.axes.size());
    analysis::Axis ax;
    ax.keys = {key};
    for (auto& v : values) ax.values.push_back({v});
    c.axes.push_back(std::move(ax));
  } catch (const analysis::PlanError& e) {
    return e.what();
  }
  return "";
}

// sim sweep's options beside the shared ones (flags.h), applied into `c`.
FlagTable sweep_table(SweepArgs& c) {
  auto t = command_table("faultline sim sweep SCENARIO.json [options]", kSweepAbout);
  t.add({"--grid", "KEY=V1,V2,...", "",
         "one axis: a scenario field (a --set path) and its values (JSON\n"
         "or strings; commas inside [..], {..} or \"..\" do not split);\n"
         "repeatable, the cartesian product of all axes is swept, the\n"
         "first axis slowest",
         [&c](const std::string& v) { return add_axis(false, v, c); }});
  t.add({"--zip", "KEY=A,B,...", "KEY=V1,V2,...",
         "fields that move together (all --zip lists of one length form\n"
         "one axis); repeatable",
         [&c](const std::string& v) { return add_axis(true, v, c); }});
  add_sim_flags(t, c, {"table", "csv", "json"}, "what goes to stdout (default: table)",
                "store points, sweep.csv and sweep.json in DIR; a rerun with the\n"
                "same DIR resumes (default: a temporary directory, removed)");
  t.add({"--baseline", "KEY=VALUE[+KEY=VALUE...]", "KEY=VALUE[+KEY=VALUE...], a point of the grid",
         "a point of the grid, by its values (KEY: the swept field or its\n"
         "last part, e.g. standby_pool=0+checkpoint_interval_s=1800): every\n"
         "point gets its paired difference to it (the same replicas and\n"
         "seeds) for every metric, mean and 95% CI, and for ETTR the unpaired\n"
         "CI and the shares of replicas won, tied and lost, as sim compare\n"
         "gives them (columns METRIC_diff_mean|lo|hi, ettr_diff_unpaired_lo|hi,\n"
         "wins, ties, losses; vs_baseline in sweep.json)",
         [&c](const std::string& v) {
           if (v.empty())
             return std::string(
                 "--baseline: expected KEY=VALUE[+KEY=VALUE...], a point of the grid");
           c.baseline = v;
           return std::string();
         }});
  t.toggle("--mpi",
           "run under mpirun: spread (point, replica) pairs over the ranks\n"
           "and gather on rank 0 (runs faultline-mpi); output byte-identical\n"
           "to a one-machine run",
           &c.mpi);
  t.toggle("--plan", "internal (faultline-mpi): print the pending work of --out DIR as JSON",
           &c.plan_only);
  t.add({"--work", "P:A:B[,P:A:B...]", "",
         "internal (faultline-mpi): compute replicas [A, B) of point P into DIR\n"
         "without aggregating",
         [&c](const std::string& v) {
           c.work = v;
           return std::string();
         }});
  add_sim_switches(t, c);
  t.positional(&c.scenario);
  t.epilog(kSweepEpilog);
  return t;
}

// Parses the command line of sim sweep into `c`. Returns -1 to go on, else the exit code
// (0 after --help, 2 after a usage error).
int parse_sweep_args(const std::vector<std::string>& args, SweepArgs& c) {
  if (const int rc = sweep_table(c).parse(args); rc >= 0) return rc;
  if (c.scenario.empty()) return usage_error("sim sweep: expected SCENARIO.json");
  if ((c.plan_only || !c.work.empty()) && c.out_dir.empty())
    return usage_error("--plan and --work need --out DIR");
  return -1;
}

// --mpi: replaces this process with faultline-mpi, which runs this binary for every piece
// of work (MPI lives in its own executable that does not link SimGrid: libsimgrid exports
// MPI symbols of its own). Returns only when it cannot: exit code 2.
int exec_mpi(const std::vector<std::string>& args) {
  const std::string driver = exe_dir() + "/faultline-mpi";
  std::vector<std::string> rest = args;
  bool mpi = false;
  FlagTable("faultline sim sweep", "").toggle("--mpi", "", &mpi).extract(&rest);
  std::vector<std::string> argv{driver, self_exe(), "sim", "sweep"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(driver.c_str(), cargv.data());
  std::fprintf(stderr,
               "faultline: --mpi: cannot run %s: %s (it is built when CMake finds MPI: cmake "
               "--build BUILD_DIR --target faultline-mpi)\n",
               driver.c_str(), std::strerror(errno));
  return 2;
}

// --plan: prints the pending replica ranges of every point as one line of JSON.
void print_plan(const std::vector<sim::PlannedPoint>& points, const sim::SweepStore& store) {
  ordered_json plan;
  plan["points"] = ordered_json::array();
  for (size_t i = 0; i < points.size(); ++i) {
    ordered_json pending = ordered_json::array();
    if (!store.done(points[i]))
      for (const auto& [a, b] : store.pending(points[i])) pending.push_back({a, b});
    plan["points"].push_back({{"index", i},
                              {"id", points[i].point.id},
                              {"replicas", points[i].scenario.replicas},
                              {"pending", pending}});
  }
  std::cout << plan.dump() << "\n";
}

// --work: computes the items' replicas into the store without aggregating. Returns 0, or 2
// after a usage error; throws std::runtime_error when a child fails.
int run_work(const SweepArgs& c, const std::vector<sim::PlannedPoint>& points,
             const Registry& registry, const sim::SweepStore& store) {
  std::vector<sim::WorkItem> items;
  if (!parse_items(c.work, &items)) return usage_error("--work: expected P:A:B[,P:A:B...]");
  for (const auto& it : items) {
    if (it.point < 0 || it.point >= static_cast<int>(points.size()) || it.first < 0 ||
        it.first >= it.last || it.last > points[it.point].scenario.replicas)
      return usage_error("--work: item " + std::to_string(it.point) + ":" +
                         std::to_string(it.first) + ":" + std::to_string(it.last) +
                         " is outside the plan");
    store.describe(points[it.point], c.scenario);
  }
  // Split to use this machine's --jobs; a replica's result does not depend on it.
  const std::vector<sim::WorkItem> split = sim::split_items(items, static_cast<int>(c.jobs));
  sim::ExecOptions opt;
  opt.jobs = static_cast<int>(c.jobs);
  sim::execute(points, split, registry, store, opt);
  return 0;
}

// Runs what is pending of every point, writes sweep.csv and sweep.json into --out DIR
// (`keep`: one was given) and prints the --format. Throws std::runtime_error on failure.
void run_sweep(const SweepArgs& c, const sim::SweepSpec& spec,
               const std::vector<sim::PlannedPoint>& points, const Registry& registry,
               const sim::SweepStore& store, bool keep) {
  ProgressBar bar(!c.quiet, "", c.progress);
  sim::ExecOptions opt;
  opt.jobs = static_cast<int>(c.jobs);
  opt.on_progress = [&](long long d, long long t) { bar(d, t); };
  opt.on_points = [&](long long d, long long t) { bar.set_points(d, t); };
  const std::vector<json> results = sim::run_points(points, registry, store, opt);
  const std::string csv = sim::sweep_csv(spec, points, results);
  const std::string js = sim::sweep_json(spec, points, results).dump(2) + "\n";
  if (keep) {
    for (const auto& [name, text] : {std::pair{"sweep.csv", csv}, std::pair{"sweep.json", js}}) {
      std::ofstream f(fs::path(c.out_dir) / name, std::ios::binary | std::ios::trunc);
      f << text;
      if (!f) throw std::runtime_error(c.out_dir + "/" + name + ": cannot write");
    }
  }
  if (c.format == "csv")
    std::cout << csv;
  else if (c.format == "json")
    std::cout << js;
  else
    std::cout << sim::sweep_table(spec, points, results);
}

}  // namespace

int sim_sweep(const std::vector<std::string>& args) {
  SweepArgs c;
  if (const int rc = parse_sweep_args(args, c); rc >= 0) return rc;
  if (c.mpi) return exec_mpi(args);

  Registry registry = policies::builtin_registry();
  sim::SweepSpec spec = make_spec(c);
  spec.axes = c.axes;
  std::vector<sim::PlannedPoint> points;
  try {
    points = sim::make_plan(spec, registry);
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  } catch (const analysis::PlanError& e) {
    return usage_error(e.what());
  }
  if (!c.baseline.empty()) {
    try {
      spec.baseline = sim::find_point(spec, points, c.baseline);
    } catch (const analysis::PlanError& e) {
      return usage_error(e.what());
    }
  }

  return run_reporting_errors([&] {
    std::unique_ptr<TempDir> tmp;
    if (c.out_dir.empty()) tmp = std::make_unique<TempDir>();
    sim::SweepStore store(tmp ? tmp->path() : c.out_dir);
    if (c.plan_only) {
      print_plan(points, store);
      return 0;
    }
    if (!c.work.empty()) return run_work(c, points, registry, store);
    run_sweep(c, spec, points, registry, store, /*keep=*/!tmp);
    return 0;
  });
}

}  // namespace faultline::cli
