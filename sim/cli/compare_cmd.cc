// faultline sim compare: several policy stacks on the same faults, side by side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "policies/builtin.h"
#include "sim/cli/commands.h"
#include "sim/cli/flags.h"
#include "sim/cli/progress_bar.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "traces/stats.h"

namespace faultline::cli {

namespace {

constexpr const char* kHelp =
    R"(usage: faultline sim compare SCENARIO.json --stacks A,B,... [options]

Runs every policy stack on the same fault histories (replica i of every stack sees the
same ground-truth faults: paired comparison) and prints, side by side, ETTR with its
95% CI, each stack's paired ETTR difference to the baseline stack (mean and 95% CI of
the per-replica differences, beside the wider CI an unpaired comparison of the same
replicas would give) and the share of replicas where it beats, ties or loses to the
baseline, the unproductive-time breakdown, incidents by resolution mechanism, evictions
(true/false against ground truth) and standby-pool exhaustions. On a terminal, a
progress bar with the time left.

options:
  --stacks A,B,...    registered stacks (default: byterobust,requeue,reschedule,oracle); a
                      stack may carry parameters, NAME+PARAM=VALUE+...: e.g.
                      byterobust,byterobust+localization=bisection compares two
                      localization modules inside the same stack
  --variant LABEL:PATH=VALUE+PATH=VALUE...
                      a variant of the scenario (repeatable): its own stack with these
                      overrides, paired with the rest, e.g. --variant wall:faults.clock=wall
                      puts one modelling assumption side by side with the scenario's; with
                      variants and no --stacks the scenario's own stack is the baseline
  --baseline NAME     the stack (or variant label) the others are compared with (default:
                      the first)
  --replicas N        replicas per stack (default: the scenario's)
  --jobs J            parallel replica processes (default: 1)
  --seed S            scenario seed
  --set PATH=VALUE    scenario override, repeatable (as in sim run)
  --format table|json
  --quiet             no progress bar
  --allow-unused      run even if a policy parameter is set that the stack does not read
                      (with its module choices); refused otherwise, naming when it is read
  --out DIR           one sub-directory per stack with result.json and replicas.csv, and
                      compare.json (what --format json prints)
  --incidents         also write each stack's incidents.csv (as sim run --incidents):
                      the same faults, incident by incident, side by side; needs --out
  --decisions         also write each stack's decisions.log (as sim run --decisions);
                      needs --out
  -h, --help          this text

A stack other than the scenario's runs with its default parameters (and those given
after '+'); the scenario's own stack keeps the scenario's parameters.
)";

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

}  // namespace

