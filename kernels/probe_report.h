#pragma once

// A probe report is the one thing a GPU health probe hands back: what it measured (metrics), what
// those numbers were compared against (thresholds and the individual checks), free-form notes and
// details, and the verdict that becomes the exit code of `faultline-probe`. gpu-burn famously exits
// 0 on a faulty GPU (docs/domain.md §8); here the verdict *is* the exit code, so a caller that only
// looks at `$?` still gets the right answer. The report is plain data; probe_report.cc turns it
// into the JSON document the program prints and parses it back, which is how the watchdog parent
// reads what its child measured.

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/probe_exit_codes.h"

namespace faultline::kernels {

// The probes `faultline-probe` knows, one per process.
enum class ProbeKind { kGemm, kHbm, kPcie, kP2p, kNccl, kEnv };
inline constexpr std::array<ProbeKind, 6> kAllProbes = {ProbeKind::kGemm, ProbeKind::kHbm,
                                                        ProbeKind::kPcie, ProbeKind::kP2p,
                                                        ProbeKind::kNccl, ProbeKind::kEnv};
// Returns the command-line name ("gemm", "hbm", ...).
std::string_view probe_name(ProbeKind kind);
// Returns the kind for a command-line name, or nullopt when the name is unknown.
std::optional<ProbeKind> parse_probe_kind(std::string_view name);

// kPending is the state of a report whose checks have not been evaluated yet; it never reaches
// stdout (settle_verdict turns it into pass or fail).
enum class Verdict { kPending, kPass, kFail, kSkip, kNoGpu, kDeadlineExceeded, kUsageError };
std::string_view verdict_name(Verdict verdict);
std::optional<Verdict> parse_verdict(std::string_view name);

// The exit code (kernels/probe_exit_codes.h) a verdict becomes.
int exit_code_for(Verdict verdict);

enum class Comparison { kAtLeast, kAtMost };
std::string_view comparison_symbol(Comparison op);  // ">=" or "<="

// One threshold applied to one metric.
struct Check {
  std::string name;    // e.g. "gemm.bf16.vs_baseline"
  std::string metric;  // key in ProbeReport::metrics
  Comparison op = Comparison::kAtLeast;
  double limit = 0.0;
  double value = 0.0;
  bool passed = false;
};

// Which GPU the probe ran on, as the CUDA runtime describes it.
struct DeviceDescription {
  int index = -1;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  int cc_major = 0;
  int cc_minor = 0;
  std::uint64_t memory_bytes = 0;
  int sm_count = 0;
  std::string model;  // the thresholds model it matched ("H100 SXM", or the fallback's name)
  int driver_version = 0;
  int runtime_version = 0;
};

struct ProbeReport {
  std::string probe;  // probe_name(kind), or what the user typed when it was not a probe
  Verdict verdict = Verdict::kPending;
  std::optional<DeviceDescription> device;
  std::map<std::string, double> metrics;
  std::map<std::string, double> thresholds;  // limits applied, e.g. "hbm_bandwidth_gbps_min"
  std::vector<Check> checks;
  std::vector<std::string> notes;
  nlohmann::json details =
      nlohmann::json::object();  // probe-specific structure (error addresses...)
  double elapsed_s = 0.0;
  double deadline_s = 0.0;
  std::string inject = "none";
  bool partial = false;  // a progress snapshot, not the final word
};

// Adds a check of metric `metric` against `limit` and records the limit under `threshold_key` in
// report.thresholds. Returns false (and adds nothing) when the metric was not measured.
bool add_check(ProbeReport& report, std::string name, const std::string& metric, Comparison op,
               double limit, const std::string& threshold_key);

// Turns a pending verdict into pass (every check passed) or fail; a skip with a failed check
// becomes fail. Other verdicts (no_gpu, deadline_exceeded, usage_error, fail) are kept.
void settle_verdict(ProbeReport& report);

// The JSON document printed on stdout. Keys: schema, probe, verdict, exit_code, device, metrics,
// thresholds, checks, notes, details, elapsed_s, deadline_s, inject (and partial when set).
// Non-finite metric values are written as null.
nlohmann::ordered_json report_to_json(const ProbeReport& report);
std::string render_report(const ProbeReport& report, bool pretty);

// Parses a document written by report_to_json. Throws std::runtime_error naming the field when the
// document does not have that shape.
ProbeReport report_from_json(const nlohmann::json& doc);

// A usage-error report (exit 2) for `probe` (may be empty when no probe was named).
ProbeReport make_usage_error_report(std::string probe, std::string message);

}  // namespace faultline::kernels
