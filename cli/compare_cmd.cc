// faultline sim compare: several policy stacks on the same faults, side by side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress_bar.h"
#include "policies/builtin.h"
#include "policies/module.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "traces/stats.h"

namespace faultline::cli {

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

// A stack against the baseline on the same replicas: the mean and 95% CI of the per-replica
// ETTR differences (paired), the CI an unpaired comparison of the same replicas would give
// (difference of the means, Student t with 2n - 2 degrees of freedom, pooled standard
// error), and the shares of replicas where the stack's ETTR is above, equal to or below.
nlohmann::json vs_baseline(const std::vector<sim::ReplicaResult>& a,
                           const std::vector<sim::ReplicaResult>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::vector<double> diff, xa, xb;
  std::size_t wins = 0, ties = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff.push_back(a[i].ettr - b[i].ettr);
    xa.push_back(a[i].ettr);
    xb.push_back(b[i].ettr);
    wins += a[i].ettr > b[i].ettr;
    ties += a[i].ettr == b[i].ettr;
  }
  const sim::Summary d = sim::summarize(diff), sa = sim::summarize(xa), sb = sim::summarize(xb);
  const double se = n > 1 ? std::sqrt((sa.stddev * sa.stddev + sb.stddev * sb.stddev) / n) : 0;
  const double half = n > 1 ? traces::student_t95(2 * n - 2) * se : 0;
  const double share = n > 0 ? 1.0 / static_cast<double>(n) : 0;
  nlohmann::json out = {{"replicas", n},
                        {"mean", d.mean},
                        {"ci95", {d.lo, d.hi}},
                        {"unpaired_ci95", {d.mean - half, d.mean + half}},
                        {"wins", static_cast<double>(wins) * share},
                        {"ties", static_cast<double>(ties) * share},
                        {"losses", static_cast<double>(n - wins - ties) * share}};
  // A job of fixed work: the paired difference of the time to train, in days, over the
  // replicas both finished.
  std::vector<double> dt;
  for (std::size_t i = 0; i < n; ++i)
    if (a[i].finished && b[i].finished) dt.push_back((a[i].elapsed_s - b[i].elapsed_s) / 86400);
  if (!dt.empty()) {
    const sim::Summary t = sim::summarize(dt);
    out["time_to_train_days"] = {{"replicas", dt.size()}, {"mean", t.mean}, {"ci95", {t.lo, t.hi}}};
  }
  return out;
}

// Every stack's scenario keeps the fields it does not read; load_compared refuses those
// no stack of the comparison reads.
constexpr scenarios::LoadOptions kDeferUnread{.refuse_unread_fields = false};

// What the command line asks for. After validate_compare, `stacks` holds the stacks, then
// the variants' labels, and `base` is the baseline's index among them.
struct CompareArgs {
  std::string path;
  std::vector<std::string> stacks = {"byterobust", "requeue", "reschedule", "oracle"};
  bool stacks_given = false;
  std::vector<std::pair<std::string, std::string>> variants;  // label, PATH=VALUE+...
  std::string baseline;
  SimFlags f;
  sim::RunOptions opt;
  std::size_t base = 0;
};

