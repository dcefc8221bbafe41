// `faultline`'s commands (main.cc is the program; the faultline._core Python extension module
// runs them too). Subcommands dispatch to the folder that owns them; each has --help. Exit
// codes: 0 success, 1 runtime failure, 2 bad input or usage.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/analysis_commands.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress_bar.h"
#include "cli/trace_cmd.h"
#include "plugins/loader.h"
#include "policies/builtin.h"
#include "policies/module.h"
#include "scenarios/reference.h"
#include "scenarios/scenario.h"
#include "sim/report.h"
#include "sim/runner.h"

namespace {

using faultline::Registry;
namespace sc = faultline::scenarios;
namespace sim = faultline::sim;
using faultline::cli::usage_error;

constexpr const char* kTopHelp =
    R"(faultline - fault-tolerance policy for large GPU training clusters

usage: faultline <command> [options]

commands:
  sim run SCENARIO.json     simulate a scenario's replicas and print ETTR and its breakdown
  sim compare SCENARIO.json several policy stacks on the same faults, side by side
  sim sweep SCENARIO.json   parameter sweep (grid/zip) with common random numbers; CSV, JSON;
                            resumable; --mpi under mpirun
  sim tune SCENARIO.json    best value of one numeric parameter (coarse grid, refinement)
  sim replay EVENTLOG       re-run a live run's recorded faults under a policy stack; live
                            vs simulated ETTR
  analyze daly|young|meta-ettr|standby|check
                            analytic ETTR and standby models; check against the simulator
  report DIR... -o FILE     HTML report with figures of run, sweep and incident results
  policies                  list the policy stacks and the modules they compose (detection,
                            localization, recovery, checkpoint), plugins' included
  trace stats|fit|convert|mix|generate
                            fault traces: statistics, fits, fault models, format conversion
  probe ...                 GPU health probes (runs faultline-probe)
  live run|inject|update|status|stop CONFIG
                            live mode: the controller runs a policy stack against a real job
  agent CONFIG --name NAME  live mode: the per-machine agent (one per machine)
  version                   print the version

Every command takes --plugin FILE (repeatable; or FAULTLINE_PLUGINS=FILE:FILE): policy
modules built outside this tree (policies/plugin.h), loaded before anything else.

Run 'faultline <command> --help' for the options of a command.
)";

constexpr const char* kSimRunHelp = R"(usage: faultline sim run SCENARIO.json [options]

Simulates the scenario's training job under its fault model and policy stack, one
replica per independent fault history, and prints ETTR with a 95% confidence interval,
the unproductive-time breakdown and incidents per category.

options:
  --replicas N        number of replicas (default: the scenario's "replicas")
  --jobs J            replicas run in parallel as forked processes (default: 1)
  --seed S            scenario seed (default: the scenario's "seed")
  --set PATH=VALUE    override a scenario field before validation; repeatable.
                      PATH is dotted JSON, e.g. job.pp=4, cluster.machines=2400,
                      policy.params.checkpoint=remote,
                      faults.categories.cuda_error.rate_per_machine_day=0.002
                      (array elements by index or by "name"). VALUE is JSON, or a string.
  --format table|json result on stdout as a table (default) or JSON
  --out DIR           also write result.json, replicas.csv (and timeline.csv,
                      incidents.csv, decisions.log when asked) into DIR
  --timeline          record cumulative and 1-hour sliding-window ETTR per replica
                      (every --timeline-step-s seconds, default 600) into timeline.csv
  --timeline-step-s S sampling step of the timeline
  --incidents         record every incident (time, category, detection, resolution and
                      its mechanism, slots and machine ids) into incidents.csv
  --decisions         record every event and action of the policy (decisions.log)
  --replica K[,K...]  rerun only these replicas (numbered as in replicas.csv), each exactly
                      as in the full run: its replicas.csv row, timeline, incidents and
                      decisions are byte-identical to the full run's for replica K
  --replicas-from FILE
                      the same, the replica numbers taken from FILE: the first field of each
                      line (a replicas.csv, or one number per line; a header line is skipped)
  --replica-cpu FILE  write each replica's CPU time in the process that ran it (CSV:
                      replica,cpu_ms; fork and result transfer excluded) into FILE: for
                      finding slow replicas and for tests/bench/scaling.sh. A measurement,
                      not a result: it varies from run to run
  --quiet             no progress bar
  --progress          the progress bar on stderr also when it is not a terminal (one line
                      every 2 s); never with --quiet
  --allow-unused      run even if a policy parameter is set that the stack does not read
                      (with its module choices); refused otherwise, naming when it is read
  -h, --help          this text

Same seed, same result: the JSON is byte-identical except wall_s, whatever --jobs is.
)";

