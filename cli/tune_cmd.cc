// `faultline sim tune`: the best value of one scenario field, or the Pareto front of two
// objectives over several, evaluated as sweep points (sim/sweep.h) on common random
// numbers. The one-parameter search is analysis/tune.h, the front analysis/pareto.h.
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "analysis/pareto.h"
#include "analysis/sweep_plan.h"
#include "analysis/tune.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress_bar.h"
#include "cli/sweep_common.h"
#include "policies/builtin.h"
#include "policies/module.h"
#include "sim/costs.h"
#include "sim/sweep.h"

namespace faultline::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kTuneAbout =
    R"(One parameter, one objective: finds the best value of a numeric scenario field, a
coarse grid of --points values over [LO, HI], then --rounds refinements between the best
value's neighbours. Every candidate runs the same replicas with the same seeds, so
candidates are compared pairwise (paired differences), which resolves far smaller
differences than independent runs would. Reports the best value with its 95% CI, the
range of values whose paired difference from the best is not significant, and with
--within X the smallest value whose mean is within X (relative) of the best.

Several parameters, or two objectives: a coarse grid over every parameter (the cartesian
product of --points values of each), then --rounds refinements around the Pareto front
(for one objective, the best point): for each front point and each parameter, the value
halfway to the nearest value of that parameter tried so far on either side, the others
held. With two objectives it reports the front (the candidates no other beats on both
objectives' means), each point with both objectives' means and 95% CIs and the front
points it is statistically indistinguishable from (the paired 95% CIs of both
differences hold 0); with one, the best point and the candidates indistinguishable from it.
)";

constexpr const char* kTuneEpilog = R"(examples:
  faultline sim tune scenarios/byterobust-dense-9600.json --jobs 2 \
      --set policy.params.checkpoint=memory \
      --param policy.params.checkpoint_interval_s=60:3600
  faultline sim tune scenarios/byterobust-dense-9600.json --jobs 2 \
      --set policy.params.checkpoint=memory --set costs.gpu_hour=2 \
      --set costs.spare_machine_hour=16 --objective ettr,cost \
      --param policy.params.standby_pool=0:16 \
      --param policy.params.checkpoint_interval_s=300:3600:log)";

// What the command line of sim tune asks for.
struct TuneArgs : CommonArgs {
  // The first --param and --objective, and --goal: what the one-parameter search reads.
  std::string param, objective = "ettr", goal;
  analysis::TuneRange range;
  std::vector<analysis::ParamAxis> params;             // every --param
  std::vector<std::string> objectives{"ettr"}, goals;  // --objective, --goal split on commas
  long long points = 7, rounds = 3;
  long long budget = 0;  // 0: none
  bool points_given = false;
  double within = -1;  // -1: not asked for
  // One parameter and one objective: the search and output of analysis/tune.h.
  bool single() const { return params.size() == 1 && objectives.size() == 1; }
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) out.push_back(part);
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

// --param KEY=LO:HI[:log]. Returns "", or the usage error.
std::string parse_param(const std::string& value, TuneArgs& c) {
  const std::string* v = &value;
  const auto eq = v->find('=');
  const auto colon = v->find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos)
    return "--param: expected KEY=LO:HI[:log], e.g. policy.params.checkpoint_interval_s=60:3600, "
           "got '" +
           *v + "'";
  analysis::ParamAxis axis;
  axis.key = v->substr(0, eq);
  const std::string lo = v->substr(eq + 1, colon - eq - 1);
  std::string hi = v->substr(colon + 1);
  if (const auto second = hi.find(':'); second != std::string::npos) {
    if (hi.substr(second + 1) != "log")
      return "--param " + *v + ": expected KEY=LO:HI or KEY=LO:HI:log";
    axis.range.log = true;
    hi = hi.substr(0, second);
  }
  if (!parse_double(lo, &axis.range.lo) || !parse_double(hi, &axis.range.hi) ||
      !(axis.range.lo < axis.range.hi))
    return "--param " + *v + ": expected numbers LO < HI";
  if (axis.range.log && !(axis.range.lo > 0)) return "--param " + *v + ": a log scale needs LO > 0";
  long long ilo, ihi;
  axis.range.integer =
      parse_int(lo, LLONG_MIN, LLONG_MAX, &ilo) && parse_int(hi, LLONG_MIN, LLONG_MAX, &ihi);
  for (const auto& p : c.params)
    if (p.key == axis.key) return "--param " + axis.key + " is given twice";
  if (c.params.empty()) {
    c.param = axis.key;
    c.range = axis.range;
  }
  c.params.push_back(axis);
  return "";
}

