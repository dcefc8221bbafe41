// Fits of a trace (traces/fit.h, "Trace fits"): the times between faults and the repair
// times of each fault group, fitted with fit_all (fit.cc), and their JSON and table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "traces/fit.h"
#include "traces/fit_clean.h"
#include "traces/model.h"
#include "traces/stats.h"

namespace faultline::traces {

using fit_internal::Clean;
using fit_internal::clean;
using nlohmann::json;

Sample tbf_sample_days(const Trace& t, const std::vector<FaultSpan>& faults, int fleet_nodes,
                       const std::vector<char>& selected, double resolution_days,
                       bool after_first_fault) {
  auto [w0, w1] = t.observation_window();
  Sample s;
  const double res = resolution_days > 0 ? resolution_days : 0;
  std::vector<double> last(t.nodes.size(), NAN);
  for (std::size_t i = 0; i < faults.size(); ++i) {
    if (!selected[i]) continue;
    const FaultSpan& f = faults[i];
    if (f.start_s < w0 || f.start_s > w1) continue;
    double& l = last[static_cast<std::size_t>(f.node)];
    const double g = (f.start_s - (std::isnan(l) ? w0 : l)) / 86400.0;
    const bool first = std::isnan(l);
    l = f.start_s;
    if (first && after_first_fault) continue;  // the stretch before it is not a gap
    if (res == 0)
      s.observed.push_back(g);
    else if (first)
      s.intervals.emplace_back(g, g + res);
    else
      s.intervals.emplace_back(std::max(0.0, g - res), g + res);
  }
  const double window_days = (w1 - w0) / 86400.0;
  for (double l : last) {
    if (!std::isnan(l))
      s.censored.push_back((w1 - l) / 86400.0 - res);
    else if (!after_first_fault)
      s.censored.push_back(window_days);
  }
  if (!after_first_fault)
    for (int extra = static_cast<int>(t.nodes.size()); extra < fleet_nodes; ++extra)
      s.censored.push_back(window_days);
  return s;
}

Sample repair_sample_h(const std::vector<FaultSpan>& faults, double window_end_s,
                       const std::vector<char>& selected) {
  Sample s;
  for (std::size_t i = 0; i < faults.size(); ++i) {
    if (!selected[i]) continue;
    const FaultSpan& f = faults[i];
    if (!f.open())
      s.observed.push_back(f.duration_s() / 3600.0);
    else if (window_end_s > f.start_s)
      s.censored.push_back((window_end_s - f.start_s) / 3600.0);
  }
  return s;
}

namespace {

GroupFit fit_group(const Trace& t, const std::vector<FaultSpan>& faults,
                   const std::vector<char>& sel, const std::string& name, int fleet,
                   double window_end_s, double window_days, const FitOptions& opt) {
  GroupFit g;
  g.name = name;
  std::map<std::int32_t, std::size_t> members;
  for (std::size_t i = 0; i < faults.size(); ++i)
    if (sel[i]) {
      ++g.faults;
      ++members[faults[i].category];
    }
  for (const auto& [cat, n] : members)
    g.members.emplace_back(t.categories[static_cast<std::size_t>(cat)], n);
  std::stable_sort(g.members.begin(), g.members.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  g.rate_per_node_day =
      fleet > 0 && window_days > 0 ? static_cast<double>(g.faults) / (fleet * window_days) : NAN;
  auto fit = [&](const Sample& s) {
    const Clean c = clean(s);
    // Interval-censored failures are failures too.
    if (c.obs.size() + c.iv.size() >= opt.min_samples) return fit_all(s);
    FitSet f;
    f.observed = c.obs.size();
    f.censored = c.cen.size();
    f.intervals = c.iv.size();
    f.dropped = c.dropped;
    f.exponential.dist.family = Family::kExponential;
    f.weibull.dist.family = Family::kWeibull;
    f.lognormal.dist.family = Family::kLognormal;
    for (FitResult* r : {&f.exponential, &f.weibull, &f.lognormal})
      r->note = "fewer than " + std::to_string(opt.min_samples) + " observed values";
    return f;
  };
  g.tbf_days = fit(tbf_sample_days(t, faults, fleet, sel, opt.time_resolution_s / 86400.0,
                                   opt.after_first_fault));
  g.repair_h = fit(repair_sample_h(faults, window_end_s, sel));
  return g;
}

json fit_result_json(const FitResult& r) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json j = {{"ok", r.ok}};
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.ok) return j;
  switch (r.dist.family) {
    case Family::kExponential:
      j["params"] = {{"rate", r.dist.a}};
      break;
    case Family::kWeibull:
      j["params"] = {{"shape", r.dist.a}, {"scale", r.dist.b}};
      break;
    case Family::kLognormal:
      j["params"] = {{"mu", r.dist.a}, {"sigma", r.dist.b}};
      break;
  }
  // 95% confidence intervals (kCiMethod) and the standard errors on the working scale.
  auto range = [&](const ParamCi& c) { return json::array({num(c.lo), num(c.hi)}); };
  switch (r.dist.family) {
    case Family::kExponential:
      j["ci"] = {{"rate", range(r.ci_a)}};
      j["se"] = {{"log_rate", num(r.ci_a.se)}};
      break;
    case Family::kWeibull:
      j["ci"] = {{"shape", range(r.ci_a)}, {"scale", range(r.ci_b)}};
      j["se"] = {{"log_shape", num(r.ci_a.se)}, {"log_scale", num(r.ci_b.se)}};
      break;
    case Family::kLognormal:
      j["ci"] = {{"mu", range(r.ci_a)}, {"sigma", range(r.ci_b)}};
      j["se"] = {{"mu", num(r.ci_a.se)}, {"log_sigma", num(r.ci_b.se)}};
      break;
  }
  j["loglik"] = num(r.loglik);
  j["aic"] = num(r.aic);
  j["ks"] = num(r.ks);
  j["mean"] = num(r.dist.mean());
  j["median"] = num(r.dist.median());
  j["iterations"] = r.iterations;
  return j;
}

// The scenario field a fault model would take from the recommended fit of times between
// failures, and whether the scenario schema accepts it; null for the exponential.
json scenario_field_json(const FitSet& s) {
  const FitResult* r = s.recommended();
  if (!r) return nullptr;
  const ModelField f = model_field(r->dist);
  if (!f.range) return nullptr;
  return {{"key", f.range->key},
          {"value", f.fitted},
          {"written", f.written},
          {"allowed", f.range->text()},
          {"within_schema", f.within()}};
}

json group_json(const GroupFit& g) {
  json tbf = fitset_json(g.tbf_days);
  tbf["scenario_field"] = scenario_field_json(g.tbf_days);
  json members = json::array();
  for (const auto& [c, n] : g.members)
    members.push_back({{"level", c.level}, {"desc", c.desc}, {"faults", n}});
  return {{"name", g.name},
          {"faults", g.faults},
          {"rate_per_node_day",
           std::isfinite(g.rate_per_node_day) ? json(g.rate_per_node_day) : json(nullptr)},
          {"tbf_days", tbf},
          {"repair_h", fitset_json(g.repair_h)},
          {"members", members}};
}

std::string ci_text(const FitResult& r) {
  char buf[160];
  auto pair = [](const ParamCi& c) {
    if (!std::isfinite(c.lo) || !std::isfinite(c.hi)) return std::string("-");
    char b[64];
    std::snprintf(b, sizeof b, "[%.4g, %.4g]", c.lo, c.hi);
    return std::string(b);
  };
  switch (r.dist.family) {
    case Family::kExponential:
      std::snprintf(buf, sizeof buf, "rate %s", pair(r.ci_a).c_str());
      break;
    case Family::kWeibull:
      std::snprintf(buf, sizeof buf, "shape %s scale %s", pair(r.ci_a).c_str(),
                    pair(r.ci_b).c_str());
      break;
    case Family::kLognormal:
      std::snprintf(buf, sizeof buf, "mu %s sigma %s", pair(r.ci_a).c_str(), pair(r.ci_b).c_str());
      break;
  }
  return buf;
}

std::string params_text(const FitResult& r) {
  char buf[96];
  switch (r.dist.family) {
    case Family::kExponential:
      std::snprintf(buf, sizeof buf, "rate %.4g", r.dist.a);
      break;
    case Family::kWeibull:
      std::snprintf(buf, sizeof buf, "shape %.4g scale %.4g", r.dist.a, r.dist.b);
      break;
    case Family::kLognormal:
      std::snprintf(buf, sizeof buf, "mu %.4g sigma %.4g", r.dist.a, r.dist.b);
      break;
  }
  return buf;
}

// `model`: the sample is a fault model's (times between failures), whose recommended
// fit a scenario field carries; a value outside the schema is flagged.
void fitset_table(std::string& o, const char* what, const FitSet& s, bool model) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-16s n %zu observed, %zu censored%s%s\n", what, s.observed,
                s.censored,
                s.intervals ? (", " + std::to_string(s.intervals) + " in intervals").c_str() : "",
                s.dropped ? (", " + std::to_string(s.dropped) + " zero dropped").c_str() : "");
  o += buf;
  const FitResult* best = s.best();
  for (const FitResult* r : {&s.exponential, &s.weibull, &s.lognormal}) {
    if (!r->ok) {
      std::snprintf(buf, sizeof buf, "    %-12s   %s\n", family_name(r->dist.family),
                    r->note.c_str());
    } else {
      char ks[16] = "     -";
      if (std::isfinite(r->ks)) std::snprintf(ks, sizeof ks, "%.4f", r->ks);
      std::snprintf(buf, sizeof buf,
                    "    %-12s%s %-30s logL %11.2f  AIC %11.2f  KS %s  mean %.4g median %.4g\n",
                    family_name(r->dist.family), r == best ? " *" : "  ", params_text(*r).c_str(),
                    r->loglik, r->aic, ks, r->dist.mean(), r->dist.median());
      o += buf;
      std::snprintf(buf, sizeof buf, "    %-14s 95%% CI %s\n", "", ci_text(*r).c_str());
    }
    o += buf;
  }
  if (!s.lr.ok && !s.lr.recommendation.empty()) o += "    " + s.lr.recommendation + "\n";
  if (s.lr.ok) {
    std::snprintf(buf, sizeof buf, "    LR %.4g: %s\n", s.lr.statistic,
                  s.lr.recommendation.c_str());
    o += buf;
    const ModelField f = model_field(s.recommended()->dist);
    if (model && !f.within()) {
      std::snprintf(buf, sizeof buf, "    ! %s: no fault model can hold this fit\n",
                    f.outside().c_str());
      o += buf;
    }
  }
}

}  // namespace