// Adds the replica numbers "K,K,..." to `which` (keeping the first of duplicates); false on
// anything but non-negative integers.
bool add_replica_numbers(const std::string& list, std::vector<std::uint64_t>& which) {
  std::stringstream ss(list);
  std::string x;
  bool any = false;
  while (std::getline(ss, x, ',')) {
    long long k;
    if (!faultline::cli::parse_int(x, 0, 1LL << 40, &k)) return false;
    if (std::find(which.begin(), which.end(), static_cast<std::uint64_t>(k)) == which.end())
      which.push_back(static_cast<std::uint64_t>(k));
    any = true;
  }
  return any;
}

// The replica numbers of --replicas-from FILE, or a one-line error naming the file and line.
std::string read_replica_numbers(const std::string& file, std::vector<std::uint64_t>& which) {
  std::ifstream in(file);
  if (!in) return file + ": cannot read";
  std::string line;
  int n = 0;
  bool any = false;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string first = line.substr(0, line.find_first_of(", \t"));
    if (first.empty()) continue;
    if (n == 1 && !std::isdigit(static_cast<unsigned char>(first[0]))) continue;  // a header
    if (!add_replica_numbers(first, which))
      return file + ":" + std::to_string(n) +
             ": expected a replica number (an integer >= 0), got '" + first + "'";
    any = true;
  }
  return any ? "" : file + ": no replica numbers in it";
}

// The options of sim run beside the shared ones (flags.h), in the same table shape.
constexpr faultline::cli::FlagSpec kRunFlags[] = {
    {"--timeline", nullptr},
    {"--timeline-step-s", "seconds >= 1"},
    {"--incidents", nullptr},
    {"--decisions", nullptr},
    {"--replica", "K[,K...], replica numbers >= 0"},
    {"--replica-cpu", "a file"},
    {"--replicas-from", "a file"},
};

// What the command line asks for.
struct RunArgs {
  std::string path;
  faultline::cli::SimFlags f;
  sim::RunOptions opt;
  std::vector<std::uint64_t> which;  // --replica / --replicas-from; empty: all
  std::string cpu_file;              // --replica-cpu
};

// Applies one option of kRunFlags and its value (nullptr: none followed). Returns -1, or 2
// after a usage error.
int apply_run_flag(const faultline::cli::FlagSpec& spec, const std::string* v, RunArgs& c) {
  using faultline::cli::expected;
  const std::string name = spec.name;
  if (name == "--timeline") {
    c.opt.timeline = true;
  } else if (name == "--timeline-step-s") {
    long long x;
    if (!v || !faultline::cli::parse_int(*v, 1, 1LL << 40, &x)) return usage_error(expected(spec));
    c.opt.timeline_step_s = static_cast<double>(x);
  } else if (name == "--incidents") {
    c.opt.incidents = true;
  } else if (name == "--decisions") {
    c.opt.decisions = true;
  } else if (name == "--replica") {
    if (!v || !add_replica_numbers(*v, c.which)) return usage_error(expected(spec));
  } else if (name == "--replica-cpu") {
    if (!v || v->empty()) return usage_error(expected(spec));
    c.cpu_file = *v;
  } else {  // --replicas-from
    if (!v) return usage_error(expected(spec));
    if (const std::string err = read_replica_numbers(*v, c.which); !err.empty())
      return usage_error("--replicas-from " + err);
  }
  return -1;
}

