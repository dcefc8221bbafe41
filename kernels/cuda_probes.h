#pragma once

// The probes of the CUDA backend, one function each. A probe runs on the device the backend has
// already selected and described (report.device), fills report.metrics / notes / details under the
// names evaluation.h documents, and sets report.verdict only when it decides the outcome itself
// (skip, usage_error, deadline_exceeded). CUDA failures are thrown as GpuError; the backend turns
// them into a fail verdict.

#include "kernels/probe_main.h"
#include "kernels/probe_options.h"
#include "kernels/probe_report.h"

namespace faultline::kernels {

void run_gemm_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);
void run_hbm_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);
void run_pcie_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);
void run_p2p_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);
void run_nccl_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);
void run_env_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report);

}  // namespace faultline::kernels
