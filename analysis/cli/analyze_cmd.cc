// `faultline analyze`: the analytic models of analysis/models.h on the command line,
// and `analyze check`, which runs the simulator under a model's assumptions and compares.
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

#include "analysis/cli/commands.h"
#include "analysis/models.h"
#include "policies/api/rng.h"
#include "policies/builtin.h"
#include "policies/localization/localization.h"
#include "scenarios/scenario.h"

namespace faultline::cli {

using nlohmann::ordered_json;

namespace {

constexpr const char* kAnalyzeHelp = R"(usage: faultline analyze <model> [options]

Analytic models of checkpointing and fault tolerance (DOMAIN.md §5, §7). Every model
takes --format table|json (default table) and --help.

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

constexpr const char* kDalyHelp =
    R"(usage: faultline analyze daly --mtbf-s M --checkpoint-s D [--restart-s R] [--interval-s T]

Daly's model: job failures are Poisson with mean time M between them; work runs in
segments of T followed by a blocking checkpoint of D; a failure at any moment costs a
restart of R and loses the work since the last complete checkpoint. Prints
  ETTR = T / (M e^(R/M) (e^((T+D)/M) - 1))
for the given T, and the T that maximises it (found numerically), with Young's and
Daly's closed-form estimates of that optimum for comparison.

options:
  --mtbf-s M          mean time between failures of the whole job, seconds (> 0)
  --checkpoint-s D    blocking time of one checkpoint, seconds (>= 0)
  --restart-s R       time from a failure to training again, seconds (default 0)
  --interval-s T      training time between checkpoints, seconds (optional)
  --format table|json
)";

constexpr const char* kYoungHelp =
    R"(usage: faultline analyze young --mtbf-s M --checkpoint-s D [--restart-s R]

Young's first-order optimal checkpoint interval tau* = sqrt(2 D M), with Daly's exact
ETTR at tau* and at Daly's own optimum for comparison.

options:
  --mtbf-s M          mean time between failures of the whole job, seconds (> 0)
  --checkpoint-s D    blocking time of one checkpoint, seconds (>= 0)
  --restart-s R       restart cost used for the ETTR figures, seconds (default 0)
  --format table|json
)";

constexpr const char* kMetaHelp =
    R"(usage: faultline analyze meta-ettr --nodes N --rate-per-node-day r --restart-s u0
                                    --write-s w [--interval-s D]

Meta's approximation (Kokolis et al. 2024) for N nodes each failing r times per day,
restart overhead u0, checkpoint interval D and checkpoint write time w:
  E[ETTR] ~ (1 - N r (u0 + D/2)) / (1 + w/D),   best D = sqrt(2 w / (N r)),
with N r converted to failures per second. A small-loss approximation (within ~5% of
Monte Carlo in the paper); it goes negative when failures are frequent.

options:
  --nodes N              nodes (machines) in the job
  --rate-per-node-day r  failures per node per day
  --restart-s u0         restart overhead per failure, seconds
  --write-s w            checkpoint write time, seconds
  --interval-s D         checkpoint interval, seconds (optional; default: the best)
  --format table|json
)";

constexpr const char* kStandbyHelp =
    R"(usage: faultline analyze standby --machines N[,N2,...] --p P [--quantile Q]

Warm-standby pool size (ByteRobust §6): the smallest k with
P(Binomial(N, p) <= k) >= Q, p being one machine's failure probability per day. The
binomial CDF is summed in log space, so it is exact for any N. ByteRobust's published
sizes: 2, 2, 3, 4 for 128, 256, 512, 1,024 machines (p ~ 1.2e-3, Q = 0.99).

options:
  --machines N[,N2,...]  machines in the job (a comma-separated list for a table)
  --p P                  failure probability of one machine per day, in [0, 1]
  --quantile Q           the quantile to cover (default 0.99)
  --format table|json
)";

constexpr const char* kCheckHelp = R"(usage: faultline analyze check [SCENARIO.json] [options]