// sim compare's options beside the shared ones (flags.h), applied into `c`.
FlagTable compare_table(CompareArgs& c) {
  auto t = command_table(
      "faultline sim compare SCENARIO.json --stacks A,B,... [options]",
      "Runs every policy stack on the same fault histories (replica i of every stack sees the\n"
      "same ground-truth faults: paired comparison) and prints, side by side, ETTR with its\n"
      "95% CI, each stack's paired ETTR difference to the baseline stack (mean and 95% CI of\n"
      "the per-replica differences, beside the wider CI an unpaired comparison of the same\n"
      "replicas would give) and the share of replicas where it beats, ties or loses to the\n"
      "baseline, the unproductive-time breakdown, incidents by resolution mechanism, evictions\n"
      "(true/false against ground truth) and standby-pool exhaustions. On a terminal, a\n"
      "progress bar with the time left.");
  t.add({"--stacks", "A,B,...", "A,B,...",
         "registered stacks (default: byterobust,requeue,reschedule,oracle); a\n"
         "stack may carry parameters, NAME+PARAM=VALUE+...: e.g.\n"
         "byterobust,byterobust+localization=bisection compares two\n"
         "localization modules inside the same stack",
         [&c](const std::string& v) {
           if (split(v).empty()) return std::string("--stacks: expected A,B,...");
           c.stacks = split(v);
           c.stacks_given = true;
           return std::string();
         }});
  t.add({"--variant", "LABEL:PATH=VALUE+PATH=VALUE...", "LABEL:PATH=VALUE[+PATH=VALUE...]",
         "a variant of the scenario (repeatable): its own stack with these\n"
         "overrides, paired with the rest, e.g. --variant wall:faults.clock=wall\n"
         "puts one modelling assumption side by side with the scenario's; with\n"
         "variants and no --stacks the scenario's own stack is the baseline",
         [&c](const std::string& x) {
           const auto colon = x.find(':');
           if (colon == std::string::npos || colon == 0 || x.find('=', colon) == std::string::npos)
             return "--variant: expected LABEL:PATH=VALUE[+PATH=VALUE...], got '" + x + "'";
           c.variants.emplace_back(x.substr(0, colon), x.substr(colon + 1));
           return std::string();
         }});
  t.add({"--baseline", "NAME", "a stack of --stacks",
         "the stack (or variant label) the others are compared with (default:\n"
         "the first)",
         [&c](const std::string& v) {
           if (v.empty()) return std::string("--baseline: expected a stack of --stacks");
           c.baseline = v;
           return std::string();
         }});
  add_sim_flags(t, c.f, {"table", "json"}, "result on stdout as a table (default) or JSON",
                "one sub-directory per stack with result.json and replicas.csv, and\n"
                "compare.json (what --format json prints)");
  t.toggle("--incidents",
           "also write each stack's incidents.csv (as sim run --incidents):\n"
           "the same faults, incident by incident, side by side; needs --out",
           &c.opt.incidents);
  t.toggle("--decisions",
           "also write each stack's decisions.log (as sim run --decisions);\n"
           "needs --out",
           &c.opt.decisions);
  add_sim_switches(t, c.f);
  t.positional(&c.path);
  t.epilog(
      "A stack other than the scenario's runs with its default parameters (and those given\n"
      "after '+'); the scenario's own stack keeps the scenario's parameters.");
  return t;
}

// Parses the command line into `c`. Returns -1 to go on, else the exit code (0 after
// --help, 2 after a usage error).
int parse_compare_args(const std::vector<std::string>& args, CompareArgs& c) {
  return compare_table(c).parse(args);
}

// Checks what the options need of each other; puts the scenario's own stack first when
// variants come without --stacks, appends the variants' labels and finds the baseline.
// Returns -1, or 2 after printing why not.
int validate_compare(CompareArgs& c) {
  if (c.path.empty()) return usage_error("sim compare: expected SCENARIO.json");
  if ((c.opt.incidents || c.opt.decisions) && c.f.out_dir.empty())
    return usage_error(std::string(c.opt.incidents ? "--incidents" : "--decisions") +
                       ": needs --out DIR (the files go into one sub-directory per stack)");
  if (!c.variants.empty() && !c.stacks_given) {
    try {  // the scenario's stack: the baseline of variants without --stacks
      const Registry registry = policies::builtin_registry();
      c.stacks = {
          scenarios::load_scenario(c.path, c.f.scenario_sets(), registry, kDeferUnread).policy};
    } catch (const scenarios::ScenarioError& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      return 2;
    }
  }
  for (const auto& [label, v] : c.variants) {
    if (std::find(c.stacks.begin(), c.stacks.end(), label) != c.stacks.end())
      return usage_error("--variant " + label + ": the label is already a stack or a variant");
    c.stacks.push_back(label);
  }
  if (!c.baseline.empty()) {
    const auto it = std::find(c.stacks.begin(), c.stacks.end(), c.baseline);
    if (it == c.stacks.end())
      return usage_error("--baseline " + c.baseline + ": not one of --stacks or --variant");
    c.base = static_cast<std::size_t>(it - c.stacks.begin());
  }
  return -1;
}

