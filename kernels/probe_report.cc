#include "kernels/probe_report.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace faultline::kernels {
namespace {

constexpr std::string_view kSchema = "faultline.probe.v1";

constexpr std::array<std::pair<ProbeKind, std::string_view>, 6> kProbeNames = {{
    {ProbeKind::kGemm, "gemm"},
    {ProbeKind::kHbm, "hbm"},
    {ProbeKind::kPcie, "pcie"},
    {ProbeKind::kP2p, "p2p"},
    {ProbeKind::kNccl, "nccl"},
    {ProbeKind::kEnv, "env"},
}};

constexpr std::array<std::pair<Verdict, std::string_view>, 7> kVerdictNames = {{
    {Verdict::kPending, "pending"},
    {Verdict::kPass, "pass"},
    {Verdict::kFail, "fail"},
    {Verdict::kSkip, "skip"},
    {Verdict::kNoGpu, "no_gpu"},
    {Verdict::kDeadlineExceeded, "deadline_exceeded"},
    {Verdict::kUsageError, "usage_error"},
}};

nlohmann::ordered_json number_or_null(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

double number_from(const nlohmann::json& value, std::string_view field) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number()) {
    throw std::runtime_error("probe report: field '" + std::string(field) +
                             "' must be a number or null");
  }
  return value.get<double>();
}

const nlohmann::json& require(const nlohmann::json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end()) {
    throw std::runtime_error(std::string("probe report: missing field '") + field + "'");
  }
  return *it;
}

nlohmann::ordered_json device_to_json(const DeviceDescription& d) {
  nlohmann::ordered_json j;
  j["index"] = d.index;
  j["name"] = d.name;
  j["model"] = d.model;
  j["uuid"] = d.uuid;
  j["pci_bus_id"] = d.pci_bus_id;
  j["compute_capability"] = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  j["memory_bytes"] = d.memory_bytes;
  j["sm_count"] = d.sm_count;
  j["driver_version"] = d.driver_version;
  j["runtime_version"] = d.runtime_version;
  return j;
}

DeviceDescription device_from_json(const nlohmann::json& j) {
  DeviceDescription d;
  d.index = j.value("index", -1);
  d.name = j.value("name", "");
  d.model = j.value("model", "");
  d.uuid = j.value("uuid", "");
  d.pci_bus_id = j.value("pci_bus_id", "");
  const std::string cc = j.value("compute_capability", "0.0");
  const auto dot = cc.find('.');
  if (dot != std::string::npos) {
    d.cc_major = std::atoi(cc.substr(0, dot).c_str());
    d.cc_minor = std::atoi(cc.substr(dot + 1).c_str());
  }
  d.memory_bytes = j.value("memory_bytes", std::uint64_t{0});
  d.sm_count = j.value("sm_count", 0);
  d.driver_version = j.value("driver_version", 0);
  d.runtime_version = j.value("runtime_version", 0);
  return d;
}

}  // namespace