// --objective M[,M2]: sweep metrics (and the cost metrics). Returns "", or the usage error.
std::string parse_objectives(const std::string& value, TuneArgs& c) {
  const std::string* v = &value;
  const auto& names = sim::metric_names();
  const auto& costs = sim::cost_metric_names();
  c.objectives = split_commas(*v);
  if (c.objectives.size() > 2)
    return "--objective " + *v + ": at most two objectives (a Pareto front of two), got " +
           std::to_string(c.objectives.size());
  for (const auto& m : c.objectives)
    if (std::find(names.begin(), names.end(), m) == names.end() &&
        std::find(costs.begin(), costs.end(), m) == costs.end())
      return "--objective " + *v + ": unknown metric '" + m +
             "' (the metrics of sim sweep --help, or cost, cost_per_trained_day, "
             "goodput_per_cost)";
  if (c.objectives.size() == 2 && c.objectives[0] == c.objectives[1])
    return "--objective " + *v + ": the same metric twice";
  c.objective = c.objectives[0];
  return "";
}

// The candidates of the coarse grid.
std::size_t grid_size(const TuneArgs& c) {
  std::size_t n = 1;
  for (const auto& p : c.params)
    n *= analysis::coarse_grid(p.range, static_cast<int>(c.points)).size();
  return n;
}

// sim tune's options beside the shared ones (flags.h), applied into `c`.
FlagTable tune_table(TuneArgs& c) {
  auto t = command_table(
      "faultline sim tune SCENARIO.json --param KEY=LO:HI [--param ...] [options]", kTuneAbout);
  t.add({"--param", "KEY=LO:HI[:log]",
         "KEY=LO:HI[:log], e.g. policy.params.checkpoint_interval_s=60:3600",
         "a field (a --set path) and its range; whole numbers when LO and\n"
         "HI are written as integers (e.g. policy.params.standby_pool=0:16);\n"
         ":log spreads values evenly in log(x) (LO > 0); repeatable",
         [&c](const std::string& v) { return parse_param(v, c); }});
  t.add({"--objective", "M[,M2]", "one or two sweep metrics, e.g. ettr or ettr,cost",
         "one or two sweep metrics (default: ettr; see sim sweep --help),\n"
         "e.g. ettr,cost; the cost metrics (cost, cost_per_trained_day,\n"
         "goodput_per_cost) need the scenario's costs (--set costs.gpu_hour=2)",
         [&c](const std::string& v) { return parse_objectives(v, c); }});
  t.add({"--goal", "G[,G2]", "max or min for each objective, e.g. max,min",
         "max or min for each objective (default: max for ettr, productive_s\n"
         "and goodput_per_cost, min for the others)",
         [&c](const std::string& v) {
           c.goals = split_commas(v);
           for (const auto& g : c.goals)
             if (g != "max" && g != "min")
               return "--goal: expected max or min for each objective, e.g. max,min, got '" + v +
                      "'";
           c.goal = c.goals[0];
           return std::string();
         }});
  t.add({"--points", "K", "an integer >= 3",
         "values per parameter in the coarse grid (default: 7 with one\n"
         "parameter, 5 with several)",
         [&c](const std::string& v) {
           if (!parse_int(v, 3, 1000, &c.points))
             return std::string("--points: expected an integer >= 3");
           c.points_given = true;
           return std::string();
         }});
  t.add({"--rounds", "R", "an integer >= 0", "refinement rounds (default: 3)",
         [&c](const std::string& v) {
           return parse_int(v, 0, 1000, &c.rounds) ? std::string()
                                                   : "--rounds: expected an integer >= 0";
         }});
  t.add({"--budget", "N", "an integer >= 1 (candidates to evaluate)",
         "evaluate at most N candidates in all (the coarse grid must fit);\n"
         "the round that would pass it is cut, keeping the refinements of\n"
         "the best front points",
         [&c](const std::string& v) {
           return parse_int(v, 1, 1'000'000, &c.budget)
                      ? std::string()
                      : "--budget: expected an integer >= 1 (candidates to evaluate)";
         }});
  t.add({"--within", "X", "a fraction in [0, 1), e.g. 0.001",
         "one parameter, one objective: also report the smallest value within\n"
         "X of the best (e.g. 0.001 = 0.1%), refining around it",
         [&c](const std::string& v) {
           if (!parse_double(v, &c.within) || c.within < 0 || c.within >= 1)
             return std::string("--within: expected a fraction in [0, 1), e.g. 0.001");
           return std::string();
         }});
  add_sim_flags(t, c, {"table", "json"}, "(default: table)",
                "keep and reuse every candidate, so a rerun resumes, and write\n"
                "DIR/tune.json: what --format json prints, each candidate with the\n"
                "round it was evaluated in, and the best or the front after each\n"
                "round; `faultline report DIR` draws a one-parameter tuning");
  add_sim_switches(t, c);
  t.positional(&c.scenario);
  t.epilog(kTuneEpilog);
  return t;
}

