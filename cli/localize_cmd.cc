// `faultline analyze localize`: every registered localization module (plugins' included),
// run by its own code on k faulty machines among N and answered from ground truth: the
// rounds and time each takes and the healthy machines it evicts. Beside analyze_cmd.cc,
// whose option parsing and output (analyze_options.h) it shares.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "cli/analyze_options.h"
#include "policies/api/rng.h"
#include "policies/builtin.h"
#include "policies/localization/localization.h"

namespace faultline::cli {

using nlohmann::ordered_json;

namespace {

using analyze_options::emit;
using analyze_options::fmt;
using analyze_options::number;
using analyze_options::Options;
using analyze_options::parse_options;
using analyze_options::usage_error;

const analyze_options::Model kLocalize = {
    "faultline analyze localize [--machines N] [--pp P] [--faulty K[,K2,...]]\n"
    "                                   [--phase-s S] [--trials T] [--seed SEED] [--localizers "
    "A,B]",
    R"(Silent-fault localization (ByteRobust §4.2) on N = PP x DP machines: every registered
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
more, T random sets.)",
    {{"--machines", "N", "machines in the job (default 1200)"},
     {"--pp", "P", "pipeline stages; N must be a multiple (default 8)"},
     {"--faulty", "K,...", "faulty machines per case (default 1,2)"},
     {"--phase-s", "S",
      "time of one replay round, seconds (default 3600: the dense\nscenario's "
      "diagnosis.replay_s)"},
     {"--trials", "T", "random faulty sets per K > 1 (default 2000)"},
     {"--seed", "SEED", "seed of those sets (default 1)"},
     {"--localizers", "A,B", "only these modules (default: every registered one)"}}};

// A running mean and maximum.
struct Tally {
  double sum = 0, max = 0, n = 0;
  void add(double x) {
    sum += x;
    max = std::max(max, x);
    ++n;
  }
  double mean() const { return n > 0 ? sum / n : 0; }
};

// What the command line asks for, checked.
struct LocalizeArgs {
  Options o;
  int n_machines = 0, n_pp = 0;
  double phase_s = 0, trials = 0, seed = 0;
  std::vector<int> ks;             // --faulty
  std::vector<std::string> names;  // --localizers
};

// --faulty K,... (default 1,2) into c.ks. Returns -1, or 2 after a usage error.
int parse_faulty(const Options& o, LocalizeArgs& c) {
  std::stringstream ss(o.values.count("--faulty") ? o.values.at("--faulty") : "1,2");
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    const long k = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end || k < 1 || k > std::min(c.n_machines, 64))
      return usage_error("--faulty: expected integers in [1, " +
                         std::to_string(std::min(c.n_machines, 64)) + "]");
    c.ks.push_back(static_cast<int>(k));
  }
  return -1;
}

// --localizers A,B (default: every registered one) into c.names. Returns -1, or 2 after a
// usage error.
int parse_localizers(const Options& o, LocalizeArgs& c) {
  const auto kind = policies::ModuleKind::kLocalization;
  c.names = policies::modules().names(kind);
  if (!o.values.count("--localizers")) return -1;
  c.names.clear();
  std::stringstream ss(o.values.at("--localizers"));
  for (std::string x; std::getline(ss, x, ',');) {
    if (!policies::modules().find(kind, x)) {
      std::string all;
      for (const auto& n : policies::modules().names(kind)) all += (all.empty() ? "" : "|") + n;
      return usage_error("--localizers: expected names among " + all + ", got '" + x + "'");
    }
    c.names.push_back(x);
  }
  return -1;
}

// Parses and checks the command line into `c`. Returns -1 to go on, else the exit code (0
// after --help, 2 after a usage error).
int parse_localize_args(const std::vector<std::string>& args, LocalizeArgs& c) {
  Options& o = c.o;
  if (int rc = parse_options(args, kLocalize, &o); rc >= 0) return rc;
  if (!o.positional.empty()) return usage_error("unexpected argument " + o.positional[0]);
  double machines, pp;
  if (!number(o, "--machines", false, 1200, 1, &machines) || !number(o, "--pp", false, 8, 1, &pp) ||
      !number(o, "--phase-s", false, 3600, 0, &c.phase_s, true) ||
      !number(o, "--trials", false, 2000, 1, &c.trials) ||
      !number(o, "--seed", false, 1, 0, &c.seed))
    return 2;
  c.n_machines = static_cast<int>(machines);
  c.n_pp = static_cast<int>(pp);
  if (machines != c.n_machines || machines > 1e6)
    return usage_error("--machines: expected an integer in [1, 1000000]");
  if (pp != c.n_pp || c.n_machines % c.n_pp != 0)
    return usage_error("--pp: expected an integer dividing --machines (" +
                       std::to_string(c.n_machines) + ")");
  if (c.trials != std::floor(c.trials) || c.trials > 1e6)
    return usage_error("--trials: expected an integer <= 1000000");
  if (const int rc = parse_faulty(o, c); rc >= 0) return rc;
  return parse_localizers(o, c);
}