// Parses the command line into `c`. Returns -1 to go on, else the exit code (0 after
// --help, 2 after a usage error).
int parse_run_args(const std::vector<std::string>& args, RunArgs& c) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (const int r = faultline::cli::sim_flag(args, i, c.f, {"table", "json"})) {
      if (r < 0) return 2;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kSimRunHelp, stdout);
      return 0;
    }
    int rc;
    if (const auto* spec = faultline::cli::find_flag(kRunFlags, a))
      rc = apply_run_flag(*spec, spec->value ? faultline::cli::flag_value(args, i) : nullptr, c);
    else
      rc = faultline::cli::positional_arg(a, c.path);
    if (rc >= 0) return rc;
  }
  if (c.path.empty()) return usage_error("sim run: expected SCENARIO.json");
  return -1;
}

// Writes the files the run was asked for besides stdout: --out DIR, and --replica-cpu FILE
// into `cpu` (opened before the run). Returns -1, or 1 after printing why one failed.
int write_run_files(const RunArgs& c, const sc::Scenario& scenario, const nlohmann::json& result,
                    const std::vector<sim::ReplicaResult>& results, std::ofstream& cpu) {
  if (!c.f.out_dir.empty()) {
    try {
      sim::write_out_dir(c.f.out_dir, result, results, scenario);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      return 1;
    }
  }
  if (cpu.is_open()) {
    cpu << "replica,cpu_ms\n";
    for (const auto& r : results) cpu << r.replica << ',' << r.cpu_s * 1e3 << '\n';
    if (!cpu.flush()) {
      std::fprintf(stderr, "faultline: --replica-cpu %s: cannot write\n", c.cpu_file.c_str());
      return 1;
    }
  }
  return -1;
}

