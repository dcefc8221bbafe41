// `faultline analyze`: the analytic models of analysis/models.h on the command line,
// and `analyze check`, which runs the simulator under a model's assumptions and compares.
// `analyze localize` lives beside it, in localize_cmd.cc.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/models.h"
#include "cli/analysis_commands.h"
#include "cli/analyze_options.h"
#include "cli/flag_table.h"
#include "policies/builtin.h"
#include "scenarios/scenario.h"

namespace faultline::cli {

using nlohmann::ordered_json;

namespace analyze_options {

// The two options parse_options applies itself when a model allows them.
constexpr const char* kStrict = "--strict";
constexpr const char* kSet = "--set";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "faultline: %s (see --help)\n", msg.c_str());
  return 2;
}

bool parse_double(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

int parse_options(const std::vector<std::string>& args, const Model& model, Options* o) {
  FlagTable t("faultline", model.usage, model.about);
  for (const auto& opt : model.options) {
    if (opt.name == kStrict) {
      t.toggle(opt.name, opt.help, &o->strict);
      continue;
    }
    t.add({opt.name, opt.arg, "a value", opt.help, [name = opt.name, o](const std::string& v) {
             if (name == kSet)
               o->sets.push_back(v);
             else
               o->values[name] = v;
             return std::string();
           }});
  }
  t.choice("--format", "output (default table)", {"table", "json"}, &o->format);
  t.positional([o](const std::string& a) {
    o->positional.push_back(a);
    return std::string();
  });
  return t.parse(args);
}

bool number(const Options& o, const std::string& name, bool required, double def, double lo,
            double* out, bool lo_open) {
  auto it = o.values.find(name);
  if (it == o.values.end()) {
    if (required) {
      usage_error(name + " is required");
      return false;
    }
    *out = def;
    return true;
  }
  double v;
  if (!parse_double(it->second, &v) || (lo_open ? !(v > lo) : !(v >= lo))) {
    std::ostringstream m;
    m << name << ": expected a number " << (lo_open ? "> " : ">= ") << lo << ", got '" << it->second
      << "'";
    usage_error(m.str());
    return false;
  }
  *out = v;
  return true;
}

std::string fmt(double x, int prec) {
  std::ostringstream o;
  o << std::setprecision(prec) << x;
  return o.str();
}

std::string pct(double x, int decimals) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(decimals) << 100 * x << "%";
  return o.str();
}

int emit(const Options& o, const ordered_json& j, const std::string& table) {
  if (o.format == "json")
    std::cout << j.dump(2) << "\n";
  else
    std::cout << table;
  return 0;
}

}  // namespace analyze_options

namespace {

using analyze_options::emit;
using analyze_options::fmt;
using analyze_options::Model;
using analyze_options::number;
using analyze_options::Options;
using analyze_options::parse_options;
using analyze_options::pct;
using analyze_options::usage_error;

constexpr const char* kAnalyzeHelp = R"(usage: faultline analyze <model> [options]

Analytic models of checkpointing and fault tolerance (docs/domain.md §5, §7). Every
model takes --format table|json (default table) and --help.

models:
  daly       Daly's exact ETTR for Poisson job failures, and the optimal interval
  young      Young's first-order optimal checkpoint interval sqrt(2 delta M)
  meta-ettr  Meta's small-loss ETTR approximation and its best interval
  standby    warm-standby pool size: the Q-quantile of Binomial(machines, p)
  localize   every localization module (plugins' too) on k faulty machines: rounds, time,
             healthy machines evicted, run on the modules' own code
  check      run the simulator under Daly's assumptions and compare it with Daly's
             closed form and Meta's approximation
)";

const Model kDaly = {
    "faultline analyze daly --mtbf-s M --checkpoint-s D [--restart-s R] [--interval-s T]",
    R"(Daly's model: job failures are Poisson with mean time M between them; work runs in
segments of T followed by a blocking checkpoint of D; a failure at any moment costs a
restart of R and loses the work since the last complete checkpoint. Prints
  ETTR = T / (M e^(R/M) (e^((T+D)/M) - 1))
for the given T, and the T that maximises it (found numerically), with Young's and
Daly's closed-form estimates of that optimum for comparison.)",
    {{"--mtbf-s", "M", "mean time between failures of the whole job, seconds (> 0)"},
     {"--checkpoint-s", "D", "blocking time of one checkpoint, seconds (>= 0)"},
     {"--restart-s", "R", "time from a failure to training again, seconds (default 0)"},
     {"--interval-s", "T", "training time between checkpoints, seconds (optional)"}}};

const Model kYoung = {
    "faultline analyze young --mtbf-s M --checkpoint-s D [--restart-s R]",
    R"(Young's first-order optimal checkpoint interval tau* = sqrt(2 D M), with Daly's exact
ETTR at tau* and at Daly's own optimum for comparison.)",
    {{"--mtbf-s", "M", "mean time between failures of the whole job, seconds (> 0)"},
     {"--checkpoint-s", "D", "blocking time of one checkpoint, seconds (>= 0)"},
     {"--restart-s", "R", "restart cost used for the ETTR figures, seconds (default 0)"}}};

const Model kMeta = {
    "faultline analyze meta-ettr --nodes N --rate-per-node-day r --restart-s u0\n"
    "                                    --write-s w [--interval-s D]",
    R"(Meta's approximation (Kokolis et al. 2024) for N nodes each failing r times per day,
restart overhead u0, checkpoint interval D and checkpoint write time w:
  E[ETTR] ~ (1 - N r (u0 + D/2)) / (1 + w/D),   best D = sqrt(2 w / (N r)),
with N r converted to failures per second. A small-loss approximation (within ~5% of
Monte Carlo in the paper); it goes negative when failures are frequent.)",
    {{"--nodes", "N", "nodes (machines) in the job"},
     {"--rate-per-node-day", "r", "failures per node per day"},
     {"--restart-s", "u0", "restart overhead per failure, seconds"},
     {"--write-s", "w", "checkpoint write time, seconds"},
     {"--interval-s", "D", "checkpoint interval, seconds (optional; default: the best)"}}};

