#pragma once

// From numbers to a verdict. The GPU side of each probe only measures and fills
// ProbeReport::metrics under the names listed below; this file decides which limits apply (from
// the device's thresholds model and the options), records each as a Check and settles the verdict.
// Keeping the decision here, away from CUDA, is what lets the unit tests check every threshold on a
// machine without a GPU.
//
// Metric names by probe (p = bf16|fp16|tf32|tiled, c = all_reduce|all_gather|all_to_all):
//   gemm: gemm_<p>_tflops, gemm_<p>_baseline_tflops, gemm_<p>_vs_baseline,
//         gemm_<p>_mismatched_iterations, gemm_<p>_digest_mismatch, ...
//   hbm:  hbm_bit_errors, hbm_bandwidth_gbps (best of copy/triad/read), hbm_copy_gbps, ...
//   pcie: pcie_h2d_gbps, pcie_d2h_gbps, pcie_data_errors
//   p2p:  p2p_min_gbps, p2p_data_errors, p2p_pairs_without_peer_access, p2p_gpus
//   nccl: nccl_<c>_busbw_gbps, nccl_data_errors, nccl_ranks, nccl_local_mode
//   env:  env_ecc_uncorrected_volatile, env_retired_pages_pending, env_remapped_rows_pending,
//         env_remapped_rows_failure, env_temperature_c, ...
// A limit whose metric was not measured is not checked; a limit whose spec number the model lacks
// is not checked either, and a note says so.

#include "kernels/probe_options.h"
#include "kernels/probe_report.h"
#include "kernels/thresholds.h"

namespace faultline::kernels {

// Adds the checks for report.probe, then settle_verdict(report). Requires report.probe to name a
// probe. A verdict the probe already set (skip, no_gpu, deadline_exceeded, usage_error, fail) is
// kept, except that a skip with a failed check becomes fail.
void evaluate_report(ProbeReport& report, const ModelThresholds& model,
                     const ProbeOptions& options);

// Minimum nccl bus bandwidth that applies, or 0 when none does: --min-busbw when given; else, in
// local mode with at least 8 ranks, the model's nccl_busbw_gbps times its pass fraction.
double nccl_busbw_limit(const ModelThresholds& model, const ProbeOptions& options, int nranks,
                        bool local_mode);

}  // namespace faultline::kernels