// Parses the command line of sim tune into `c`. Returns -1 to go on, else the exit code
// (0 after --help, 2 after a usage error).
int parse_tune_args(const std::vector<std::string>& args, TuneArgs& c) {
  if (const int rc = tune_table(c).parse(args); rc >= 0) return rc;
  if (c.scenario.empty()) return usage_error("sim tune: expected SCENARIO.json");
  if (c.params.empty()) return usage_error("sim tune: expected --param KEY=LO:HI");
  if (!c.goals.empty() && c.goals.size() != c.objectives.size())
    return usage_error("--goal: expected " + std::to_string(c.objectives.size()) +
                       " goal(s), one per objective, got " + std::to_string(c.goals.size()));
  if (c.within >= 0 && !c.single())
    return usage_error("--within: only with one --param and one --objective");
  if (!c.points_given && c.params.size() > 1) c.points = 5;
  if (c.budget > 0 && grid_size(c) > static_cast<std::size_t>(c.budget))
    return usage_error("--budget " + std::to_string(c.budget) + ": the coarse grid alone has " +
                       std::to_string(grid_size(c)) + " candidates (--points " +
                       std::to_string(c.points) + "); raise --budget or lower --points");
  return -1;
}

// Whether objective k is maximized: --goal, else max for ettr, productive_s and
// goodput_per_cost.
bool maximized(const TuneArgs& c, std::size_t k) {
  if (k < c.goals.size()) return c.goals[k] == "max";
  const std::string& m = c.objectives[k];
  return m == "ettr" || m == "productive_s" || m == "goodput_per_cost";
}

// How a value of the tuned field is written: a whole number when the range is.
std::string value_label(const analysis::TuneRange& range, double x) {
  return range.integer ? std::to_string(static_cast<long long>(std::llround(x)))
                       : analysis::format_double(x);
}

// A point's value of `metric` on every replica (its result.json's per_replica). Throws
// std::runtime_error naming the point when it has none or one is not a number.
std::vector<double> objective_values(const json& result, const std::string& metric,
                                     const std::string& point_dir) {
  const json* xs = nullptr;
  if (result.contains("per_replica") && result["per_replica"].contains(metric))
    xs = &result["per_replica"][metric];
  if (!xs || !xs->is_array())
    throw std::runtime_error(point_dir + "/result.json: no per-replica " + metric +
                             " (computed by an older build? tune into a fresh --out)");
  std::vector<double> out;
  for (const auto& x : *xs) {
    if (!x.is_number())
      throw std::runtime_error(point_dir + "/result.json: " + metric + " of replica " +
                               std::to_string(out.size()) +
                               " is not a number (infinite: a replica that trained nothing, or "
                               "costs of 0); choose another objective");
    out.push_back(x.get<double>());
  }
  return out;
}

// The search of sim tune: a coarse grid, then refinement rounds. Every candidate is a sweep
// point of one store: the same seeds, and a rerun with the same --out reuses what it
// already computed.
struct TuneSearch {
  const TuneArgs& c;
  const sim::SweepSpec& spec;
  const Registry& registry;
  const sim::SweepStore& store;
  analysis::Tuner& tuner;
  // The tuning trace written to --out DIR/tune.json: the round each value was first
  // evaluated in, and the best value after each round.
  std::map<double, int> round_of{};
  ordered_json trace = ordered_json::array();