// The faulty sets of one case: with one faulty machine every position 0..N-1, with more
// `trials` random sets of `faulty` distinct machines.
std::vector<std::vector<SlotId>> faulty_sets(const LocalizeArgs& c, int faulty, Rng& rng) {
  std::vector<std::vector<SlotId>> sets;
  if (faulty == 1) {
    for (SlotId s = 0; s < c.n_machines; ++s) sets.push_back({s});
    return sets;
  }
  for (int tr = 0; tr < static_cast<int>(c.trials); ++tr) {
    std::vector<SlotId> bad;
    while (static_cast<int>(bad.size()) < faulty) {
      const SlotId s = static_cast<SlotId>(rng.below(c.n_machines));
      if (std::find(bad.begin(), bad.end(), s) == bad.end()) bad.push_back(s);
    }
    sets.push_back(bad);
  }
  return sets;
}

// Whether a group holds a faulty machine (`is_bad`, by machine).
bool holds_bad(const std::vector<MachineId>& g, const std::vector<char>& is_bad) {
  bool f = false;
  for (MachineId m : g) f |= m >= 0 && m < static_cast<int>(is_bad.size()) && is_bad[m];
  return f;
}

// Answers one test from ground truth: a replay group fails when it holds a faulty machine,
// a probe fails exactly the faulty machines it tests (a grouped probe, pairwise: a group
// fails when it holds one, every group taking the same time). Adds the groups tested to
// `group_tests`; returns the localizer's next step.
policies::LocalizationStep answer(policies::Localizer& loc, const policies::LocalizationTest& test,
                                  const ClusterView& view, const std::vector<char>& is_bad,
                                  int& group_tests) {
  if (const auto* replay = std::get_if<RunReplay>(&test)) {
    ReplayResult out{1, {}};
    for (const auto& g : replay->groups) out.group_failed.push_back(holds_bad(g, is_bad));
    group_tests += static_cast<int>(replay->groups.size());
    return loc.answer(out, view);
  }
  const auto& probe = std::get<RunProbe>(test);
  ProbeResult out{1, probe.test, {}, false};
  for (MachineId m : probe.machines)
    if (m >= 0 && m < static_cast<int>(is_bad.size()) && is_bad[m]) out.failed.push_back(m);
  for (const auto& g : probe.groups) {
    out.group_failed.push_back(holds_bad(g, is_bad));
    out.group_seconds.push_back(1);
  }
  group_tests +=
      static_cast<int>(probe.groups.empty() ? probe.machines.size() : probe.groups.size());
  return loc.answer(out, view);
}

// One module over every faulty set of a case: the figures of its table row.
struct ModuleTally {
  Tally rounds, healthy, tests, exact;
  int found = 0;  // sets where it evicted every faulty machine and blamed no code
};

// Runs module `name` by its own code, the conversation the byterobust stack holds with
// it, on every set of `sets`.
ModuleTally run_module(const std::string& name, const Params& params, const ClusterView& view,
                       const std::vector<std::vector<SlotId>>& sets, int faulty, int n_machines) {
  ModuleTally t;
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
      step = answer(*loc, *test, view, is_bad, group_tests);
    }
    const auto& verdict = std::get<policies::Located>(step);
    int caught = 0;
    for (SlotId s : verdict.evict) caught += s >= 0 && s < n_machines && is_bad[view.machine_in(s)];
    const double wrong = static_cast<double>(verdict.evict.size()) - caught;
    t.found += caught == faulty && !verdict.code_at_fault;
    t.rounds.add(r);
    t.healthy.add(wrong);
    t.tests.add(group_tests);
    // Evicting only the faulty takes one more round that tests the candidates one by
    // one, concurrently, whenever healthy machines are among them.
    t.exact.add(r + (wrong > 0 ? 1 : 0));
  }
  return t;
}

