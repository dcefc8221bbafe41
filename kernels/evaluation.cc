#include "kernels/evaluation.h"

#include <sstream>

#include "kernels/bandwidth.h"

namespace faultline::kernels {
namespace {

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

bool has(const ProbeReport& r, const std::string& metric) { return r.metrics.contains(metric); }

void note_missing_spec(ProbeReport& r, const ModelThresholds& model, const std::string& check,
                       const std::string& spec) {
  r.notes.push_back("model '" + model.name + "' has no " + spec + ": " + check + " not checked");
}

// "gemm.bf16 throughput not judged: size 2048 is below gemm_throughput_min_size 16384 (why)".
void note_not_judged(ProbeReport& r, const std::string& what, const std::string& measured,
                     const std::string& limit_name, double limit, const std::string& why) {
  r.notes.push_back(what + " not judged: " + measured + " " + limit_name + " " +
                    format_number(limit) + " (" + why + ")");
}

void evaluate_gemm(ProbeReport& r, const ModelThresholds& model, const ProbeOptions& options) {
  for (GemmPath path : {GemmPath::kBf16, GemmPath::kFp16, GemmPath::kTf32, GemmPath::kTiled}) {
    const std::string p(gemm_path_name(path));
    const std::string prefix = "gemm_" + p + "_";
    if (!has(r, prefix + "iterations") && !has(r, prefix + "digest_mismatch")) continue;
    add_check(r, "gemm." + p + ".checksum", prefix + "mismatched_iterations", Comparison::kAtMost,
              model.limits.checksum_mismatches_max, prefix + "mismatched_iterations_max");
    add_check(r, "gemm." + p + ".digest", prefix + "digest_mismatch", Comparison::kAtMost, 0.0,
              prefix + "digest_mismatch_max");
    const double size = has(r, prefix + "size") ? r.metrics.at(prefix + "size") : options.gemm.size;
    const double duration = options.gemm.duration_s;
    const Limits& lim = model.limits;
    if (path != GemmPath::kTiled && size < lim.gemm_throughput_min_size) {
      note_not_judged(r, "gemm." + p + " throughput", "size " + format_number(size) + " is below",
                      "gemm_throughput_min_size", lim.gemm_throughput_min_size,
                      "healthy GPUs fall short of both limits there");
      continue;
    }
    if (path != GemmPath::kTiled && duration < lim.gemm_throughput_min_duration_s) {
      note_not_judged(r, "gemm." + p + " throughput",
                      "a " + format_number(duration) + " s burn is shorter than",
                      "gemm_throughput_min_duration_s", lim.gemm_throughput_min_duration_s,
                      "no healthy figure measured that short");
      continue;
    }
    if (has(r, prefix + "tflops")) {
      if (auto spec = model.dense_tflops(path)) {
        add_check(r, "gemm." + p + ".tflops", prefix + "tflops", Comparison::kAtLeast,
                  *spec * model.fractions.gemm_tflops, prefix + "tflops_min");
      } else if (path != GemmPath::kTiled) {
        note_missing_spec(r, model, "gemm." + p + ".tflops", p + "_dense_tflops");
      }
    }
    if (path != GemmPath::kTiled && options.gemm.baseline &&
        duration < lim.gemm_vs_baseline_min_duration_s) {
      note_not_judged(r, "gemm." + p + " vs_baseline",
                      "a " + format_number(duration) + " s burn is shorter than",
                      "gemm_vs_baseline_min_duration_s", lim.gemm_vs_baseline_min_duration_s,
                      "healthy short burns fall near the limit");
    } else if (path != GemmPath::kTiled && options.gemm.baseline) {
      add_check(r, "gemm." + p + ".vs_baseline", prefix + "vs_baseline", Comparison::kAtLeast,
                model.fractions.gemm_vs_baseline, prefix + "vs_baseline_min");
    }
  }
}

void evaluate_hbm(ProbeReport& r, const ModelThresholds& model) {
  add_check(r, "hbm.bit_errors", "hbm_bit_errors", Comparison::kAtMost, model.limits.bit_errors_max,
            "hbm_bit_errors_max");
  if (has(r, "hbm_bandwidth_gbps")) {
    if (model.hbm_gbps) {
      add_check(r, "hbm.bandwidth", "hbm_bandwidth_gbps", Comparison::kAtLeast,
                *model.hbm_gbps * model.fractions.hbm_bandwidth, "hbm_bandwidth_gbps_min");
    } else {
      note_missing_spec(r, model, "hbm.bandwidth", "hbm_gbps");
    }
  }
}

void evaluate_pcie(ProbeReport& r, const ModelThresholds& model) {
  add_check(r, "pcie.data", "pcie_data_errors", Comparison::kAtMost, model.limits.data_errors_max,
            "pcie_data_errors_max");
  if (!has(r, "pcie_h2d_gbps") && !has(r, "pcie_d2h_gbps")) return;
  if (!model.pcie_gbps) {
    note_missing_spec(r, model, "pcie.h2d/pcie.d2h", "pcie_gbps");
    return;
  }
  const double limit = *model.pcie_gbps * model.fractions.pcie_bandwidth;
  add_check(r, "pcie.h2d", "pcie_h2d_gbps", Comparison::kAtLeast, limit, "pcie_h2d_gbps_min");
  add_check(r, "pcie.d2h", "pcie_d2h_gbps", Comparison::kAtLeast, limit, "pcie_d2h_gbps_min");
}

void evaluate_p2p(ProbeReport& r, const ModelThresholds& model) {
  add_check(r, "p2p.data", "p2p_data_errors", Comparison::kAtMost, model.limits.data_errors_max,
            "p2p_data_errors_max");
  if (!has(r, "p2p_min_gbps")) return;
  if (!model.nvlink_gbps) {
    note_missing_spec(r, model, "p2p.bandwidth", "nvlink_gbps");
    return;
  }
  // On an NVLink model every pair must be peer-accessible: a missing link is a fault.
  add_check(r, "p2p.peer_access", "p2p_pairs_without_peer_access", Comparison::kAtMost, 0.0,
            "p2p_pairs_without_peer_access_max");
  add_check(r, "p2p.bandwidth", "p2p_min_gbps", Comparison::kAtLeast,
            *model.nvlink_gbps * model.fractions.p2p_bandwidth, "p2p_min_gbps_min");
}

void evaluate_nccl(ProbeReport& r, const ModelThresholds& model, const ProbeOptions& options) {
  add_check(r, "nccl.data", "nccl_data_errors", Comparison::kAtMost, model.limits.data_errors_max,
            "nccl_data_errors_max");
  const auto ranks = r.metrics.find("nccl_ranks");
  if (ranks == r.metrics.end()) return;
  const bool local = r.metrics.contains("nccl_local_mode") && r.metrics.at("nccl_local_mode") > 0;
  const double limit = nccl_busbw_limit(model, options, static_cast<int>(ranks->second), local);
  if (limit <= 0) {
    r.notes.push_back(
        "no bus bandwidth limit applies (pass --min-busbw, or run locally on an 8-GPU node of a "
        "model with nccl_busbw_gbps): bandwidth reported, not checked");
    return;
  }
  for (Collective c : options.nccl.collectives) {
    const std::string name(collective_name(c));
    add_check(r, "nccl." + name + ".busbw", "nccl_" + name + "_busbw_gbps", Comparison::kAtLeast,
              limit, "nccl_" + name + "_busbw_gbps_min");
  }
}

void evaluate_env(ProbeReport& r, const ModelThresholds& model) {
  const Limits& l = model.limits;
  add_check(r, "env.ecc_uncorrected", "env_ecc_uncorrected_volatile", Comparison::kAtMost,
            l.ecc_uncorrected_max, "env_ecc_uncorrected_volatile_max");
  add_check(r, "env.retired_pages_pending", "env_retired_pages_pending", Comparison::kAtMost,
            l.retired_pages_pending_max, "env_retired_pages_pending_max");
  add_check(r, "env.remapped_rows_pending", "env_remapped_rows_pending", Comparison::kAtMost,
            l.remapped_rows_pending_max, "env_remapped_rows_pending_max");
  add_check(r, "env.remapped_rows_failure", "env_remapped_rows_failure", Comparison::kAtMost,
            l.remapped_rows_failure_max, "env_remapped_rows_failure_max");
  add_check(r, "env.temperature", "env_temperature_c", Comparison::kAtMost, l.temperature_c_max,
            "env_temperature_c_max");
}

}  // namespace

double nccl_busbw_limit(const ModelThresholds& model, const ProbeOptions& options, int nranks,
                        bool local_mode) {
  if (options.nccl.min_busbw_gbps > 0) return options.nccl.min_busbw_gbps;
  if (local_mode && nranks >= 8 && model.nccl_busbw_gbps) {
    return *model.nccl_busbw_gbps * model.fractions.nccl_busbw;
  }
  return 0.0;
}

void evaluate_report(ProbeReport& report, const ModelThresholds& model,
                     const ProbeOptions& options) {
  const auto kind = parse_probe_kind(report.probe);
  const bool measured = report.verdict == Verdict::kPending || report.verdict == Verdict::kFail ||
                        report.verdict == Verdict::kSkip;
  if (kind && measured) {
    switch (*kind) {
      case ProbeKind::kGemm:
        evaluate_gemm(report, model, options);
        break;
      case ProbeKind::kHbm:
        evaluate_hbm(report, model);
        break;
      case ProbeKind::kPcie:
        evaluate_pcie(report, model);
        break;
      case ProbeKind::kP2p:
        evaluate_p2p(report, model);
        break;
      case ProbeKind::kNccl:
        evaluate_nccl(report, model, options);
        break;
      case ProbeKind::kEnv:
        evaluate_env(report, model);
        break;
    }
  }
  for (const auto& check : report.checks) {
    if (!check.passed) {
      report.notes.push_back("check " + check.name + " failed: " + check.metric + " = " +
                             format_number(check.value) + ", expected " +
                             std::string(comparison_symbol(check.op)) + " " +
                             format_number(check.limit));
    }
  }
  settle_verdict(report);
}

}  // namespace faultline::kernels
