#include "sim/costs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace faultline::sim {

using nlohmann::json;

ReplicaCost replica_cost(const scenarios::CostSpec& costs, const scenarios::Scenario& sc,
                         const ReplicaResult& r) {
  const double gpus = static_cast<double>(sc.cluster.machines) * sc.cluster.gpus_per_machine;
  const double productive_s = static_cast<double>(r.breakdown.productive) * 1e-9;
  ReplicaCost c;
  c.standby_machine_h = r.standby_machine_s / 3600;
  c.gpu = costs.gpu_hour * gpus * r.elapsed_s / 3600;
  c.standby = costs.spare_machine_hour * c.standby_machine_h;
  c.delay = costs.delay_day * std::max(0.0, r.elapsed_s - productive_s) / 86400;
  c.total = c.gpu + c.standby + c.delay;
  c.per_trained_day =
      productive_s > 0 ? c.total / (productive_s / 86400) : std::numeric_limits<double>::infinity();
  c.goodput_per_cost =
      c.total > 0 ? productive_s / 3600 * gpus / c.total : std::numeric_limits<double>::infinity();
  return c;
}

const std::vector<std::string>& cost_metric_names() {
  static const std::vector<std::string> names{"cost", "cost_per_trained_day", "goodput_per_cost"};
  return names;
}

std::vector<double> cost_metrics(const ReplicaCost& c) {
  return {c.total, c.per_trained_day, c.goodput_per_cost};
}

namespace {

json summary(const std::vector<double>& xs) {
  const Summary s = summarize(xs);
  return {{"mean", s.mean},
          {"ci95", {s.lo, s.hi}},
          {"min", s.min},
          {"max", s.max},
          {"stddev", s.stddev}};
}

// A price or a cost as the table writes it: whole units from 100 up, else 4 digits.
std::string money(const json& x) {
  if (!x.is_number()) return "inf";
  const double v = x.get<double>();
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 100 ? "%.0f" : "%.4g", v);
  return buf;
}

}  // namespace

json cost_json(const scenarios::Scenario& sc, const std::vector<ReplicaResult>& rs) {
  const scenarios::CostSpec& k = *sc.costs;
  std::vector<double> total, per_day, goodput;
  double gpu = 0, standby = 0, delay = 0, standby_h = 0;
  for (const auto& r : rs) {
    const ReplicaCost c = replica_cost(k, sc, r);
    total.push_back(c.total);
    per_day.push_back(c.per_trained_day);
    goodput.push_back(c.goodput_per_cost);
    gpu += c.gpu;
    standby += c.standby;
    delay += c.delay;
    standby_h += c.standby_machine_h;
  }
  const double n = rs.empty() ? 1.0 : static_cast<double>(rs.size());
  json out;
  out["prices"] = {{"gpu_hour", k.gpu_hour},
                   {"spare_machine_hour", k.spare_machine_hour},
                   {"delay_day", k.delay_day}};
  out["per_replica"] = summary(total);
  out["parts_per_replica"] = {{"gpu", gpu / n}, {"standby", standby / n}, {"delay", delay / n}};
  out["standby_machine_hours_per_replica"] = standby_h / n;
  out["per_trained_day"] = summary(per_day);
  out["goodput_per_cost"] = summary(goodput);
  out["goodput_unit"] = "productive GPU-hours per currency unit";
  return out;
}

std::string cost_table_line(const json& r) {
  if (!r.contains("cost")) return "";
  const json& c = r["cost"];
  auto ci = [&](const json& s) {
    return money(s["mean"]) + " (95% CI " + money(s["ci95"][0]) + " .. " + money(s["ci95"][1]) +
           ")";
  };
  char goodput[160];
  const json& g = c["goodput_per_cost"];
  if (g["mean"].is_number())
    std::snprintf(goodput, sizeof goodput, "%.4g (95%% CI %.4g .. %.4g)", g["mean"].get<double>(),
                  g["ci95"][0].get<double>(), g["ci95"][1].get<double>());
  else
    std::snprintf(goodput, sizeof goodput, "inf");
  return "cost       " + ci(c["per_replica"]) + " per replica, " + ci(c["per_trained_day"]) +
         " per trained day; " + goodput + " productive GPU-hours per unit\n";
}

}  // namespace faultline::sim