  // Evaluates the values `xs` in round `round` and adds them to the tuner.
  void evaluate(const std::vector<double>& xs, int round) {
    std::vector<analysis::Assignment> assigns;
    for (double x : xs) assigns.push_back({{c.param, value_label(c.range, x)}});
    const auto pts = sim::plan_points(spec, assigns, registry);
    ProgressBar bar(!c.quiet, "round " + std::to_string(round) + " ", c.progress);
    sim::ExecOptions opt;
    opt.jobs = static_cast<int>(c.jobs);
    opt.on_progress = [&](long long d, long long t) { bar(d, t); };
    const auto results = sim::run_points(pts, registry, store, opt);
    for (size_t i = 0; i < xs.size(); ++i) {
      analysis::Candidate cand;
      cand.x = xs[i];
      cand.per_replica = objective_values(results[i], c.objective, store.point_dir(pts[i]));
      round_of.emplace(xs[i], round);
      tuner.add(std::move(cand));
    }
    const auto& b = tuner.candidates()[tuner.best()];
    const auto bci = b.ci();
    trace.push_back({{"round", round},
                     {"values", xs},
                     {"best", {{"value", b.x}, {"mean", bci.mean}, {"ci95", {bci.lo, bci.hi}}}}});
  }
  // The grid, then at most --rounds refinements (fewer when there is nothing to refine, or
  // when --budget is spent: the round that would pass it is cut to what is left).
  void run() {
    long long evaluated = 0;
    auto xs = tuner.first();
    for (int round = 0; round <= c.rounds && !xs.empty(); ++round) {
      if (round > 0) xs = tuner.next();
      if (c.budget > 0 && evaluated + static_cast<long long>(xs.size()) > c.budget)
        xs.resize(static_cast<std::size_t>(std::max(0LL, c.budget - evaluated)));
      if (xs.empty()) break;
      evaluate(xs, round);
      evaluated += static_cast<long long>(xs.size());
    }
  }
};

// Every candidate as a row of tune.json: its mean and CI, and its paired difference to the
// best; widens [ind_lo, ind_hi] to the values indistinguishable from the best.
ordered_json candidate_rows(const TuneSearch& s, double& ind_lo, double& ind_hi) {
  const auto& cs = s.tuner.candidates();
  const size_t best = s.tuner.best();
  ordered_json rows = ordered_json::array();
  for (const auto& cand : cs) {
    const auto ci = cand.ci();
    const auto d = analysis::paired_difference(cand.per_replica, cs[best].per_replica);
    const bool same = d.lo <= 0 && d.hi >= 0;
    if (same) {
      ind_lo = std::min(ind_lo, cand.x);
      ind_hi = std::max(ind_hi, cand.x);
    }
    rows.push_back({{"value", cand.x},
                    {"round", s.round_of.count(cand.x) ? s.round_of.at(cand.x) : 0},
                    {"mean", ci.mean},
                    {"ci95", {ci.lo, ci.hi}},
                    {"diff_vs_best", {{"mean", d.mean}, {"ci95", {d.lo, d.hi}}}},
                    {"indistinguishable_from_best", same}});
  }
  return rows;
}

// tune.json: what --format json prints.
ordered_json tune_json(const TuneSearch& s, bool maximize) {
  const TuneArgs& c = s.c;
  const auto& cs = s.tuner.candidates();
  const size_t best = s.tuner.best();
  const analysis::MeanCi bci = cs[best].ci();
  ordered_json out;
  out["scenario"] = c.scenario;
  out["param"] = c.param;
  out["range"] = {c.range.lo, c.range.hi};
  out["integer"] = c.range.integer;
  if (c.range.log) out["scale"] = "log";
  out["objective"] = c.objective;
  out["goal"] = maximize ? "max" : "min";
  out["replicas"] = cs[best].per_replica.size();
  if (c.budget > 0) out["budget"] = c.budget;
  out["best"] = {{"value", cs[best].x}, {"mean", bci.mean}, {"ci95", {bci.lo, bci.hi}}};
  double ind_lo = cs[best].x, ind_hi = cs[best].x;
  const ordered_json rows = candidate_rows(s, ind_lo, ind_hi);
  out["indistinguishable_range"] = {ind_lo, ind_hi};
  if (c.within >= 0) {
    const size_t w = s.tuner.smallest_within();
    const auto wci = cs[w].ci();
    out["within"] = {
        {"fraction", c.within}, {"value", cs[w].x}, {"mean", wci.mean}, {"ci95", {wci.lo, wci.hi}}};
  }
  out["candidates"] = rows;
  out["rounds"] = s.trace;
  return out;
}