const Model kStandby = {
    "faultline analyze standby --machines N[,N2,...] --p P [--quantile Q]",
    R"(Warm-standby pool size (ByteRobust §6): the smallest k with
P(Binomial(N, p) <= k) >= Q, p being one machine's failure probability per day. The
binomial CDF is summed in log space, so it is exact for any N. ByteRobust's published
sizes: 2, 2, 3, 4 for 128, 256, 512, 1,024 machines (p ~ 1.2e-3, Q = 0.99).)",
    {{"--machines", "N[,N2,...]", "machines in the job (a comma-separated list for a table)"},
     {"--p", "P", "failure probability of one machine per day, in [0, 1]"},
     {"--quantile", "Q", "the quantile to cover (default 0.99)"}}};

const Model kCheck = {
    "faultline analyze check [SCENARIO.json] [options]",
    R"(Runs the simulator (faultline sim run, in a child process, --format json) on a scenario
that meets Daly's assumptions and prints Daly's closed form against the simulated mean
ETTR and its 95% CI, and the error of Meta's approximation against the simulation.
The scenario must have the shape of scenarios/daly-check.json (the default): Poisson
crash faults (weibull_shape 1, observed at once, not persistent) of job or machine
scope, the requeue stack, no image pull, no process init and no checkpoint bytes, and
no fault trace. The model's inputs are read from it:
  M = 86400 / (sum of the categories' rates per machine-day x machines)
  R = requeue_base_s + requeue_per_machine_s x machines + job.restart_warmup_s
  tau = policy.params.checkpoint_interval_s, delta = policy.params.checkpoint_write_s
and Meta's approximation is mapped as N r = 1/M, u0 = R, D = tau, w = delta.)",
    {{"--replicas", "N", "passed to sim run"},
     {"--jobs", "J", "passed to sim run"},
     {"--seed", "S", "passed to sim run"},
     {"--set", "PATH=VALUE", "passed to sim run (repeatable)"},
     {"--strict", "", "exit 1 when Daly's value is outside the simulation's CI"}}};

int daly(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, kDaly, &o); rc >= 0) return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double M, R, T = 0, D;
  if (!number(o, "--mtbf-s", true, 0, 0, &M, true) ||
      !number(o, "--checkpoint-s", true, 0, 0, &D) || !number(o, "--restart-s", false, 0, 0, &R) ||
      !number(o, "--interval-s", false, 0, 0, &T, true))
    return 2;
  const bool has_t = o.values.count("--interval-s") > 0;
  const auto best = analysis::daly_optimal_interval(M, R, D);
  const double young = analysis::young_interval(D, M);
  const double est = analysis::daly_interval_estimate(D, M);
  ordered_json j;
  j["model"] = "daly";
  j["inputs"] = {{"mtbf_s", M}, {"restart_s", R}, {"checkpoint_s", D}};
  if (has_t) {
    j["inputs"]["interval_s"] = T;
    j["ettr"] = analysis::daly_ettr(M, R, T, D);
  }
  j["optimal"] = {{"interval_s", best.interval_s}, {"ettr", best.ettr}};
  j["young_interval_s"] = young;
  j["young_ettr"] = young > 0 ? analysis::daly_ettr(M, R, young, D) : std::nan("");
  j["daly_estimate_interval_s"] = est;
  std::ostringstream t;
  t << "Daly's model: M = " << fmt(M) << " s, R = " << fmt(R) << " s, checkpoint = " << fmt(D)
    << " s\n";
  if (has_t) t << "  ETTR at interval " << fmt(T) << " s:        " << pct(j["ettr"]) << "\n";
  t << "  optimal interval (numeric):   " << fmt(best.interval_s) << " s, ETTR " << pct(best.ettr)
    << "\n";
  t << "  Young's sqrt(2 D M):          " << fmt(young) << " s, ETTR " << pct(j["young_ettr"])
    << "\n";
  t << "  Daly's closed-form estimate:  " << fmt(est) << " s\n";
  return emit(o, j, t.str());
}

