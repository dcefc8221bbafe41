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

// What the command line asks for.
struct RunArgs {
  std::string path;
  faultline::cli::SimFlags f;
  sim::RunOptions opt;
  std::vector<std::uint64_t> which;  // --replica / --replicas-from; empty: all
  std::string cpu_file;              // --replica-cpu
};

// sim run's options beside the shared ones (flags.h), applied into `c`.
faultline::cli::FlagTable run_table(RunArgs& c) {
  using faultline::cli::Flag;
  auto t = faultline::cli::command_table(
      "faultline sim run SCENARIO.json [options]",
      "Simulates the scenario's training job under its fault model and policy stack, one\n"
      "replica per independent fault history, and prints ETTR with a 95% confidence interval,\n"
      "the unproductive-time breakdown and incidents per category.");
  faultline::cli::add_sim_flags(t, c.f, {"table", "json"},
                                "result on stdout as a table (default) or JSON",
                                "also write result.json, replicas.csv (and timeline.csv,\n"
                                "incidents.csv, decisions.log when asked) into DIR");
  t.toggle("--timeline",
           "record cumulative and 1-hour sliding-window ETTR per replica\n"
           "(every --timeline-step-s seconds, default 600) into timeline.csv",
           &c.opt.timeline);
  t.add({"--timeline-step-s", "S", "seconds >= 1", "sampling step of the timeline",
         [&c](const std::string& v) {
           long long x;
           if (!faultline::cli::parse_int(v, 1, 1LL << 40, &x))
             return std::string("--timeline-step-s: expected seconds >= 1");
           c.opt.timeline_step_s = static_cast<double>(x);
           return std::string();
         }});
  t.toggle("--incidents",
           "record every incident (time, category, detection, resolution and\n"
           "its mechanism, slots and machine ids) into incidents.csv",
           &c.opt.incidents);
  t.toggle("--decisions", "record every event and action of the policy (decisions.log)",
           &c.opt.decisions);
  t.add({"--replica", "K[,K...]", "K[,K...], replica numbers >= 0",
         "rerun only these replicas (numbered as in replicas.csv), each exactly\n"
         "as in the full run: its replicas.csv row, timeline, incidents and\n"
         "decisions are byte-identical to the full run's for replica K",
         [&c](const std::string& v) {
           return add_replica_numbers(v, c.which)
                      ? std::string()
                      : std::string("--replica: expected K[,K...], replica numbers >= 0");
         }});
  t.add({"--replicas-from", "FILE", "a file",
         "the same, the replica numbers taken from FILE: the first field of each\n"
         "line (a replicas.csv, or one number per line; a header line is skipped)",
         [&c](const std::string& v) {
           const std::string err = read_replica_numbers(v, c.which);
           return err.empty() ? err : "--replicas-from " + err;
         }});
  t.text("--replica-cpu", "FILE",
         "write each replica's CPU time in the process that ran it (CSV:\n"
         "replica,cpu_ms; fork and result transfer excluded) into FILE: for\n"
         "finding slow replicas and for tests/bench/scaling.sh. A measurement,\n"
         "not a result: it varies from run to run",
         &c.cpu_file);
  faultline::cli::add_sim_switches(t, c.f);
  t.positional(&c.path);
  t.epilog("Same seed, same result: the JSON is byte-identical except wall_s, whatever --jobs is.");
  return t;
}

// Parses the command line into `c`. Returns -1 to go on, else the exit code (0 after
// --help, 2 after a usage error).
int parse_run_args(const std::vector<std::string>& args, RunArgs& c) {
  if (const int rc = run_table(c).parse(args); rc >= 0) return rc;
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
                p.default_choice().c_str(), all.c_str(), p.help.c_str(), when.c_str());
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

int sim_schema(const std::vector<std::string>& args) {
  auto t = faultline::cli::command_table(
      "faultline sim schema > docs/scenario-reference.md",
      "prints the scenario reference: every field (type, unit, default, allowed values,\n"
      "meaning) and every built-in stack's parameters");
  if (const int rc = t.parse(args); rc >= 0) return rc;
  std::fputs(
      faultline::scenarios::scenario_reference(faultline::policies::builtin_registry()).c_str(),
      stdout);
  return 0;
}

int version(const std::vector<std::string>&) {
  std::printf("faultline 0.1.0\n");
  return 0;
}
int policies_cmd(const std::vector<std::string>& args) {
  auto t = faultline::cli::command_table(
      "faultline policies",
      "lists the policy stacks and the modules they compose, plugins' included");
  if (const int rc = t.parse(args); rc >= 0) return rc;
  return list_policies();
}
int probe(const std::vector<std::string>& args) {
  return faultline::cli::exec_sibling("faultline-probe", args);
}
int trace(const std::vector<std::string>& args) { return faultline::traces::trace_command(args); }

// A command or subcommand: its name and what runs it with the arguments after the name.
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};
constexpr Command kSimCommands[] = {
    {"run", sim_run},
    {"sweep", faultline::cli::sim_sweep},
    {"compare", faultline::cli::sim_compare},
    {"tune", faultline::cli::sim_tune},
    {"replay", faultline::cli::sim_replay},
    {"schema", sim_schema},
};

int sim_cmd(const std::vector<std::string>& args) {
  if (args.empty() || faultline::cli::is_help(args[0])) {
    std::fputs(
        "usage: faultline sim run|compare|sweep|tune SCENARIO.json [options]\n"
        "       faultline sim replay EVENTLOG [options]   (faultline sim run --help)\n"
        "       faultline sim schema                      (the scenario reference)\n",
        args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const auto& c : kSimCommands)
    if (args[0] == c.name) return c.run({args.begin() + 1, args.end()});
  return usage_error("unknown sim command '" + args[0] + "'");
}

constexpr Command kCommands[] = {
    {"version", version},
    {"--version", version},
    {"policies", policies_cmd},
    // Sibling programs: GPU probes (kernels/) and live mode (realexec/), which link neither
    // the simulator nor each other. They load the same plugins (FAULTLINE_PLUGINS).
    {"probe", probe},
    {"trace", trace},
    {"analyze", faultline::cli::analyze},
    {"report", faultline::cli::report},
    {"sim", sim_cmd},
};

}  // namespace

int faultline::cli::dispatch(const std::vector<std::string>& args) {
  if (args.empty() || is_help(args[0]) || args[0] == "help") {
    std::fputs(kTopHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "live" || args[0] == "agent")
    return faultline::cli::exec_sibling("faultline-live", args);
  for (const auto& c : kCommands)
    if (args[0] == c.name) return c.run({args.begin() + 1, args.end()});
  return usage_error("unknown command '" + args[0] + "'");
}