Runs the simulator (faultline sim run, in a child process, --format json) on a scenario
that meets Daly's assumptions and prints Daly's closed form against the simulated mean
ETTR and its 95% CI, and the error of Meta's approximation against the simulation.
The scenario must have the shape of scenarios/daly-check.json (the default): Poisson
crash faults (weibull_shape 1, observed at once, not persistent) of job or machine
scope, the requeue stack, no image pull, no process init and no checkpoint bytes, and
no fault trace. The model's inputs are read from it:
  M = 86400 / (sum of the categories' rates per machine-day x machines)
  R = requeue_base_s + requeue_per_machine_s x machines + job.restart_warmup_s
  tau = policy.params.checkpoint_interval_s, delta = policy.params.checkpoint_write_s
and Meta's approximation is mapped as N r = 1/M, u0 = R, D = tau, w = delta.

options:
  --replicas N, --jobs J, --seed S, --set PATH=VALUE   passed to sim run
  --strict            exit 1 when Daly's value is outside the simulation's CI
  --format table|json
)";

constexpr const char* kLocalizeHelp =
    R"(usage: faultline analyze localize [--machines N] [--pp P] [--faulty K[,K2,...]]
                                   [--phase-s S] [--trials T] [--seed SEED] [--localizers A,B]

Silent-fault localization (ByteRobust §4.2) on N = PP x DP machines: every registered
localization module (policies/module.h; plugins loaded with --plugin included) is run
by its own code, the conversation the byterobust stack holds with it, answered from
ground truth: a replay group fails when it holds a faulty machine, a probe fails
exactly the faulty machines it tests. Each round (one test, its groups concurrently)
takes S seconds. The built-in ones:
  replay: dual-phase replay, m = k PP, n = DP / k (the largest k with m <= n); phase 1
    groups x by floor(x / m), phase 2 by x mod n; evicts the intersections of the
    failing groups (one machine when one is faulty; up to K^2 when K are).
  bisection: adaptive group testing, halving every failing group each round until the
    failing groups are single machines (found ones are tested again alongside).
  stress: one stress test of every machine.
  pairwise: DLRover's node check: an all-gather in pairs of neighbours, then each member
    of a failing pair with a machine that passed; evicts what fails twice.
"exact" rounds add the round that would test the candidates one by one when healthy
machines are among them. With one faulty machine every position 0..N-1 is tried; with
more, T random sets.

options:
  --machines N        machines in the job (default 1200)
  --pp P              pipeline stages; N must be a multiple (default 8)
  --faulty K,...      faulty machines per case (default 1,2)
  --phase-s S         time of one replay round, seconds (default 3600: the dense
                      scenario's diagnosis.replay_s)
  --trials T          random faulty sets per K > 1 (default 2000)
  --seed SEED         seed of those sets (default 1)
  --localizers A,B    only these modules (default: every registered one)
  --format table|json
)";

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

// Options "--name VALUE" of one model. Returns an exit code >= 0 to stop with, or -1.
struct Options {
  std::map<std::string, std::string> values;
  std::string format = "table";
  std::vector<std::string> positional;
  std::vector<std::string> sets;
  bool strict = false;
};

int parse_options(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                  const char* help, Options* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(help, stdout);
      return 0;
    }
    if (a == "--format") {
      if (i + 1 >= args.size() || (args[i + 1] != "table" && args[i + 1] != "json"))
        return usage_error("--format: expected table or json");
      o->format = args[++i];
      continue;
    }
    if (a == "--strict" && std::find(allowed.begin(), allowed.end(), a) != allowed.end()) {
      o->strict = true;
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      if (std::find(allowed.begin(), allowed.end(), a) == allowed.end())
        return usage_error("unknown option " + a);
      if (i + 1 >= args.size()) return usage_error(a + ": expected a value");
      if (a == "--set")
        o->sets.push_back(args[++i]);
      else
        o->values[a] = args[++i];
      continue;
    }
    o->positional.push_back(a);
  }
  return -1;
}