int young(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, kYoung, &o); rc >= 0) return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double M, D, R;
  if (!number(o, "--mtbf-s", true, 0, 0, &M, true) ||
      !number(o, "--checkpoint-s", true, 0, 0, &D) || !number(o, "--restart-s", false, 0, 0, &R))
    return 2;
  const double tau = analysis::young_interval(D, M);
  const auto best = analysis::daly_optimal_interval(M, R, D);
  ordered_json j;
  j["model"] = "young";
  j["inputs"] = {{"mtbf_s", M}, {"checkpoint_s", D}, {"restart_s", R}};
  j["interval_s"] = tau;
  j["daly_ettr_at_interval"] = tau > 0 ? analysis::daly_ettr(M, R, tau, D) : std::nan("");
  j["daly_optimal"] = {{"interval_s", best.interval_s}, {"ettr", best.ettr}};
  std::ostringstream t;
  t << "Young's interval: sqrt(2 x " << fmt(D) << " s x " << fmt(M) << " s) = " << fmt(tau)
    << " s\n";
  t << "  Daly ETTR there (R = " << fmt(R) << " s): " << pct(j["daly_ettr_at_interval"]) << "\n";
  t << "  Daly's optimum: " << fmt(best.interval_s) << " s, ETTR " << pct(best.ettr) << "\n";
  return emit(o, j, t.str());
}

int meta(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, kMeta, &o); rc >= 0) return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double N, r, u0, w, D;
  if (!number(o, "--nodes", true, 0, 0, &N, true) ||
      !number(o, "--rate-per-node-day", true, 0, 0, &r, true) ||
      !number(o, "--restart-s", true, 0, 0, &u0) || !number(o, "--write-s", true, 0, 0, &w) ||
      !number(o, "--interval-s", false, 0, 0, &D, true))
    return 2;
  const double best = analysis::meta_best_interval(N, r, w);
  const bool has_d = o.values.count("--interval-s") > 0;
  ordered_json j;
  j["model"] = "meta-ettr";
  j["inputs"] = {{"nodes", N}, {"rate_per_node_day", r}, {"restart_s", u0}, {"write_s", w}};
  j["job_mtbf_s"] = 86400.0 / (N * r);
  if (has_d) {
    j["inputs"]["interval_s"] = D;
    j["ettr"] = analysis::meta_ettr(N, r, u0, D, w);
  }
  j["best_interval_s"] = best;
  j["ettr_at_best"] = best > 0 ? analysis::meta_ettr(N, r, u0, best, w) : std::nan("");
  std::ostringstream t;
  t << "Meta's approximation: " << fmt(N) << " nodes x " << fmt(r)
    << " failures/node-day (job MTBF " << fmt(j["job_mtbf_s"].get<double>())
    << " s), u0 = " << fmt(u0) << " s, w = " << fmt(w) << " s\n";
  if (has_d) t << "  E[ETTR] at interval " << fmt(D) << " s: " << pct(j["ettr"]) << "\n";
  t << "  best interval sqrt(2w/(N r)): " << fmt(best) << " s, E[ETTR] " << pct(j["ettr_at_best"])
    << "\n";
  return emit(o, j, t.str());
}