// Appends the overrides of stack `spec`, NAME+PARAM=VALUE+...: the stack, then parameter
// overrides (a stack other than the scenario's own, `own`, starts from its defaults).
// False after printing a malformed parameter.
bool stack_sets(const std::string& spec, const std::string& own, std::vector<std::string>& s2) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string x; std::getline(ss, x, '+');) parts.push_back(x);
  s2.push_back("policy.stack=\"" + parts[0] + "\"");
  if (parts[0] != own) s2.push_back("policy.params={}");
  for (std::size_t k = 1; k < parts.size(); ++k) {
    if (parts[k].find('=') == std::string::npos || parts[k].front() == '=') {
      std::fprintf(stderr, "faultline: --stacks: '%s': expected NAME+PARAM=VALUE, got '%s'\n",
                   spec.c_str(), parts[k].c_str());
      return false;
    }
    s2.push_back("policy.params." + parts[k]);
  }
  return true;
}

// Appends the overrides of a variant, PATH=VALUE+... (it keeps the scenario's own stack and
// parameters, and is paired with the rest: the same seeds, replica by replica). False after
// printing a malformed one.
bool variant_sets(const std::string& label, const std::string& v, std::vector<std::string>& s2) {
  std::stringstream ss(v);
  for (std::string x; std::getline(ss, x, '+');) {
    if (x.find('=') == std::string::npos || x.front() == '=') {
      std::fprintf(stderr, "faultline: --variant %s: expected PATH=VALUE, got '%s'\n",
                   label.c_str(), x.c_str());
      return false;
    }
    s2.push_back(x);
  }
  return true;
}