// The table of --format table, from tune.json: one line per candidate, then the best, the
// values indistinguishable from it and, with --within, the smallest value within it.
std::string tune_table(const TuneSearch& s, bool maximize, const ordered_json& out) {
  const TuneArgs& c = s.c;
  const auto& cs = s.tuner.candidates();
  const size_t best = s.tuner.best();
  const analysis::MeanCi bci = cs[best].ci();
  auto label = [&](double x) { return value_label(c.range, x); };
  const bool pct = c.objective == "ettr";
  const double k = pct ? 100 : 1;
  const std::string unit = pct ? "%" : "";
  std::ostringstream o;
  o << std::fixed;
  o << "tuning " << c.param << " in [" << label(c.range.lo) << ", " << label(c.range.hi) << "] for "
    << (maximize ? "max " : "min ") << c.objective << ", " << cs[best].per_replica.size()
    << " replicas per value (paired seeds)\n\n";
  const int prec = pct ? 4 : 3;
  auto num = [&](double x, bool sign = false) {
    char buf[64];
    std::snprintf(buf, sizeof buf, sign ? "%+.*f" : "%.*f", prec, k * x);
    return std::string(buf);
  };
  char line[256];
  std::snprintf(line, sizeof line, "%14s  %12s  %-22s  %s\n", "value",
                (c.objective + (pct ? " %" : "")).c_str(), "95% CI",
                "paired difference vs best, 95% CI");
  o << line;
  for (size_t i = 0; i < cs.size(); ++i) {
    const auto& r = out["candidates"][i];
    const std::string ci = "[" + num(r["ci95"][0]) + ", " + num(r["ci95"][1]) + "]";
    const std::string diff = num(r["diff_vs_best"]["mean"], true) + " [" +
                             num(r["diff_vs_best"]["ci95"][0], true) + ", " +
                             num(r["diff_vs_best"]["ci95"][1], true) + "]";
    std::snprintf(line, sizeof line, "%14s  %12s  %-22s  %s%s\n", label(cs[i].x).c_str(),
                  num(r["mean"]).c_str(), ci.c_str(), diff.c_str(),
                  i == best                                      ? "  <- best"
                  : r["indistinguishable_from_best"].get<bool>() ? "  ~ best"
                                                                 : "");
    o << line;
  }
  o << std::setprecision(pct ? 4 : 3);
  o << "\nbest " << c.param << " = " << label(cs[best].x) << ": " << c.objective << " "
    << k * bci.mean << unit << " (95% CI " << k * bci.lo << unit << " .. " << k * bci.hi << unit
    << ")\n";
  const auto& ind = out["indistinguishable_range"];
  o << "values not distinguishable from the best (paired 95% CI of the difference holds 0): "
    << label(ind[0].get<double>()) << " .. " << label(ind[1].get<double>()) << "\n";
  if (c.within >= 0) {
    const auto& w = out["within"];
    o << "smallest " << c.param << " within " << std::setprecision(3) << 100 * c.within
      << "% of the best: " << label(w["value"].get<double>()) << std::setprecision(pct ? 4 : 3)
      << " (" << c.objective << " " << k * w["mean"].get<double>() << unit << ")\n";
  }
  return o.str();
}

// ---------------------------------------------------------------- several parameters or
// two objectives (analysis/pareto.h)

// The search: the grid, then refinement rounds around the front. Every candidate is a
// sweep point of one store, as in TuneSearch.
struct MultiSearch {
  const TuneArgs& c;
  const sim::SweepSpec& spec;
  const Registry& registry;
  const sim::SweepStore& store;
  analysis::MultiTuner& tuner;
  std::map<std::vector<double>, int> round_of{};
  ordered_json trace = ordered_json::array();
  long long evaluated = 0;
  std::string stopped_by = "rounds";  // rounds | converged | budget

  analysis::Assignment assignment(const std::vector<double>& x) const {
    analysis::Assignment a;
    for (size_t p = 0; p < c.params.size(); ++p)
      a.emplace_back(c.params[p].key, value_label(c.params[p].range, x[p]));
    return a;
  }
  // A point's parameters as JSON: whole numbers for an integer range.
  ordered_json params_json(const std::vector<double>& x) const {
    ordered_json o = ordered_json::object();
    for (size_t p = 0; p < c.params.size(); ++p)
      if (c.params[p].range.integer)
        o[c.params[p].key] = std::llround(x[p]);
      else
        o[c.params[p].key] = x[p];
    return o;
  }
  void evaluate(const std::vector<std::vector<double>>& xs, int round) {
    std::vector<analysis::Assignment> assigns;
    for (const auto& x : xs) assigns.push_back(assignment(x));
    const auto pts = sim::plan_points(spec, assigns, registry);
    ProgressBar bar(!c.quiet, "round " + std::to_string(round) + " ");
    sim::ExecOptions opt;
    opt.jobs = static_cast<int>(c.jobs);
    opt.on_progress = [&](long long d, long long t) { bar(d, t); };
    const auto results = sim::run_points(pts, registry, store, opt);
    for (size_t i = 0; i < xs.size(); ++i) {
      analysis::Evaluated e;
      e.x = xs[i];
      for (const auto& m : c.objectives)
        e.per_replica.push_back(objective_values(results[i], m, store.point_dir(pts[i])));
      round_of.emplace(xs[i], round);
      tuner.add(std::move(e));
    }
    evaluated += static_cast<long long>(xs.size());
    ordered_json values = ordered_json::array(), front = ordered_json::array();
    for (const auto& x : xs) values.push_back(params_json(x));
    for (size_t f : tuner.front()) front.push_back(params_json(tuner.candidates()[f].x));
    trace.push_back({{"round", round}, {"evaluated", values}, {"front", front}});
  }
  void run() {
    evaluate(tuner.first(), 0);
    for (int round = 1; round <= c.rounds; ++round) {
      auto xs = tuner.next();
      if (xs.empty()) {
        stopped_by = "converged";
        return;
      }
      if (c.budget > 0 && evaluated + static_cast<long long>(xs.size()) > c.budget) {
        xs.resize(static_cast<size_t>(c.budget - evaluated));
        stopped_by = "budget";
        if (!xs.empty()) evaluate(xs, round);
        return;
      }
      evaluate(xs, round);
    }
  }
};