int standby(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, kStandby, &o); rc >= 0) return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double p, q;
  if (!number(o, "--p", true, 0, 0, &p) || !number(o, "--quantile", false, 0.99, 0, &q)) return 2;
  if (p > 1) return usage_error("--p: expected a probability in [0, 1]");
  if (q > 1) return usage_error("--quantile: expected a probability in [0, 1]");
  auto it = o.values.find("--machines");
  if (it == o.values.end()) return usage_error("--machines is required");
  std::vector<std::int64_t> ns;
  std::stringstream ss(it->second);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    const long long n = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || n < 1 || n > 100'000'000)
      return usage_error("--machines: expected integers >= 1");
    ns.push_back(n);
  }
  ordered_json j;
  j["model"] = "standby";
  j["p"] = p;
  j["quantile"] = q;
  j["pools"] = ordered_json::array();
  std::ostringstream t;
  t << "warm standby: smallest k with P(Binomial(N, " << fmt(p) << ") <= k) >= " << fmt(q) << "\n";
  t << std::setw(10) << "machines" << std::setw(8) << "pool" << std::setw(14) << "P(X <= k)"
    << std::setw(14) << "P(X <= k-1)" << std::setw(16) << "mean failures\n";
  for (auto n : ns) {
    const auto k = analysis::standby_pool_size(n, p, q);
    const double at = analysis::binomial_cdf(k, n, p), below = analysis::binomial_cdf(k - 1, n, p);
    j["pools"].push_back(
        {{"machines", n}, {"pool", k}, {"cdf_at_pool", at}, {"cdf_below_pool", below}});
    t << std::setw(10) << n << std::setw(8) << k << std::setw(14) << std::fixed
      << std::setprecision(6) << at << std::setw(14) << below << std::setw(15)
      << std::setprecision(3) << n * p << "\n";
    t.unsetf(std::ios::fixed);
  }
  return emit(o, j, t.str());
}