// Loads one scenario per stack, then one per variant, into `scs`. A field that one of
// them reads is not ignored: only one that none of them reads is refused (the file's own
// stack reads what the file wrote for it). Returns -1, or 2 after printing why one does not
// load.
int load_compared(const CompareArgs& c, const Registry& registry,
                  std::vector<scenarios::Scenario>& scs) {
  const std::vector<std::string> sets = c.f.scenario_sets();
  const std::size_t n_stacks = c.stacks.size() - c.variants.size();
  try {
    const scenarios::Scenario base = scenarios::load_scenario(c.path, sets, registry, kDeferUnread);
    for (std::size_t k = 0; k < n_stacks; ++k) {
      std::vector<std::string> s2 = sets;
      if (!stack_sets(c.stacks[k], base.policy, s2)) return 2;
      scs.push_back(scenarios::load_scenario(c.path, s2, registry, kDeferUnread));
    }
    for (const auto& [label, v] : c.variants) {
      std::vector<std::string> s2 = sets;
      if (!variant_sets(label, v, s2)) return 2;
      scs.push_back(scenarios::load_scenario(c.path, s2, registry, kDeferUnread));
    }
    std::vector<const scenarios::Scenario*> runs;
    for (const auto& sc : scs) runs.push_back(&sc);
    scenarios::refuse_unread_by_all(runs, c.stacks);
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  return -1;
}

// Runs every scenario's replicas in turn under one progress bar, into `all`. Returns -1,
// or 1 after printing why a run failed.
int run_compared(const CompareArgs& c, const std::vector<scenarios::Scenario>& scs,
                 const Registry& registry, std::vector<std::vector<sim::ReplicaResult>>& all) {
  ProgressBar bar(!c.f.quiet, "", c.f.progress);
  try {
    long long total = 0, before = 0;
    for (const auto& sc : scs) total += sc.replicas;
    for (std::size_t k = 0; k < scs.size(); ++k) {
      bar.set_what(c.stacks[k] + " ");
      all.push_back(sim::run_replicas_in_child(scs[k], static_cast<int>(c.f.jobs), c.opt, registry,
                                               [&](long long done) { bar(before + done, total); }));
      before += scs[k].replicas;
    }
  } catch (const faultline::policies::ModuleError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s: %s\n", c.path.c_str(), e.what());
    return 1;
  }
  return -1;
}

// Adds every stack's aggregate, with its paired comparison to the baseline, to
// out["stacks"], and writes its sub-directory of --out DIR.
void add_stacks(const CompareArgs& c, const std::vector<scenarios::Scenario>& scs,
                const std::vector<std::vector<sim::ReplicaResult>>& all, nlohmann::json& out) {
  for (size_t k = 0; k < scs.size(); ++k) {
    nlohmann::json r = sim::aggregate(scs[k], all[k], 0);
    r.erase("wall_s");
    r["label"] = c.stacks[k];
    if (k != c.base) r["vs_baseline"] = vs_baseline(all[k], all[c.base]);
    out["stacks"].push_back(r);
    if (!c.f.out_dir.empty())
      sim::write_out_dir(c.f.out_dir + "/" + c.stacks[k], r, all[k], scs[k]);
  }
}

// `v` with `prec` decimals.
std::string fixed(double v, int prec) {
  std::ostringstream x;
  x << std::fixed << std::setprecision(prec) << v;
  return x.str();
}

// The side-by-side table: a label column, then one column per stack.
struct Columns {
  std::ostringstream& o;
  const nlohmann::json& stacks;  // compare.json's "stacks"
  int width;
  // One line: `label`, then cell(stack) for every stack.
  template <class Cell>
  void row(const std::string& label, Cell cell) {
    o << std::left << std::setw(34) << label << std::right;
    for (const auto& r : stacks) o << std::setw(width) << cell(r);
    o << "\n";
  }
};

// cell(the stack's comparison with the baseline), or "baseline" in the baseline's column.
template <class Cell>
std::string vs(const nlohmann::json& r, Cell cell) {
  return r.contains("vs_baseline") ? cell(r["vs_baseline"]) : std::string("baseline");
}

// The table's rows of ETTR: its CI, the paired difference to the baseline, the time to train.
void ettr_rows(Columns& t, const std::string& baseline) {
  using J = const nlohmann::json&;
  t.row("", [&](J r) { return r["label"].get<std::string>(); });
  t.row("ETTR %", [&](J r) { return fixed(100 * r["ettr"]["mean"].get<double>(), 2); });
  t.row("  95% CI", [&](J r) {
    return fixed(100 * r["ettr"]["ci95"][0].get<double>(), 2) + ".." +
           fixed(100 * r["ettr"]["ci95"][1].get<double>(), 2);
  });
  t.row("  paired diff to " + baseline + ", pts", [&](J r) {
    return vs(r, [&](J v) {
      return fixed(100 * v["mean"].get<double>(), 2) + " +-" +
             fixed(100 * (v["ci95"][1].get<double>() - v["mean"].get<double>()), 2);
    });
  });
  if (t.stacks.front().contains("time_to_train"))
    t.row("time to train, days", [&](J r) {
      const auto& x = r["time_to_train"];
      return x["mean"].is_null() ? std::string("none finished") : fixed(x["mean"].get<double>(), 1);
    });
  if (t.stacks.front().contains("time_to_train"))
    t.row("  paired diff, days", [&](J r) {
      if (!r.contains("vs_baseline")) return std::string("baseline");
      if (!r["vs_baseline"].contains("time_to_train_days")) return std::string("-");
      const auto& x = r["vs_baseline"]["time_to_train_days"];
      return fixed(x["mean"].get<double>(), 2) + " +-" +
             fixed(x["ci95"][1].get<double>() - x["mean"].get<double>(), 2);
    });
  t.row("  unpaired CI would be, pts", [&](J r) {
    return vs(r, [&](J v) {
      return "+-" + fixed(100 * (v["unpaired_ci95"][1].get<double>() - v["mean"].get<double>()), 2);
    });
  });
  t.row("  replicas won/tied/lost %", [&](J r) {
    return vs(r, [&](J v) {
      return fixed(100 * v["wins"].get<double>(), 0) + "/" +
             fixed(100 * v["ties"].get<double>(), 0) + "/" +
             fixed(100 * v["losses"].get<double>(), 0);
    });
  });
}

// The mechanisms of the table's rows: every built-in one, in its order, then the modules' own
// that some stack's result credits, in the names' order.
std::vector<std::string> mechanism_rows(const Columns& t) {
  std::vector<std::string> rows;
  for (Mechanism m : kBuiltinMechanisms) rows.emplace_back(m.name());
  std::set<std::string> own;
  for (const auto& r : t.stacks) {
    const nlohmann::json by = r.value("resolved_by_per_replica", nlohmann::json::object());
    for (const auto& it : by.items())
      if (!is_builtin(Mechanism::named(it.key()))) own.insert(it.key());
  }
  rows.insert(rows.end(), own.begin(), own.end());
  return rows;
}

// The table's rows of where the time went: the unproductive breakdown, incidents by
// mechanism, evictions, fruitless runs, standby exhaustions, remote-checkpoint fallbacks.
void cost_rows(Columns& t) {
  using J = const nlohmann::json&;
  t.o << "unproductive hours per replica\n";
  for (const auto& b : sim::kBuckets) {
    const std::string k = b.name;
    if (k == "productive") continue;
    t.row("  " + k, [&](J r) { return fixed(r["breakdown_s"][k].get<double>() / 3600, 2); });
  }
  t.o << "incidents resolved by (per replica)\n";
  for (const std::string& m : mechanism_rows(t)) {
    t.row("  " + m, [&](J r) { return fixed(r["resolved_by_per_replica"].value(m, 0.0), 1); });
  }
  t.row("incidents per replica",
        [&](J r) { return fixed(r["incidents"]["per_replica"].get<double>(), 1); });
  t.row("evictions true / healthy", [&](J r) {
    return fixed(r["evictions"]["true_per_replica"].get<double>(), 1) + " / " +
           fixed(r["evictions"]["false_per_replica"].get<double>(), 1);
  });
  t.row("  healthy: test false positive",
        [&](J r) { return fixed(r["evictions"]["false_positive_per_replica"].get<double>(), 2); });
  t.row("longest fruitless run (max)",
        [&](J r) { return std::to_string(r["max_fruitless_rounds"].get<int>()); });
  t.row("standby pool exhaustions",
        [&](J r) { return fixed(r["standby_exhaustions_per_replica"].get<double>(), 2); });
  t.row("remote-checkpoint fallbacks",
        [&](J r) { return fixed(r["remote_checkpoint_fallbacks_per_replica"].get<double>(), 2); });
}

// The table of --format table, from what --format json prints.
std::string compare_table(const nlohmann::json& out, const CompareArgs& c) {
  std::ostringstream o;
  o << std::fixed;
  o << "scenario " << out["scenario"].get<std::string>() << ", " << out["replicas"].get<int>()
    << " paired replicas per stack, seed " << out["seed"].get<std::uint64_t>() << "\n\n";
  int width = 24;  // wide enough for the longest stack label
  for (const auto& spec : c.stacks) width = std::max(width, static_cast<int>(spec.size()) + 2);
  Columns t{o, out["stacks"], width};
  ettr_rows(t, c.stacks[c.base]);
  cost_rows(t);
  o << "wall time: " << fixed(out["wall_s"].get<double>(), 2) << " s\n";
  return o.str();
}

}  // namespace