json fitset_json(const FitSet& s) {
  const FitResult* b = s.best();
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json lr = nullptr;
  if (s.lr.ok)
    lr = {{"null", "exponential"},
          {"alternative", "weibull"},
          {"statistic", num(s.lr.statistic)},
          {"df", 1},
          {"p_value", num(s.lr.p_value)},
          {"level", kLrLevel},
          {"exponential_rejected", s.lr.exponential_rejected}};
  return {
      {"observed", s.observed},
      {"censored", s.censored},
      {"intervals", s.intervals},
      {"dropped", s.dropped},
      {"best", b ? json(family_name(b->dist.family)) : json(nullptr)},
      {"recommended", s.recommended() ? json(family_name(s.lr.recommended)) : json(nullptr)},
      {"ci_level", kCiLevel},
      {"ci_method", kCiMethod},
      {"exponential", fit_result_json(s.exponential)},
      {"weibull", fit_result_json(s.weibull)},
      {"lognormal", fit_result_json(s.lognormal)},
      {"lr_test", lr},
      {"recommendation", s.lr.recommendation.empty() ? json(nullptr) : json(s.lr.recommendation)}};
}

TraceFit fit_trace(const Trace& t, const FitOptions& opt) {
  TraceFit f;
  f.source = t.source;
  // Same fleet rule as the statistics.
  if (opt.nodes > 0) {
    f.fleet_nodes = opt.nodes;
    f.fleet_source = "--nodes";
  } else if (t.fleet_nodes > 0) {
    f.fleet_nodes = t.fleet_nodes;
    f.fleet_source = "declared by the trace";
  } else {
    f.fleet_nodes = static_cast<int>(t.nodes.size());
    f.fleet_source = "distinct nodes in the trace";
  }
  auto [w0, w1] = t.observation_window();
  f.window_start_s = w0;
  f.window_days = (w1 - w0) / 86400.0;
  f.time_resolution_s = opt.time_resolution_s > 0 ? opt.time_resolution_s : 0;
  f.after_first_fault = opt.after_first_fault;
  const PairingResult p = pair_faults(t);
  std::vector<char> all(p.faults.size(), 1);
  f.overall = fit_group(t, p.faults, all, "all", f.fleet_nodes, w1, f.window_days, opt);
  std::map<std::string, std::vector<char>> classes;
  for (std::size_t i = 0; i < p.faults.size(); ++i) {
    auto& sel = classes[t.categories[static_cast<std::size_t>(p.faults[i].category)].cls];
    if (sel.empty()) sel.assign(p.faults.size(), 0);
    sel[i] = 1;
  }
  for (const auto& [name, sel] : classes)
    f.by_class.push_back(fit_group(t, p.faults, sel, name, f.fleet_nodes, w1, f.window_days, opt));
  std::stable_sort(f.by_class.begin(), f.by_class.end(),
                   [](const GroupFit& a, const GroupFit& b) { return a.faults > b.faults; });
  return f;
}