// Runs `faultline sim run ... --format json` in a child process; returns its stdout.
int run_sim(const std::vector<std::string>& args, std::string* out) {
  char tmpl[] = "/tmp/faultline-check-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return 1;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, STDOUT_FILENO);
    std::vector<std::string> all{self_exe()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream f(tmpl);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  ::close(fd);
  ::unlink(tmpl);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Daly's inputs, read from a scenario that meets his assumptions.
struct DalyInputs {
  double M = 0;      // the job's mean time between failures, s
  double R = 0;      // the recovery a failure can interrupt: the requeue, then the warm-up
  double tau = 0;    // checkpoint interval, s
  double delta = 0;  // blocking time of one checkpoint, s
};

// What of the scenario breaks Daly's assumptions, one message each (none: it meets them).
// Sets `rate_per_day` to the job's fault rate per day.
std::vector<std::string> daly_violations(const scenarios::Scenario& sc, double* rate_per_day) {
  std::vector<std::string> off;
  if (sc.policy != "requeue") off.push_back("policy.stack is " + sc.policy + ", expected requeue");
  if (sc.job.image_bytes != 0) off.push_back("job.image_bytes must be 0");
  if (sc.job.init_s != 0) off.push_back("job.init_s must be 0");
  if (sc.job.checkpoint_bytes_per_machine != 0)
    off.push_back("job.checkpoint_bytes_per_machine must be 0");
  if (sc.trace) off.push_back("faults.trace must be absent");
  *rate_per_day = 0;
  for (const auto& c : sc.faults) {
    const std::string at = "faults.categories." + c.name;
    if (c.symptom != scenarios::Symptom::kCrash) off.push_back(at + ".symptom must be crash");
    if (c.weibull_shape != 1) off.push_back(at + ".weibull_shape must be 1 (Poisson)");
    if (c.observe_after_s != 0)
      off.push_back(at + ".observe_after_s must be 0 (instant detection)");
    if (c.persistent) off.push_back(at + ".persistent must be false");
    if (c.scope == scenarios::FaultScope::kRack)
      off.push_back(at + ".scope must be job or machine");
    *rate_per_day += c.rate_per_machine_day * sc.cluster.machines;
  }
  if (!(*rate_per_day > 0)) off.push_back("the faults' total rate must be > 0");
  return off;
}

// Loads the scenario at `path` (with --seed, --replicas and --set) and reads Daly's inputs
// from it. Returns -1, or 2 after printing why it cannot be checked.
int read_daly_inputs(const Options& o, const std::string& path, scenarios::Scenario& sc,
                     DalyInputs& in) {
  std::vector<std::string> sets = o.sets;
  if (o.values.count("--seed")) sets.push_back("seed=" + o.values.at("--seed"));
  if (o.values.count("--replicas")) sets.push_back("replicas=" + o.values.at("--replicas"));
  try {
    sc = scenarios::load_scenario(path, sets, policies::builtin_registry());
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  // The model's assumptions, checked one by one so the message says what is off.
  double rate_per_day = 0;
  if (const auto off = daly_violations(sc, &rate_per_day); !off.empty()) {
    std::string all;
    for (const auto& s : off) all += (all.empty() ? "" : "; ") + s;
    std::fprintf(stderr, "faultline: analyze check: %s does not meet Daly's assumptions: %s\n",
                 path.c_str(), all.c_str());
    return 2;
  }
  in.M = 86400.0 / rate_per_day;
  in.R = sc.scheduler.requeue_base_s + sc.scheduler.requeue_per_machine_s * sc.cluster.machines +
         sc.job.restart_warmup_s;
  in.tau = sc.policy_params.get("checkpoint_interval_s");
  in.delta = sc.policy_params.get("checkpoint_write_s");
  return -1;
}

// Runs `faultline sim run` on the scenario (--replicas, --jobs, --seed and --set passed on)
// and parses its JSON into `res`. Returns -1, or the exit code after printing why not.
int simulate(const Options& o, const std::string& path, nlohmann::json& res) {
  std::vector<std::string> run{"sim", "run", path, "--format", "json", "--quiet"};
  for (const char* k : {"--replicas", "--jobs", "--seed"})
    if (o.values.count(k)) {
      run.push_back(k);
      run.push_back(o.values.at(k));
    }
  for (const auto& s : o.sets) {
    run.push_back("--set");
    run.push_back(s);
  }
  std::string text;
  if (int rc = run_sim(run, &text); rc != 0) {
    std::fprintf(stderr, "faultline: analyze check: the simulation failed (exit %d)\n", rc);
    return rc == 2 ? 2 : 1;
  }
  try {
    res = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: analyze check: unreadable simulation result: %s\n", e.what());
    return 1;
  }
  return -1;
}

// The simulation against the models: the simulated mean ETTR with its CI and standard
// error, Daly's closed form and Meta's approximation, and the optimal intervals.
struct CheckFigures {
  double mean, lo, hi, se;  // the simulation
  double model;             // Daly's ETTR
  bool agrees;              // Daly's ETTR within the simulation's CI
  double meta;              // Meta's ETTR
  analysis::Optimum best;   // Daly's optimal interval
  double young_s, meta_s;   // Young's and Meta's optimal intervals
};

// The figures from Daly's inputs and the simulation's result `res` (not const: a missing
// field reads as null and fails to convert, as it always has, instead of asserting).
CheckFigures check_figures(const DalyInputs& in, nlohmann::json& res) {
  CheckFigures f;
  f.mean = res["ettr"]["mean"];
  f.lo = res["ettr"]["ci95"][0];
  f.hi = res["ettr"]["ci95"][1];
  const double sd = res["ettr"]["stddev"];
  const double n = res["replicas"];
  f.se = sd / std::sqrt(n);
  f.model = analysis::daly_ettr(in.M, in.R, in.tau, in.delta);
  f.agrees = f.model >= f.lo && f.model <= f.hi;
  // Meta's mapping: N r = 1/M (one "node" failing at the job's rate), u0 = R, D = tau, w = delta.
  f.meta = analysis::meta_ettr(1, 86400.0 / in.M, in.R, in.tau, in.delta);
  f.best = analysis::daly_optimal_interval(in.M, in.R, in.delta);
  f.young_s = analysis::young_interval(in.delta, in.M);
  f.meta_s = analysis::meta_best_interval(1, 86400.0 / in.M, in.delta);
  return f;
}

// What --format json prints.
ordered_json check_json(const std::string& path, const scenarios::Scenario& sc,
                        const DalyInputs& in, nlohmann::json& res, const CheckFigures& f) {
  ordered_json j;
  j["scenario"] = path;
  j["replicas"] = res["replicas"];
  j["seed"] = res["seed"];
  j["inputs"] = {{"mtbf_s", in.M},
                 {"restart_s", in.R},
                 {"interval_s", in.tau},
                 {"checkpoint_s", in.delta},
                 {"horizon_days", sc.job.horizon_days}};
  j["simulation"] = {{"ettr", f.mean}, {"ci95", {f.lo, f.hi}}, {"stderr", f.se}};
  j["daly"] = {{"ettr", f.model},
               {"within_ci95", f.agrees},
               {"z", f.se > 0 ? (f.model - f.mean) / f.se : 0.0},
               {"relative_error", (f.model - f.mean) / f.mean}};
  j["meta"] = {{"ettr", f.meta},
               {"error", f.meta - f.mean},
               {"relative_error", (f.meta - f.mean) / f.mean},
               {"error_vs_daly", f.meta - f.model}};
  j["optimal_interval_s"] = {{"daly", f.best.interval_s}, {"young", f.young_s}, {"meta", f.meta_s}};
  return j;
}

// What --format table prints.
std::string check_table(const std::string& path, const scenarios::Scenario& sc,
                        const DalyInputs& in, nlohmann::json& res, const CheckFigures& f) {
  std::ostringstream t;
  t << "analyze check: " << path << " (" << res["replicas"].get<long long>() << " replicas, seed "
    << res["seed"].get<long long>() << ")\n";
  t << "  model inputs: M = " << fmt(in.M) << " s (job MTBF), R = " << fmt(in.R)
    << " s, tau = " << fmt(in.tau) << " s, delta = " << fmt(in.delta) << " s, horizon "
    << fmt(sc.job.horizon_days) << " days\n";
  t << "  simulation          ETTR " << pct(f.mean) << "  (95% CI " << pct(f.lo) << " .. "
    << pct(f.hi) << ", standard error " << pct(f.se, 4) << ")\n";
  t << "  Daly closed form    ETTR " << pct(f.model) << "  " << (f.agrees ? "within" : "OUTSIDE")
    << " the simulation's 95% CI (z = " << std::fixed << std::setprecision(2)
    << (f.se > 0 ? (f.model - f.mean) / f.se : 0) << ")\n";
  t.unsetf(std::ios::fixed);
  t << "  Meta approximation  ETTR " << pct(f.meta) << "  error vs simulation " << std::showpos
    << std::fixed << std::setprecision(3) << 100 * (f.meta - f.mean) << " points ("
    << 100 * (f.meta - f.mean) / f.mean << "% relative)" << std::noshowpos << "\n";
  t.unsetf(std::ios::fixed);
  t << "  optimal interval:   Daly " << fmt(f.best.interval_s) << " s, Young " << fmt(f.young_s)
    << " s, Meta " << fmt(f.meta_s) << " s\n";
  return t.str();
}

int check(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, kCheck, &o); rc >= 0) return rc;
  if (o.positional.size() > 1) return usage_error("unexpected argument " + o.positional[1]);
  std::string path = o.positional.empty() ? "scenarios/daly-check.json" : o.positional[0];
  if (o.positional.empty() && !std::filesystem::exists(path))
    path = FAULTLINE_SOURCE_DIR "/scenarios/daly-check.json";  // run from outside the checkout
  scenarios::Scenario sc;
  DalyInputs in;
  if (const int rc = read_daly_inputs(o, path, sc, in); rc >= 0) return rc;
  nlohmann::json res;
  if (const int rc = simulate(o, path, res); rc >= 0) return rc;
  const CheckFigures f = check_figures(in, res);
  emit(o, check_json(path, sc, in, res, f), check_table(path, sc, in, res, f));
  return o.strict && !f.agrees ? 1 : 0;
}

}  // namespace

int analyze(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kAnalyzeHelp, stderr);
    return 2;
  }
  const std::string& m = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (is_help(m) || m == "help") {
    std::fputs(kAnalyzeHelp, stdout);
    return 0;
  }
  if (m == "daly") return daly(rest);
  if (m == "young") return young(rest);
  if (m == "meta-ettr" || m == "meta") return meta(rest);
  if (m == "standby") return standby(rest);
  if (m == "localize") return analyze_localize(rest);
  if (m == "check") return check(rest);
  return usage_error("unknown model '" + m +
                     "'; expected daly, young, meta-ettr, standby, localize or check");
}

}  // namespace faultline::cli