// Appends module `name`'s line of a case (`faulty` machines, `n_sets` sets) to the table
// `t` and its figures to the case's JSON `row_json`.
void add_row(std::ostringstream& t, ordered_json& row_json, const std::string& name, int faulty,
             std::size_t n_sets, const ModuleTally& m, double phase_s) {
  const double hours = phase_s / 3600;
  const double sets = static_cast<double>(n_sets);
  t << std::setw(8) << faulty << std::setw(8) << n_sets << "  " << std::left << std::setw(22)
    << name << std::right << std::fixed << std::setprecision(2) << std::setw(14) << m.rounds.mean()
    << std::setw(6) << std::setprecision(0) << m.rounds.max << std::setprecision(2) << std::setw(12)
    << m.rounds.mean() * hours << std::setprecision(1) << std::setw(14) << 100.0 * m.found / sets
    << std::setprecision(2) << std::setw(16) << m.healthy.mean() << std::setprecision(1)
    << std::setw(13) << m.tests.mean() << "\n";
  t.unsetf(std::ios::fixed);
  row_json[name] = {{"rounds_mean", m.rounds.mean()},
                    {"rounds_max", m.rounds.max},
                    {"hours_mean", m.rounds.mean() * hours},
                    {"found_all_share", m.found / sets},
                    {"healthy_evicted_mean", m.healthy.mean()},
                    {"healthy_evicted_max", m.healthy.max},
                    {"group_tests_mean", m.tests.mean()},
                    {"exact_rounds_mean", m.exact.mean()},
                    {"exact_hours_mean", m.exact.mean() * hours}};
}

}  // namespace

int analyze_localize(const std::vector<std::string>& args) {
  LocalizeArgs c;
  if (const int rc = parse_localize_args(args, c); rc >= 0) return rc;
  const int dp = c.n_machines / c.n_pp;
  const int k = policies::choose_replay_k(c.n_pp, dp);
  const policies::ReplayPlan plan = policies::dual_phase_plan(c.n_pp, dp, k);
  // Every registered localizer, plugins' included, on a cluster of one GPU per machine.
  ClusterSpec spec;
  spec.machines = c.n_machines;
  spec.gpus_per_machine = 1;
  spec.tp = 1;
  spec.pp = c.n_pp;
  spec.dp = dp;
  const ClusterView view(spec);
  Params params;
  // The localizers' knobs at their defaults, as the byterobust stack (which composes them)
  // declares them.
  Params::resolve(policies::builtin_registry().find("byterobust")->params, {}, &params);

  ordered_json j;
  j["model"] = "localize";
  j["machines"] = c.n_machines;
  j["pp"] = c.n_pp;
  j["dp"] = dp;
  j["replay"] = {{"k", k}, {"m", plan.m}, {"n", plan.n}};
  j["phase_s"] = c.phase_s;
  j["localizers"] = c.names;
  j["cases"] = ordered_json::array();
  std::ostringstream t;
  t << "localization among " << c.n_machines << " machines (PP=" << c.n_pp << ", DP=" << dp
    << "), one round " << fmt(c.phase_s) << " s\n";
  t << "dual-phase replay: k=" << k << ", m=" << plan.m
    << " machines per horizontal group, n=" << plan.n << " groups per phase\n\n";
  t << std::setw(8) << "faulty" << std::setw(8) << "sets"
    << "  " << std::left << std::setw(22) << "localizer" << std::right << std::setw(14)
    << "rounds mean" << std::setw(6) << "max" << std::setw(12) << "hours mean" << std::setw(14)
    << "found all %" << std::setw(16) << "healthy evicted" << std::setw(14) << "group tests\n";
  Rng rng(static_cast<std::uint64_t>(c.seed));
  for (int faulty : c.ks) {
    const std::vector<std::vector<SlotId>> sets = faulty_sets(c, faulty, rng);
    ordered_json row_json{{"faulty", faulty}, {"sets", sets.size()}};
    for (const auto& name : c.names)
      add_row(t, row_json, name, faulty, sets.size(),
              run_module(name, params, view, sets, faulty, c.n_machines), c.phase_s);
    j["cases"].push_back(row_json);
  }
  return emit(c.o, j, t.str());
}

}  // namespace faultline::cli