// Objective k of candidate e: mean and 95% CI.
ordered_json objective_json(const analysis::Evaluated& e, size_t k) {
  const analysis::MeanCi m = e.ci(k);
  return {{"mean", m.mean}, {"ci95", {m.lo, m.hi}}};
}

ordered_json objectives_json(const MultiSearch& s, const analysis::Evaluated& e) {
  ordered_json o = ordered_json::object();
  for (size_t k = 0; k < s.c.objectives.size(); ++k) o[s.c.objectives[k]] = objective_json(e, k);
  return o;
}

// tune.json of the multi search: the parameters and objectives, the front (two objectives)
// or the best (one), every candidate, the trace.
ordered_json multi_json(const MultiSearch& s) {
  const TuneArgs& c = s.c;
  const auto& cs = s.tuner.candidates();
  const auto front = s.tuner.front();
  ordered_json out;
  out["scenario"] = c.scenario;
  ordered_json params = ordered_json::array(), objs = ordered_json::array();
  for (const auto& p : c.params)
    params.push_back({{"key", p.key},
                      {"range", {p.range.lo, p.range.hi}},
                      {"integer", p.range.integer},
                      {"scale", p.range.log ? "log" : "linear"}});
  for (size_t k = 0; k < c.objectives.size(); ++k)
    objs.push_back({{"metric", c.objectives[k]}, {"goal", maximized(c, k) ? "max" : "min"}});
  out["params"] = params;
  out["objectives"] = objs;
  out["replicas"] = cs.empty() ? 0 : cs[0].per_replica[0].size();
  out["search"] = {{"points", c.points},
                   {"rounds", c.rounds},
                   {"budget", c.budget > 0 ? ordered_json(c.budget) : ordered_json(nullptr)},
                   {"evaluations", cs.size()},
                   {"stopped_by", s.stopped_by}};
  std::vector<bool> on_front(cs.size(), false);
  for (size_t f : front) on_front[f] = true;
  if (c.objectives.size() == 2) {
    ordered_json fr = ordered_json::array();
    for (size_t i = 0; i < front.size(); ++i) {
      ordered_json same = ordered_json::array();
      for (size_t j = 0; j < front.size(); ++j)
        if (j != i && analysis::indistinguishable(cs[front[i]], cs[front[j]])) same.push_back(j);
      fr.push_back({{"params", s.params_json(cs[front[i]].x)},
                    {"objectives", objectives_json(s, cs[front[i]])},
                    {"indistinguishable_from", same}});
    }
    out["front"] = fr;
  } else {
    out["best"] = {{"params", s.params_json(cs[front[0]].x)},
                   {"objectives", objectives_json(s, cs[front[0]])}};
  }
  ordered_json rows = ordered_json::array();
  for (size_t i = 0; i < cs.size(); ++i) {
    ordered_json r = {{"params", s.params_json(cs[i].x)},
                      {"round", s.round_of.count(cs[i].x) ? s.round_of.at(cs[i].x) : 0},
                      {"objectives", objectives_json(s, cs[i])}};
    if (c.objectives.size() == 2) {
      r["on_front"] = on_front[i];
    } else {
      const auto d = analysis::paired_difference(cs[i].per_replica[0], cs[front[0]].per_replica[0]);
      r["diff_vs_best"] = {{"mean", d.mean}, {"ci95", {d.lo, d.hi}}};
      r["indistinguishable_from_best"] = d.lo <= 0 && d.hi >= 0;
    }
    rows.push_back(r);
  }
  out["candidates"] = rows;
  out["rounds"] = s.trace;
  return out;
}

