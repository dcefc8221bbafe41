// faultline sim compare: several policy stacks on the same faults, side by side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "policies/builtin.h"
#include "sim/cli/commands.h"
#include "sim/cli/flags.h"
#include "sim/report.h"
#include "sim/runner.h"

namespace faultline::cli {

namespace {

constexpr const char* kHelp = R"(usage: faultline sim compare SCENARIO.json --stacks A,B,... [options]

Runs every policy stack on the same fault histories (replica i of every stack sees the
same ground-truth faults: paired comparison) and prints, side by side, ETTR with its
95% CI, the paired ETTR difference to the first stack, the unproductive-time
breakdown, incidents by resolution mechanism, evictions (true/false against ground
truth) and standby-pool exhaustions.

options:
  --stacks A,B,...    registered stacks (default: byterobust,requeue,reschedule,oracle); a
                      stack may carry parameters, NAME+PARAM=VALUE+...: e.g.
                      byterobust,byterobust+localization=bisection compares two
                      localization modules inside the same stack
  --replicas N        replicas per stack (default: the scenario's)
  --jobs J            parallel replica processes (default: 1)
  --seed S            scenario seed
  --set PATH=VALUE    scenario override, repeatable (as in sim run)
  --format table|json
  --out DIR           one sub-directory per stack with result.json and replicas.csv
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

}  // namespace

int sim_compare(const std::vector<std::string>& args) {
  std::string path;
  std::vector<std::string> stacks = {"byterobust", "requeue", "reschedule", "oracle"};
  SimFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (const int r = sim_flag(args, i, f, {"table", "json"})) {
      if (r < 0) return 2;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--stacks") {
      if (i + 1 >= args.size() || split(args[i + 1]).empty()) return usage_error("--stacks: expected A,B,...");
      stacks = split(args[++i]);
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option " + a);
    } else if (path.empty()) {
      path = a;
    } else {
      return usage_error("unexpected argument " + a);
    }
  }
  if (path.empty()) return usage_error("sim compare: expected SCENARIO.json");
  const std::vector<std::string> sets = f.scenario_sets();
  const std::string& format = f.format;
  const std::string& out_dir = f.out_dir;
  const long long jobs = f.jobs;
  Registry registry = policies::builtin_registry();
  std::vector<scenarios::Scenario> scs;
  try {
    const scenarios::Scenario base = scenarios::load_scenario(path, sets, registry);
    for (const auto& spec : stacks) {
      // NAME+PARAM=VALUE+...: the stack, then parameter overrides.
      std::vector<std::string> parts;
      std::stringstream ss(spec);
      for (std::string x; std::getline(ss, x, '+');) parts.push_back(x);
      std::vector<std::string> s2 = sets;
      s2.push_back("policy.stack=\"" + parts[0] + "\"");
      if (parts[0] != base.policy) s2.push_back("policy.params={}");
      for (std::size_t k = 1; k < parts.size(); ++k) {
        if (parts[k].find('=') == std::string::npos || parts[k].front() == '=') {
          std::fprintf(stderr, "faultline: --stacks: '%s': expected NAME+PARAM=VALUE, got '%s'\n", spec.c_str(),
                       parts[k].c_str());
          return 2;
        }
        s2.push_back("policy.params." + parts[k]);
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
  std::vector<std::vector<sim::ReplicaResult>> all;
  try {
    for (const auto& sc : scs) all.push_back(sim::run_replicas_in_child(sc, static_cast<int>(jobs), {}, registry));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s: %s\n", path.c_str(), e.what());
    return 1;
  }
  for (size_t k = 0; k < scs.size(); ++k) {
    nlohmann::json r = sim::aggregate(scs[k], all[k], 0);
    r.erase("wall_s");
    r["label"] = stacks[k];
    std::vector<double> diff;
    for (size_t i = 0; i < all[k].size() && i < all[0].size(); ++i) diff.push_back(all[k][i].ettr - all[0][i].ettr);
    sim::Summary d = sim::summarize(diff);
    r["ettr_minus_first"] = {{"mean", d.mean}, {"ci95", {d.lo, d.hi}}};
    out["stacks"].push_back(r);
    if (!out_dir.empty()) sim::write_out_dir(out_dir + "/" + stacks[k], r, all[k], scs[k]);
  }
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  row("ETTR %", [&](const nlohmann::json& r) { return fmt(100 * r["ettr"]["mean"].get<double>(), 2); });
  row("  95% CI", [&](const nlohmann::json& r) {
    return fmt(100 * r["ettr"]["ci95"][0].get<double>(), 2) + ".." + fmt(100 * r["ettr"]["ci95"][1].get<double>(), 2);
  });
  row("  paired diff to first, pts", [&](const nlohmann::json& r) {
    return fmt(100 * r["ettr_minus_first"]["mean"].get<double>(), 2) + " +-" +
           fmt(100 * (r["ettr_minus_first"]["ci95"][1].get<double>() - r["ettr_minus_first"]["mean"].get<double>()), 2);
  });
  o << "unproductive hours per replica\n";
  for (const auto& b : sim::kBuckets) {
    const std::string k = b.name;
    if (k == "productive") continue;
    row("  " + k, [&](const nlohmann::json& r) { return fmt(r["breakdown_s"][k].get<double>() / 3600, 2); });
  }
  o << "incidents resolved by (per replica)\n";
  for (int k = 1; k < kMechanisms; ++k) {
    const char* m = mechanism_name(static_cast<Mechanism>(k));
    row(std::string("  ") + m, [&](const nlohmann::json& r) {
      return fmt(r["resolved_by_per_replica"].value(m, 0.0), 1);
    });
  }
  row("incidents per replica", [&](const nlohmann::json& r) { return fmt(r["incidents"]["per_replica"].get<double>(), 1); });
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