int sim_run(const std::vector<std::string>& args) {
  RunArgs c;
  if (const int rc = parse_run_args(args, c); rc >= 0) return rc;
  Registry registry = faultline::policies::builtin_registry();
  sc::Scenario scenario;
  try {
    scenario = sc::load_scenario(c.path, c.f.scenario_sets(), registry);
  } catch (const sc::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  std::ofstream cpu;  // opened before the run: a bad path costs nothing
  if (!c.cpu_file.empty()) {
    cpu.open(c.cpu_file);
    if (!cpu) {
      std::fprintf(stderr, "faultline: --replica-cpu %s: cannot write\n", c.cpu_file.c_str());
      return 2;
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  faultline::cli::ProgressBar bar(!c.f.quiet, "", c.f.progress);
  auto progress = [&](int done, int total) { bar(done, total); };
  const int jobs = static_cast<int>(c.f.jobs);
  std::vector<sim::ReplicaResult> results;
  sim::RunStats stats;
  sim::CategoryTotals totals;
  try {
    results = c.which.empty() ? sim::run_replicas(scenario, scenario.replicas, jobs, c.opt,
                                                  registry, &stats, progress, &totals)
                              : sim::run_replica_list(scenario, c.which, jobs, c.opt, registry,
                                                      &stats, progress, &totals);
  } catch (const faultline::policies::ModuleError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s: %s\n", c.path.c_str(), e.what());
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json result = sim::aggregate(scenario, results, wall, &totals);
  if (!c.which.empty()) result["rerun_of_replicas"] = c.which;
  if (const int rc = write_run_files(c, scenario, result, results, cpu); rc >= 0) return rc;
  if (c.f.format == "json")
    std::cout << result.dump(2) << "\n";
  else
    std::cout << sim::format_table(result);
  return 0;
}

void print_param(const faultline::ParamSpec& p) {
  std::string when;
  for (const auto& c : p.read_when) when += (when.empty() ? "  (read only with " : " or ") + c;
  if (!when.empty()) when += ")";
  if (!p.choices.empty()) {
    std::string all;
    for (const auto& c : p.choices) all += (all.empty() ? "" : "|") + c;
    std::printf("    %-26s default %-10s one of %s  %s%s\n", p.name.c_str(),
                p.choices[static_cast<size_t>(p.default_value)].c_str(), all.c_str(),
                p.help.c_str(), when.c_str());
    return;
  }
  std::printf("    %-26s default %-10g [%g, %g] %s  %s%s\n", p.name.c_str(), p.default_value, p.min,
              p.max, p.unit.c_str(), p.help.c_str(), when.c_str());
}

int list_policies() {
  namespace pol = faultline::policies;
  Registry registry = pol::builtin_registry();
  // The modules a stack's choice parameters pick from (policies/module.h), plugins' too.
  const auto& modules = pol::modules();
  std::printf("stacks\n");
  for (const auto& name : registry.names()) {
    const auto* info = registry.find(name);
    std::printf("  %s (v%s): %s\n", name.c_str(), info->version.c_str(), info->summary.c_str());
    for (const auto& p : info->params) {
      bool from_module = false;  // listed under its module below
      for (const auto* m : modules.all())
        for (const auto& q : m->params) from_module |= q.name == p.name;
      if (!from_module) print_param(p);
    }
  }
  std::printf(
      "\nmodules (choose with policy.params.<kind>, e.g. \"localization\": \"bisection\")\n");
  for (auto kind : pol::kModuleKinds) {
    std::printf("  %s\n", pol::module_kind_name(kind));
    for (const auto* m : modules.of(kind)) {
      std::string from;
      for (const auto& l : faultline::plugins::loaded())
        for (const auto& name : l.modules)
          if (name == std::string(pol::module_kind_name(kind)) + "/" + m->name)
            from = "  [plugin " + l.path + "]";
      std::printf("    %-16s v%-3s %s%s\n", m->name.c_str(), m->version.c_str(), m->summary.c_str(),
                  from.c_str());
      // What live mode cannot run of it (docs/live-mode.md, "Which modules run live").
      if (const std::string limit = pol::live_limit(pol::module_kind_name(kind), m->name);
          !limit.empty())
        std::printf("      live mode: %s\n", limit.c_str());
      for (const auto& p : m->params) {
        std::printf("  ");
        print_param(p);
      }
    }
  }
  return 0;
}

}  // namespace

int faultline::cli::dispatch(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kTopHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "version" || args[0] == "--version") {
    std::printf("faultline 0.1.0\n");
    return 0;
  }
  if (args[0] == "policies") return list_policies();
  // Sibling programs: GPU probes (kernels/) and live mode (realexec/), which link neither
  // the simulator nor each other. They load the same plugins (FAULTLINE_PLUGINS).
  if (args[0] == "probe")
    return faultline::cli::exec_sibling("faultline-probe", {args.begin() + 1, args.end()});
  if (args[0] == "live" || args[0] == "agent")
    return faultline::cli::exec_sibling("faultline-live", args);
  if (args[0] == "trace") return faultline::traces::trace_command({args.begin() + 1, args.end()});
  if (args[0] == "analyze") return faultline::cli::analyze({args.begin() + 1, args.end()});
  if (args[0] == "report") return faultline::cli::report({args.begin() + 1, args.end()});
  if (args[0] == "sim") {
    if (args.size() < 2 || args[1] == "--help" || args[1] == "-h") {
      std::fputs(
          "usage: faultline sim run|compare|sweep|tune SCENARIO.json [options]\n"
          "       faultline sim replay EVENTLOG [options]   (faultline sim run --help)\n"
          "       faultline sim schema                      (the scenario reference)\n",
          args.size() < 2 ? stderr : stdout);
      return args.size() < 2 ? 2 : 0;
    }
    if (args[1] == "run") return sim_run({args.begin() + 2, args.end()});
    if (args[1] == "sweep") return faultline::cli::sim_sweep({args.begin() + 2, args.end()});
    if (args[1] == "compare") return faultline::cli::sim_compare({args.begin() + 2, args.end()});
    if (args[1] == "tune") return faultline::cli::sim_tune({args.begin() + 2, args.end()});
    if (args[1] == "replay") return faultline::cli::sim_replay({args.begin() + 2, args.end()});
    if (args[1] == "schema") {
      if (args.size() > 2) {
        if (args[2] == "--help" || args[2] == "-h") {
          std::fputs(
              "usage: faultline sim schema > docs/scenario-reference.md\n"
              "prints the scenario reference: every field (type, unit, default, allowed values,\n"
              "meaning) and every built-in stack's parameters\n",
              stdout);
          return 0;
        }
        return usage_error("sim schema takes no arguments, got '" + args[2] + "'");
      }
      std::fputs(
          faultline::scenarios::scenario_reference(faultline::policies::builtin_registry()).c_str(),
          stdout);
      return 0;
    }
    return usage_error("unknown sim command '" + args[1] + "'");
  }
  return usage_error("unknown command '" + args[0] + "'");
}