std::string_view probe_name(ProbeKind kind) {
  for (const auto& [k, name] : kProbeNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<ProbeKind> parse_probe_kind(std::string_view name) {
  for (const auto& [k, n] : kProbeNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

std::string_view verdict_name(Verdict verdict) {
  for (const auto& [v, name] : kVerdictNames) {
    if (v == verdict) return name;
  }
  return "unknown";
}

std::optional<Verdict> parse_verdict(std::string_view name) {
  for (const auto& [v, n] : kVerdictNames) {
    if (n == name) return v;
  }
  return std::nullopt;
}

int exit_code_for(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
    case Verdict::kSkip:
      return kExitPass;
    case Verdict::kUsageError:
      return kExitUsage;
    case Verdict::kNoGpu:
      return kExitNoGpu;
    case Verdict::kDeadlineExceeded:
      return kExitDeadline;
    case Verdict::kPending:  // an unsettled report is a bug in the probe: never report success
    case Verdict::kFail:
      return kExitFail;
  }
  return kExitFail;
}

std::string_view comparison_symbol(Comparison op) {
  return op == Comparison::kAtLeast ? ">=" : "<=";
}

bool add_check(ProbeReport& report, std::string name, const std::string& metric, Comparison op,
               double limit, const std::string& threshold_key) {
  auto it = report.metrics.find(metric);
  if (it == report.metrics.end()) return false;
  Check check;
  check.name = std::move(name);
  check.metric = metric;
  check.op = op;
  check.limit = limit;
  check.value = it->second;
  // A NaN value never passes: an unmeasurable number is not evidence of health.
  check.passed = op == Comparison::kAtLeast ? check.value >= limit : check.value <= limit;
  report.checks.push_back(std::move(check));
  report.thresholds[threshold_key] = limit;
  return true;
}

void settle_verdict(ProbeReport& report) {
  bool any_failed = false;
  for (const auto& check : report.checks) any_failed = any_failed || !check.passed;
  if (report.verdict == Verdict::kPending) {
    report.verdict = any_failed ? Verdict::kFail : Verdict::kPass;
  } else if (report.verdict == Verdict::kSkip && any_failed) {
    report.verdict = Verdict::kFail;
  }
}

nlohmann::ordered_json report_to_json(const ProbeReport& report) {
  nlohmann::ordered_json j;
  j["schema"] = kSchema;
  j["probe"] = report.probe;
  j["verdict"] = verdict_name(report.verdict);
  j["exit_code"] = exit_code_for(report.verdict);
  j["device"] = report.device ? device_to_json(*report.device) : nlohmann::ordered_json(nullptr);
  auto& metrics = j["metrics"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : report.metrics) metrics[key] = number_or_null(value);
  auto& thresholds = j["thresholds"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : report.thresholds) thresholds[key] = number_or_null(value);
  auto& checks = j["checks"] = nlohmann::ordered_json::array();
  for (const auto& c : report.checks) {
    nlohmann::ordered_json cj;
    cj["name"] = c.name;
    cj["metric"] = c.metric;
    cj["op"] = comparison_symbol(c.op);
    cj["limit"] = number_or_null(c.limit);
    cj["value"] = number_or_null(c.value);
    cj["passed"] = c.passed;
    checks.push_back(std::move(cj));
  }
  j["notes"] = report.notes;
  j["details"] = nlohmann::ordered_json::parse(report.details.dump());
  j["elapsed_s"] = number_or_null(report.elapsed_s);
  j["deadline_s"] = number_or_null(report.deadline_s);
  j["inject"] = report.inject;
  if (report.partial) j["partial"] = true;
  return j;
}

std::string render_report(const ProbeReport& report, bool pretty) {
  return report_to_json(report).dump(pretty ? 2 : -1, ' ', false,
                                     nlohmann::json::error_handler_t::replace);
}

ProbeReport report_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) throw std::runtime_error("probe report: document is not an object");
  ProbeReport r;
  r.probe = require(doc, "probe").get<std::string>();
  const auto verdict = parse_verdict(require(doc, "verdict").get<std::string>());
  if (!verdict) throw std::runtime_error("probe report: unknown verdict");
  r.verdict = *verdict;
  const auto& device = require(doc, "device");
  if (!device.is_null()) r.device = device_from_json(device);
  for (const auto& [key, value] : require(doc, "metrics").items()) {
    r.metrics[key] = number_from(value, "metrics." + key);
  }
  for (const auto& [key, value] : require(doc, "thresholds").items()) {
    r.thresholds[key] = number_from(value, "thresholds." + key);
  }
  if (auto it = doc.find("checks"); it != doc.end()) {
    for (const auto& cj : *it) {
      Check c;
      c.name = cj.at("name").get<std::string>();
      c.metric = cj.at("metric").get<std::string>();
      c.op = cj.at("op").get<std::string>() == "<=" ? Comparison::kAtMost : Comparison::kAtLeast;
      c.limit = number_from(cj.at("limit"), "checks.limit");
      c.value = number_from(cj.at("value"), "checks.value");
      c.passed = cj.at("passed").get<bool>();
      r.checks.push_back(std::move(c));
    }
  }
  r.notes = require(doc, "notes").get<std::vector<std::string>>();
  if (auto it = doc.find("details"); it != doc.end()) r.details = *it;
  if (auto it = doc.find("elapsed_s"); it != doc.end()) r.elapsed_s = number_from(*it, "elapsed_s");
  if (auto it = doc.find("deadline_s"); it != doc.end()) {
    r.deadline_s = number_from(*it, "deadline_s");
  }
  r.inject = doc.value("inject", "none");
  r.partial = doc.value("partial", false);
  return r;
}

ProbeReport make_usage_error_report(std::string probe, std::string message) {
  ProbeReport r;
  r.probe = std::move(probe);
  r.verdict = Verdict::kUsageError;
  r.notes.push_back(std::move(message));
  return r;
}

}  // namespace faultline::kernels