// A required or optional number option. Returns false after printing a usage error.
bool number(const Options& o, const std::string& name, bool required, double def, double lo,
            double* out, bool lo_open = false) {
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

std::string fmt(double x, int prec = 6) {
  std::ostringstream o;
  o << std::setprecision(prec) << x;
  return o.str();
}

std::string pct(double x, int decimals = 3) {
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

int daly(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, {"--mtbf-s", "--restart-s", "--interval-s", "--checkpoint-s"},
                             kDalyHelp, &o);
      rc >= 0)
    return rc;
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
  if (int rc = parse_options(args, {"--mtbf-s", "--checkpoint-s", "--restart-s"}, kYoungHelp, &o);
      rc >= 0)
    return rc;
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
  if (int rc = parse_options(
          args, {"--nodes", "--rate-per-node-day", "--restart-s", "--interval-s", "--write-s"},
          kMetaHelp, &o);
      rc >= 0)
    return rc;
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
  if (int rc = parse_options(args, {"--machines", "--p", "--quantile"}, kStandbyHelp, &o); rc >= 0)
    return rc;
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

struct Tally {
  double sum = 0, max = 0, n = 0;
  void add(double x) {
    sum += x;
    max = std::max(max, x);
    ++n;
  }
  double mean() const { return n > 0 ? sum / n : 0; }
};

int localize(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(
          args,
          {"--machines", "--pp", "--faulty", "--phase-s", "--trials", "--seed", "--localizers"},
          kLocalizeHelp, &o);
      rc >= 0)
    return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double machines, pp, phase_s, trials, seed;
  if (!number(o, "--machines", false, 1200, 1, &machines) || !number(o, "--pp", false, 8, 1, &pp) ||
      !number(o, "--phase-s", false, 3600, 0, &phase_s, true) ||
      !number(o, "--trials", false, 2000, 1, &trials) || !number(o, "--seed", false, 1, 0, &seed))
    return 2;
  const int n_machines = static_cast<int>(machines), n_pp = static_cast<int>(pp);
  if (machines != n_machines || machines > 1e6)
    return usage_error("--machines: expected an integer in [1, 1000000]");
  if (pp != n_pp || n_machines % n_pp != 0)
    return usage_error("--pp: expected an integer dividing --machines (" +
                       std::to_string(n_machines) + ")");
  if (trials != std::floor(trials) || trials > 1e6)
    return usage_error("--trials: expected an integer <= 1000000");
  std::vector<int> ks;
  {
    std::stringstream ss(o.values.count("--faulty") ? o.values["--faulty"] : "1,2");
    std::string part;
    while (std::getline(ss, part, ',')) {
      char* end = nullptr;
      const long k = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end || k < 1 || k > std::min(n_machines, 64))
        return usage_error("--faulty: expected integers in [1, " +
                           std::to_string(std::min(n_machines, 64)) + "]");
      ks.push_back(static_cast<int>(k));
    }
  }
  const int dp = n_machines / n_pp;
  const int k = policies::choose_replay_k(n_pp, dp);
  const policies::ReplayPlan plan = policies::dual_phase_plan(n_pp, dp, k);
  // Every registered localizer, plugins' included, by its own code: the conversation the
  // byterobust stack holds with it, answered from ground truth (a replay group fails when
  // it holds a faulty machine, a probe fails exactly the faulty machines it tests).
  ClusterSpec spec;
  spec.machines = n_machines;
  spec.gpus_per_machine = 1;
  spec.tp = 1;
  spec.pp = n_pp;
  spec.dp = dp;
  const ClusterView view(spec);
  Params params;
  // The localizers' knobs at their defaults, as the byterobust stack (which composes them)
  // declares them.
  Params::resolve(policies::builtin_registry().find("byterobust")->params, {}, &params);
  std::vector<std::string> names = policies::modules().names(policies::ModuleKind::kLocalization);
  if (o.values.count("--localizers")) {
    names.clear();
    std::stringstream ss(o.values["--localizers"]);
    for (std::string x; std::getline(ss, x, ',');) {
      if (!policies::modules().find(policies::ModuleKind::kLocalization, x)) {
        std::string all;
        for (const auto& n : policies::modules().names(policies::ModuleKind::kLocalization))
          all += (all.empty() ? "" : "|") + n;
        return usage_error("--localizers: expected names among " + all + ", got '" + x + "'");
      }
      names.push_back(x);
    }
  }

  ordered_json j;
  j["model"] = "localize";
  j["machines"] = n_machines;
  j["pp"] = n_pp;
  j["dp"] = dp;
  j["replay"] = {{"k", k}, {"m", plan.m}, {"n", plan.n}};
  j["phase_s"] = phase_s;
  j["localizers"] = names;
  j["cases"] = ordered_json::array();
  std::ostringstream t;
  t << "localization among " << n_machines << " machines (PP=" << n_pp << ", DP=" << dp
    << "), one round " << fmt(phase_s) << " s\n";
  t << "dual-phase replay: k=" << k << ", m=" << plan.m
    << " machines per horizontal group, n=" << plan.n << " groups per phase\n\n";
  t << std::setw(8) << "faulty" << std::setw(8) << "sets"
    << "  " << std::left << std::setw(22) << "localizer" << std::right << std::setw(14)
    << "rounds mean" << std::setw(6) << "max" << std::setw(12) << "hours mean" << std::setw(14)
    << "found all %" << std::setw(16) << "healthy evicted" << std::setw(14) << "group tests\n";
  Rng rng(static_cast<std::uint64_t>(seed));
  for (int faulty : ks) {
    std::vector<std::vector<SlotId>> sets;
    if (faulty == 1) {
      for (SlotId s = 0; s < n_machines; ++s) sets.push_back({s});
    } else {
      for (int tr = 0; tr < static_cast<int>(trials); ++tr) {
        std::vector<SlotId> bad;
        while (static_cast<int>(bad.size()) < faulty) {
          const SlotId s = static_cast<SlotId>(rng.below(n_machines));
          if (std::find(bad.begin(), bad.end(), s) == bad.end()) bad.push_back(s);
        }
        sets.push_back(bad);
      }
    }
    ordered_json row_json{{"faulty", faulty}, {"sets", sets.size()}};
    for (const auto& name : names) {
      Tally rounds, healthy, tests, exact;
      int found = 0;
      for (const auto& bad : sets) {
        std::vector<char> is_bad(n_machines, 0);
        for (SlotId s : bad) is_bad[view.machine_in(s)] = 1;
        auto loc = policies::modules().make_localizer(name, params);
        policies::LocalizationStep step = loc->begin("analysis", view);
        int r = 0, group_tests = 0;
        while (auto* test = std::get_if<policies::LocalizationTest>(&step)) {
          ++r;
          if (r > 10000)
            throw std::runtime_error("localizer " + name + " did not conclude in 10000 rounds");
          if (const auto* replay = std::get_if<RunReplay>(test)) {
            ReplayResult out{1, {}};
            for (const auto& g : replay->groups) {
              bool f = false;
              for (MachineId m : g) f |= m >= 0 && m < n_machines && is_bad[m];
              out.group_failed.push_back(f);
            }
            group_tests += static_cast<int>(replay->groups.size());
            step = loc->answer(out, view);
          } else {
            const auto& probe = std::get<RunProbe>(*test);
            ProbeResult out{1, probe.test, {}, false};
            for (MachineId m : probe.machines)
              if (m >= 0 && m < n_machines && is_bad[m]) out.failed.push_back(m);
            // A grouped probe (pairwise): a group fails when it holds a faulty machine; every
            // group takes the same time.
            for (const auto& g : probe.groups) {
              bool f = false;
              for (MachineId m : g) f |= m >= 0 && m < n_machines && is_bad[m];
              out.group_failed.push_back(f);
              out.group_seconds.push_back(1);
            }
            group_tests += static_cast<int>(probe.groups.empty() ? probe.machines.size()
                                                                 : probe.groups.size());
            step = loc->answer(out, view);
          }
        }
        const auto& verdict = std::get<policies::Located>(step);
        int caught = 0;
        for (SlotId s : verdict.evict)
          caught += s >= 0 && s < n_machines && is_bad[view.machine_in(s)];
        const double wrong = static_cast<double>(verdict.evict.size()) - caught;
        found += caught == faulty && !verdict.code_at_fault;
        rounds.add(r);
        healthy.add(wrong);
        tests.add(group_tests);
        // Evicting only the faulty takes one more round that tests the candidates one by
        // one, concurrently, whenever healthy machines are among them.
        exact.add(r + (wrong > 0 ? 1 : 0));
      }
      const double hours = phase_s / 3600;
      t << std::setw(8) << faulty << std::setw(8) << sets.size() << "  " << std::left
        << std::setw(22) << name << std::right << std::fixed << std::setprecision(2)
        << std::setw(14) << rounds.mean() << std::setw(6) << std::setprecision(0) << rounds.max
        << std::setprecision(2) << std::setw(12) << rounds.mean() * hours << std::setprecision(1)
        << std::setw(14) << 100.0 * found / static_cast<double>(sets.size()) << std::setprecision(2)
        << std::setw(16) << healthy.mean() << std::setprecision(1) << std::setw(13) << tests.mean()
        << "\n";
      t.unsetf(std::ios::fixed);
      row_json[name] = {{"rounds_mean", rounds.mean()},
                        {"rounds_max", rounds.max},
                        {"hours_mean", rounds.mean() * hours},
                        {"found_all_share", found / static_cast<double>(sets.size())},
                        {"healthy_evicted_mean", healthy.mean()},
                        {"healthy_evicted_max", healthy.max},
                        {"group_tests_mean", tests.mean()},
                        {"exact_rounds_mean", exact.mean()},
                        {"exact_hours_mean", exact.mean() * hours}};
    }
    j["cases"].push_back(row_json);
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

int check(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, {"--replicas", "--jobs", "--seed", "--set", "--strict"},
                             kCheckHelp, &o);
      rc >= 0)
    return rc;
  if (o.positional.size() > 1) return usage_error("unexpected argument " + o.positional[1]);
  std::string path = o.positional.empty() ? "scenarios/daly-check.json" : o.positional[0];
  if (o.positional.empty() && !std::filesystem::exists(path))
    path = FAULTLINE_SOURCE_DIR "/scenarios/daly-check.json";  // run from outside the checkout
  std::vector<std::string> sets = o.sets;
  if (o.values.count("--seed")) sets.push_back("seed=" + o.values["--seed"]);
  if (o.values.count("--replicas")) sets.push_back("replicas=" + o.values["--replicas"]);
  Registry registry = policies::builtin_registry();
  scenarios::Scenario sc;
  try {
    sc = scenarios::load_scenario(path, sets, registry);
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  // The model's assumptions, checked one by one so the message says what is off.
  std::vector<std::string> off;
  if (sc.policy != "requeue") off.push_back("policy.stack is " + sc.policy + ", expected requeue");
  if (sc.job.image_bytes != 0) off.push_back("job.image_bytes must be 0");
  if (sc.job.init_s != 0) off.push_back("job.init_s must be 0");
  if (sc.job.checkpoint_bytes_per_machine != 0)
    off.push_back("job.checkpoint_bytes_per_machine must be 0");
  if (sc.trace) off.push_back("faults.trace must be absent");
  double rate_per_day = 0;
  for (const auto& c : sc.faults) {
    const std::string at = "faults.categories." + c.name;
    if (c.symptom != scenarios::Symptom::kCrash) off.push_back(at + ".symptom must be crash");
    if (c.weibull_shape != 1) off.push_back(at + ".weibull_shape must be 1 (Poisson)");
    if (c.observe_after_s != 0)
      off.push_back(at + ".observe_after_s must be 0 (instant detection)");
    if (c.persistent) off.push_back(at + ".persistent must be false");
    if (c.scope == scenarios::FaultScope::kRack)
      off.push_back(at + ".scope must be job or machine");
    rate_per_day += c.rate_per_machine_day * sc.cluster.machines;
  }
  if (!(rate_per_day > 0)) off.push_back("the faults' total rate must be > 0");
  if (!off.empty()) {
    std::string all;
    for (const auto& s : off) all += (all.empty() ? "" : "; ") + s;
    std::fprintf(stderr, "faultline: analyze check: %s does not meet Daly's assumptions: %s\n",
                 path.c_str(), all.c_str());
    return 2;
  }
  const double M = 86400.0 / rate_per_day;
  // The recovery a failure can interrupt: the requeue, then the warm-up after the restart.
  const double R = sc.scheduler.requeue_base_s +
                   sc.scheduler.requeue_per_machine_s * sc.cluster.machines +
                   sc.job.restart_warmup_s;
  const double tau = sc.policy_params.get("checkpoint_interval_s");
  const double delta = sc.policy_params.get("checkpoint_write_s");

  std::vector<std::string> run{"sim", "run", path, "--format", "json", "--quiet"};
  for (const char* k : {"--replicas", "--jobs", "--seed"})
    if (o.values.count(k)) {
      run.push_back(k);
      run.push_back(o.values[k]);
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
  nlohmann::json res;
  try {
    res = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: analyze check: unreadable simulation result: %s\n", e.what());
    return 1;
  }
  const double mean = res["ettr"]["mean"], lo = res["ettr"]["ci95"][0], hi = res["ettr"]["ci95"][1];
  const double sd = res["ettr"]["stddev"];
  const double n = res["replicas"];
  const double se = sd / std::sqrt(n);
  const double model = analysis::daly_ettr(M, R, tau, delta);
  const bool agrees = model >= lo && model <= hi;
  // Meta's mapping: N r = 1/M (one "node" failing at the job's rate), u0 = R, D = tau, w = delta.
  const double meta = analysis::meta_ettr(1, 86400.0 / M, R, tau, delta);
  const auto best = analysis::daly_optimal_interval(M, R, delta);

  ordered_json j;
  j["scenario"] = path;
  j["replicas"] = res["replicas"];
  j["seed"] = res["seed"];
  j["inputs"] = {{"mtbf_s", M},
                 {"restart_s", R},
                 {"interval_s", tau},
                 {"checkpoint_s", delta},
                 {"horizon_days", sc.job.horizon_days}};
  j["simulation"] = {{"ettr", mean}, {"ci95", {lo, hi}}, {"stderr", se}};
  j["daly"] = {{"ettr", model},
               {"within_ci95", agrees},
               {"z", se > 0 ? (model - mean) / se : 0.0},
               {"relative_error", (model - mean) / mean}};
  j["meta"] = {{"ettr", meta},
               {"error", meta - mean},
               {"relative_error", (meta - mean) / mean},
               {"error_vs_daly", meta - model}};
  j["optimal_interval_s"] = {{"daly", best.interval_s},
                             {"young", analysis::young_interval(delta, M)},
                             {"meta", analysis::meta_best_interval(1, 86400.0 / M, delta)}};
  std::ostringstream t;
  t << "analyze check: " << path << " (" << res["replicas"].get<long long>() << " replicas, seed "
    << res["seed"].get<long long>() << ")\n";
  t << "  model inputs: M = " << fmt(M) << " s (job MTBF), R = " << fmt(R)
    << " s, tau = " << fmt(tau) << " s, delta = " << fmt(delta) << " s, horizon "
    << fmt(sc.job.horizon_days) << " days\n";
  t << "  simulation          ETTR " << pct(mean) << "  (95% CI " << pct(lo) << " .. " << pct(hi)
    << ", standard error " << pct(se, 4) << ")\n";
  t << "  Daly closed form    ETTR " << pct(model) << "  " << (agrees ? "within" : "OUTSIDE")
    << " the simulation's 95% CI (z = " << std::fixed << std::setprecision(2)
    << (se > 0 ? (model - mean) / se : 0) << ")\n";
  t.unsetf(std::ios::fixed);
  t << "  Meta approximation  ETTR " << pct(meta) << "  error vs simulation " << std::showpos
    << std::fixed << std::setprecision(3) << 100 * (meta - mean) << " points ("
    << 100 * (meta - mean) / mean << "% relative)" << std::noshowpos << "\n";
  t.unsetf(std::ios::fixed);
  t << "  optimal interval:   Daly " << fmt(best.interval_s) << " s, Young "
    << fmt(analysis::young_interval(delta, M)) << " s, Meta "
    << fmt(analysis::meta_best_interval(1, 86400.0 / M, delta)) << " s\n";
  emit(o, j, t.str());
  return o.strict && !agrees ? 1 : 0;
}

}  // namespace

int analyze(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kAnalyzeHelp, stderr);
    return 2;
  }
  const std::string& m = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (m == "-h" || m == "--help" || m == "help") {
    std::fputs(kAnalyzeHelp, stdout);
    return 0;
  }
  if (m == "daly") return daly(rest);
  if (m == "young") return young(rest);
  if (m == "meta-ettr" || m == "meta") return meta(rest);
  if (m == "standby") return standby(rest);
  if (m == "localize") return localize(rest);
  if (m == "check") return check(rest);
  return usage_error("unknown model '" + m +
                     "'; expected daly, young, meta-ettr, standby, localize or check");
}

}  // namespace faultline::cli