int sim_compare(const std::vector<std::string>& args) {
  CompareArgs c;
  if (const int rc = parse_compare_args(args, c); rc >= 0) return rc;
  if (const int rc = validate_compare(c); rc >= 0) return rc;
  Registry registry = policies::builtin_registry();
  std::vector<scenarios::Scenario> scs;
  if (const int rc = load_compared(c, registry, scs); rc >= 0) return rc;

  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json out;
  out["scenario"] = scs.front().name;
  out["replicas"] = scs.front().replicas;
  out["seed"] = scs.front().seed;
  out["stacks"] = nlohmann::json::array();
  out["baseline"] = c.stacks[c.base];
  std::vector<std::vector<sim::ReplicaResult>> all;
  if (const int rc = run_compared(c, scs, registry, all); rc >= 0) return rc;
  add_stacks(c, scs, all, out);
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::string& out_dir = c.f.out_dir;
  if (!out_dir.empty()) {  // compare.json: what --format json prints
    std::ofstream file(out_dir + "/compare.json");
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "faultline: %s/compare.json: cannot write\n", out_dir.c_str());
      return 1;
    }
  }
  if (c.f.format == "json")
    std::cout << out.dump(2) << "\n";
  else
    std::cout << compare_table(out, c);
  return 0;
}

}  // namespace faultline::cli