// A mean and CI as the table writes them: ETTR in %, others with 4 significant digits (whole
// numbers from 1e4 up).
std::string table_num(const std::string& metric, double x) {
  char buf[64];
  if (metric == "ettr")
    std::snprintf(buf, sizeof buf, "%.4f", 100 * x);
  else
    std::snprintf(buf, sizeof buf, std::fabs(x) >= 1e4 ? "%.0f" : "%.4g", x);
  return buf;
}

// The table of --format table, from multi_json: the front (two objectives) or every
// candidate against the best (one).
std::string multi_table(const MultiSearch& s, const ordered_json& out) {
  const TuneArgs& c = s.c;
  std::ostringstream o;
  o << "tuning ";
  for (size_t p = 0; p < c.params.size(); ++p)
    o << (p ? ", " : "") << c.params[p].key << " in ["
      << value_label(c.params[p].range, c.params[p].range.lo) << ", "
      << value_label(c.params[p].range, c.params[p].range.hi) << "]"
      << (c.params[p].range.log ? " (log)" : "");
  o << " for ";
  for (size_t k = 0; k < c.objectives.size(); ++k)
    o << (k ? ", " : "") << (maximized(c, k) ? "max " : "min ") << c.objectives[k];
  o << "; " << out["replicas"].get<size_t>() << " replicas per point (paired seeds), "
    << out["search"]["evaluations"].get<size_t>() << " points evaluated (stopped by "
    << s.stopped_by << ")\n\n";
  const bool two = c.objectives.size() == 2;
  const ordered_json& rows = two ? out["front"] : out["candidates"];
  if (two)
    o << "Pareto front: " << rows.size() << " points, best " << c.objectives[0]
      << " first; ~ lists the front points (#) each is not distinguishable from (the paired 95% "
         "CIs of both differences hold 0)\n";
  std::vector<std::string> head{"#"};
  for (const auto& p : c.params) head.push_back(p.key.substr(p.key.rfind('.') + 1));
  for (const auto& m : c.objectives) {
    head.push_back(m + (m == "ettr" ? " %" : ""));
    head.push_back("95% CI");
  }
  head.push_back(two ? "~" : "paired difference vs best, 95% CI");
  std::vector<std::vector<std::string>> cells{head};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    std::vector<std::string> row{std::to_string(i + 1)};
    for (const auto& p : c.params) row.push_back(r["params"][p.key].dump());
    for (const auto& m : c.objectives) {
      const auto& x = r["objectives"][m];
      row.push_back(table_num(m, x["mean"].get<double>()));
      row.push_back("[" + table_num(m, x["ci95"][0].get<double>()) + ", " +
                    table_num(m, x["ci95"][1].get<double>()) + "]");
    }
    std::string last;
    if (two) {
      for (const auto& j : r["indistinguishable_from"])
        last += (last.empty() ? "" : " ") + std::to_string(j.get<size_t>() + 1);
    } else {
      const auto& d = r["diff_vs_best"];
      const std::string& m = c.objectives[0];
      last = table_num(m, d["mean"].get<double>()) + " [" +
             table_num(m, d["ci95"][0].get<double>()) + ", " +
             table_num(m, d["ci95"][1].get<double>()) + "]" +
             (r["indistinguishable_from_best"].get<bool>() ? "  ~ best" : "");
    }
    row.push_back(last);
    cells.push_back(row);
  }
  std::vector<size_t> width(head.size(), 0);
  for (const auto& row : cells)
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  for (const auto& row : cells) {
    for (size_t k = 0; k < row.size(); ++k)
      o << (k ? "  " : "") << std::setw(static_cast<int>(width[k])) << row[k];
    o << "\n";
  }
  if (!two) {
    const auto& b = out["best"];
    o << "\nbest:";
    for (const auto& p : c.params) o << " " << p.key << "=" << b["params"][p.key].dump();
    o << " (" << c.objectives[0] << " "
      << table_num(c.objectives[0], b["objectives"][c.objectives[0]]["mean"].get<double>())
      << (c.objectives[0] == "ettr" ? "%" : "") << ")\n";
  }
  return o.str();
}