json fit_json(const TraceFit& f) {
  json classes = json::array();
  for (const auto& g : f.by_class) classes.push_back(group_json(g));
  return {{"source", f.source},
          {"fleet_nodes", f.fleet_nodes},
          {"fleet_source", f.fleet_source},
          {"window_start_s", f.window_start_s},
          {"window_days", f.window_days},
          {"time_resolution_s", f.time_resolution_s},
          {"tbf_from", f.after_first_fault ? "first_fault" : "window_start"},
          {"overall", group_json(f.overall)},
          {"by_class", classes}};
}

std::string fit_table(const TraceFit& f) {
  std::string o;
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "fit of %s\nfleet %d nodes (%s), window %.2f days; maximum likelihood with right-censoring,\n"
      "* = lowest AIC; KS = sup |model - Kaplan-Meier|; time between failures in days, repair in "
      "hours;\n95%% CI = Wald, observed information, log scale for positive parameters; LR = "
      "exponential\nvs Weibull likelihood ratio, chi-squared 1 df\n",
      f.source.c_str(), f.fleet_nodes, f.fleet_source.c_str(), f.window_days);
  o += buf;
  if (f.time_resolution_s > 0) {
    std::snprintf(buf, sizeof buf,
                  "fault times recorded to %.6g s: times between failures interval-censored\n",
                  f.time_resolution_s);
    o += buf;
  }
  if (f.after_first_fault)
    o += "times between failures from each node's first fault on (fault-free nodes left out)\n";
  auto group = [&](const GroupFit& g) {
    std::snprintf(buf, sizeof buf, "\n%s: %zu faults, %.4g per node-day\n", g.name.c_str(),
                  g.faults, g.rate_per_node_day);
    o += buf;
    fitset_table(o, "between failures", g.tbf_days, true);
    fitset_table(o, "repair", g.repair_h, false);
  };
  group(f.overall);
  for (const auto& g : f.by_class) group(g);
  return o;
}

}  // namespace faultline::traces