int sim_compare(const std::vector<std::string>& args) {
  std::string path;
  std::vector<std::string> stacks = {"byterobust", "requeue", "reschedule", "oracle"};
  bool stacks_given = false;
  std::vector<std::pair<std::string, std::string>> variants;  // label, PATH=VALUE+...
  std::string baseline;
  SimFlags f;
  sim::RunOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (const int r = sim_flag(args, i, f, {"table", "json"})) {
      if (r < 0) return 2;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--baseline") {
      if (i + 1 >= args.size() || args[i + 1].empty())
        return usage_error("--baseline: expected a stack of --stacks");
      baseline = args[++i];
    } else if (a == "--incidents") {
      opt.incidents = true;
    } else if (a == "--decisions") {
      opt.decisions = true;
    } else if (a == "--stacks") {
      if (i + 1 >= args.size() || split(args[i + 1]).empty())
        return usage_error("--stacks: expected A,B,...");
      stacks = split(args[++i]);
      stacks_given = true;
    } else if (a == "--variant") {
      const std::string v = i + 1 < args.size() ? args[i + 1] : "";
      const auto colon = v.find(':');
      if (colon == std::string::npos || colon == 0 || v.find('=', colon) == std::string::npos)
        return usage_error("--variant: expected LABEL:PATH=VALUE[+PATH=VALUE...], got '" + v + "'");
      variants.emplace_back(v.substr(0, colon), v.substr(colon + 1));
      ++i;
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option " + a);
    } else if (path.empty()) {
      path = a;
    } else {
      return usage_error("unexpected argument " + a);
    }
  }
  if (path.empty()) return usage_error("sim compare: expected SCENARIO.json");
  if ((opt.incidents || opt.decisions) && f.out_dir.empty())
    return usage_error(std::string(opt.incidents ? "--incidents" : "--decisions") +
                       ": needs --out DIR (the files go into one sub-directory per stack)");
  const std::vector<std::string> sets = f.scenario_sets();
  std::string own_stack;  // the scenario's stack: the baseline of variants without --stacks
  if (!variants.empty() && !stacks_given) {
    try {
      own_stack = scenarios::load_scenario(path, sets, policies::builtin_registry()).policy;
    } catch (const scenarios::ScenarioError& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      return 2;
    }
    stacks = {own_stack};
  }
  const std::size_t n_stacks = stacks.size();
  for (const auto& [label, v] : variants) {
    if (std::find(stacks.begin(), stacks.end(), label) != stacks.end())
      return usage_error("--variant " + label + ": the label is already a stack or a variant");
    stacks.push_back(label);
  }
  std::size_t base = 0;
  if (!baseline.empty()) {
    const auto it = std::find(stacks.begin(), stacks.end(), baseline);
    if (it == stacks.end())
      return usage_error("--baseline " + baseline + ": not one of --stacks or --variant");
    base = static_cast<std::size_t>(it - stacks.begin());
  }
  const std::string& format = f.format;
  const std::string& out_dir = f.out_dir;
  const long long jobs = f.jobs;
  Registry registry = policies::builtin_registry();
  std::vector<scenarios::Scenario> scs;
  try {
    const scenarios::Scenario base = scenarios::load_scenario(path, sets, registry);
    for (std::size_t k = 0; k < n_stacks; ++k) {
      const std::string& spec = stacks[k];
      // NAME+PARAM=VALUE+...: the stack, then parameter overrides.
      std::vector<std::string> parts;
      std::stringstream ss(spec);
      for (std::string x; std::getline(ss, x, '+');) parts.push_back(x);
      std::vector<std::string> s2 = sets;
      s2.push_back("policy.stack=\"" + parts[0] + "\"");
      if (parts[0] != base.policy) s2.push_back("policy.params={}");
      for (std::size_t k = 1; k < parts.size(); ++k) {
        if (parts[k].find('=') == std::string::npos || parts[k].front() == '=') {
          std::fprintf(stderr, "faultline: --stacks: '%s': expected NAME+PARAM=VALUE, got '%s'\n",
                       spec.c_str(), parts[k].c_str());
          return 2;
        }
        s2.push_back("policy.params." + parts[k]);
      }
      scs.push_back(scenarios::load_scenario(path, s2, registry));
    }
    // A variant: the scenario's own stack and parameters, with its overrides (paired: the
    // same seeds, replica by replica).
    for (const auto& [label, v] : variants) {
      std::vector<std::string> s2 = sets;
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, '+');) {
        if (x.find('=') == std::string::npos || x.front() == '=') {
          std::fprintf(stderr, "faultline: --variant %s: expected PATH=VALUE, got '%s'\n",
                       label.c_str(), x.c_str());
          return 2;
        }
        s2.push_back(x);
      }
      scs.push_back(scenarios::load_scenario(path, s2, registry));
    }
  } catch (const scenarios::ScenarioError& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json out;
  out["scenario"] = scs.front().name;
  out["replicas"] = scs.front().replicas;
  out["seed"] = scs.front().seed;
  out["stacks"] = nlohmann::json::array();
  out["baseline"] = stacks[base];
  std::vector<std::vector<sim::ReplicaResult>> all;
  ProgressBar bar(!f.quiet);
  try {
    long long total = 0, before = 0;
    for (const auto& sc : scs) total += sc.replicas;
    for (std::size_t k = 0; k < scs.size(); ++k) {
      bar.set_what(stacks[k] + " ");
      all.push_back(sim::run_replicas_in_child(scs[k], static_cast<int>(jobs), opt, registry,
                                               [&](long long done) { bar(before + done, total); }));
      before += scs[k].replicas;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s: %s\n", path.c_str(), e.what());
    return 1;
  }
  for (size_t k = 0; k < scs.size(); ++k) {
    nlohmann::json r = sim::aggregate(scs[k], all[k], 0);
    r.erase("wall_s");
    r["label"] = stacks[k];
    if (k != base) r["vs_baseline"] = vs_baseline(all[k], all[base]);
    out["stacks"].push_back(r);
    if (!out_dir.empty()) sim::write_out_dir(out_dir + "/" + stacks[k], r, all[k], scs[k]);
  }
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!out_dir.empty()) {
    std::ofstream file(out_dir + "/compare.json");
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "faultline: %s/compare.json: cannot write\n", out_dir.c_str());
      return 1;
    }
  }
  if (format == "json") {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::ostringstream o;
  o << std::fixed;
  const auto& st = out["stacks"];
  o << "scenario " << out["scenario"].get<std::string>() << ", " << out["replicas"].get<int>()
    << " paired replicas per stack, seed " << out["seed"].get<std::uint64_t>() << "\n\n";
  int width = 24;  // wide enough for the longest stack label
  for (const auto& spec : stacks) width = std::max(width, static_cast<int>(spec.size()) + 2);
  auto row = [&](const std::string& label, auto cell) {
    o << std::left << std::setw(34) << label << std::right;
    for (const auto& r : st) o << std::setw(width) << cell(r);
    o << "\n";
  };
  auto fmt = [](double v, int prec) {
    std::ostringstream x;
    x << std::fixed << std::setprecision(prec) << v;
    return x.str();
  };
  row("", [&](const nlohmann::json& r) { return r["label"].get<std::string>(); });
  row("ETTR %",
      [&](const nlohmann::json& r) { return fmt(100 * r["ettr"]["mean"].get<double>(), 2); });
  row("  95% CI", [&](const nlohmann::json& r) {
    return fmt(100 * r["ettr"]["ci95"][0].get<double>(), 2) + ".." +
           fmt(100 * r["ettr"]["ci95"][1].get<double>(), 2);
  });
  auto vs = [&](const nlohmann::json& r, auto cell) -> std::string {
    return r.contains("vs_baseline") ? cell(r["vs_baseline"]) : std::string("baseline");
  };
  row("  paired diff to " + stacks[base] + ", pts", [&](const nlohmann::json& r) {
    return vs(r, [&](const nlohmann::json& v) {
      return fmt(100 * v["mean"].get<double>(), 2) + " +-" +
             fmt(100 * (v["ci95"][1].get<double>() - v["mean"].get<double>()), 2);
    });
  });
  if (st.front().contains("time_to_train"))
    row("time to train, days", [&](const nlohmann::json& r) {
      const auto& t = r["time_to_train"];
      return t["mean"].is_null() ? std::string("none finished") : fmt(t["mean"].get<double>(), 1);
    });
  if (st.front().contains("time_to_train"))
    row("  paired diff, days", [&](const nlohmann::json& r) {
      if (!r.contains("vs_baseline")) return std::string("baseline");
      if (!r["vs_baseline"].contains("time_to_train_days")) return std::string("-");
      const auto& t = r["vs_baseline"]["time_to_train_days"];
      return fmt(t["mean"].get<double>(), 2) + " +-" +
             fmt(t["ci95"][1].get<double>() - t["mean"].get<double>(), 2);
    });
  row("  unpaired CI would be, pts", [&](const nlohmann::json& r) {
    return vs(r, [&](const nlohmann::json& v) {
      return "+-" + fmt(100 * (v["unpaired_ci95"][1].get<double>() - v["mean"].get<double>()), 2);
    });
  });
  row("  replicas won/tied/lost %", [&](const nlohmann::json& r) {
    return vs(r, [&](const nlohmann::json& v) {
      return fmt(100 * v["wins"].get<double>(), 0) + "/" + fmt(100 * v["ties"].get<double>(), 0) +
             "/" + fmt(100 * v["losses"].get<double>(), 0);
    });
  });
  o << "unproductive hours per replica\n";
  for (const auto& b : sim::kBuckets) {
    const std::string k = b.name;
    if (k == "productive") continue;
    row("  " + k,
        [&](const nlohmann::json& r) { return fmt(r["breakdown_s"][k].get<double>() / 3600, 2); });
  }
  o << "incidents resolved by (per replica)\n";
  for (int k = 1; k < kMechanisms; ++k) {
    const char* m = mechanism_name(static_cast<Mechanism>(k));
    row(std::string("  ") + m, [&](const nlohmann::json& r) {
      return fmt(r["resolved_by_per_replica"].value(m, 0.0), 1);
    });
  }
  row("incidents per replica",
      [&](const nlohmann::json& r) { return fmt(r["incidents"]["per_replica"].get<double>(), 1); });
  row("evictions true / healthy", [&](const nlohmann::json& r) {
    return fmt(r["evictions"]["true_per_replica"].get<double>(), 1) + " / " +
           fmt(r["evictions"]["false_per_replica"].get<double>(), 1);
  });
  row("  healthy: test false positive", [&](const nlohmann::json& r) {
    return fmt(r["evictions"]["false_positive_per_replica"].get<double>(), 2);
  });
  row("longest fruitless run (max)", [&](const nlohmann::json& r) {
    return std::to_string(r["max_fruitless_rounds"].get<int>());
  });
  row("standby pool exhaustions", [&](const nlohmann::json& r) {
    return fmt(r["standby_exhaustions_per_replica"].get<double>(), 2);
  });
  row("remote-checkpoint fallbacks", [&](const nlohmann::json& r) {
    return fmt(r["remote_checkpoint_fallbacks_per_replica"].get<double>(), 2);
  });
  o << "wall time: " << fmt(out["wall_s"].get<double>(), 2) << " s\n";
  std::cout << o.str();
  return 0;
}

}  // namespace faultline::cli