// Writes `out` to --out DIR/tune.json when a DIR was given, and prints the --format: the
// JSON, or `table`. Throws std::runtime_error when the file cannot be written.
void emit(const TuneArgs& c, const ordered_json& out, const std::string& table) {
  if (!c.out_dir.empty()) {
    std::ofstream f(fs::path(c.out_dir) / "tune.json", std::ios::binary | std::ios::trunc);
    f << out.dump(2) << "\n";
    if (!f) throw std::runtime_error(c.out_dir + "/tune.json: cannot write");
  }
  if (c.format == "json")
    std::cout << out.dump(2) << "\n";
  else
    std::cout << table;
}

// Runs the multi search and prints (and with --out writes) its result.
void run_multi(const TuneArgs& c, const sim::SweepSpec& spec, const Registry& registry,
               const sim::SweepStore& store) {
  std::vector<analysis::Objective> objs;
  for (size_t k = 0; k < c.objectives.size(); ++k)
    objs.push_back({c.objectives[k], maximized(c, k)});
  analysis::MultiTuner tuner(c.params, objs, static_cast<int>(c.points));
  MultiSearch search{c, spec, registry, store, tuner};
  search.run();
  const ordered_json out = multi_json(search);
  emit(c, out, multi_table(search, out));
}

// The first --param that is a module choice of the scenario's stack, refused: its values are
// module names, not a range of numbers (an index range would tune the registration order).
// "" when none is.
std::string choice_param(const TuneArgs& c, const scenarios::Scenario& sc,
                         const Registry& registry) {
  const PolicyInfo* info = registry.find(sc.policy);
  const std::string prefix = "policy.params.";
  for (const auto& p : c.params) {
    if (!info || p.key.rfind(prefix, 0) != 0) continue;
    const ParamSpec* spec = info->find_param(p.key.substr(prefix.size()));
    if (!spec || spec->choices.empty()) continue;
    std::string all;
    for (const auto& m : spec->choices) all += (all.empty() ? "" : ",") + m;
    return "--param " + p.key + ": expected a numeric parameter, got a module choice (" + all +
           "): compare its modules with sim sweep --grid " + p.key + "=" + all;
  }
  return "";
}

// Reads and validates the base scenario (make_plan fills spec's scenario text), the ranges'
// ends (every parameter at LO, then every one at HI) and that a cost objective has costs.
// Returns -1, or 2 after printing why not; throws on other failures.
int check_tune_scenario(const TuneArgs& c, sim::SweepSpec& spec, const Registry& registry) {
  try {
    (void)sim::make_plan(spec, registry);
    analysis::Assignment lo, hi;
    for (const auto& p : c.params) {
      lo.emplace_back(p.key, value_label(p.range, p.range.lo));
      hi.emplace_back(p.key, value_label(p.range, p.range.hi));
    }
    const auto ends = sim::plan_points(spec, {lo, hi}, registry);
    if (const std::string why = choice_param(c, ends[0].scenario, registry); !why.empty()) {
      std::fprintf(stderr, "faultline: %s\n", why.c_str());
      return 2;
    }
    const auto& costs = sim::cost_metric_names();
    for (const auto& m : c.objectives)
      if (std::find(costs.begin(), costs.end(), m) != costs.end() && !ends[0].scenario.costs) {
        std::fprintf(stderr,
                     "faultline: --objective %s: %s has no costs (add a costs object, or --set "
                     "costs.gpu_hour=PRICE and/or costs.spare_machine_hour, costs.delay_day)\n",
                     m.c_str(), c.scenario.c_str());
        return 2;
      }
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  return -1;
}

}  // namespace

int sim_tune(const std::vector<std::string>& args) {
  TuneArgs c;
  if (const int rc = parse_tune_args(args, c); rc >= 0) return rc;
  const bool maximize = maximized(c, 0);

  Registry registry = policies::builtin_registry();
  sim::SweepSpec spec = make_spec(c);
  analysis::Tuner tuner(c.range, static_cast<int>(c.points), maximize, c.within);
  return run_reporting_errors([&] {
    if (const int rc = check_tune_scenario(c, spec, registry); rc >= 0) return rc;
    std::unique_ptr<TempDir> tmp;
    if (c.out_dir.empty()) tmp = std::make_unique<TempDir>();
    sim::SweepStore store(tmp ? tmp->path() : c.out_dir);
    if (!c.single()) {
      run_multi(c, spec, registry, store);
      return 0;
    }
    TuneSearch search{c, spec, registry, store, tuner};
    search.run();

    const ordered_json out = tune_json(search, maximize);
    emit(c, out, tune_table(search, maximize, out));
    return 0;
  });
}

}  // namespace faultline::cli
