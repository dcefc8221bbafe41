#pragma once

// Per-GPU-model expectations the probes compare their measurements with, read from the data file
// kernels/thresholds.json. A model is found by the CUDA device name ("NVIDIA H100 80GB HBM3"):
// the first entry, in file order, one of whose `match` strings is a case-insensitive substring of
// the name; a device no entry matches gets the `fallback` entry, whose spec numbers are absent so
// only correctness checks (bit errors, checksums, digests) apply. A spec number times its pass
// fraction is the limit (HBM 3350 GB/s * 0.85 = 2847.5 GB/s). The file is validated strictly at
// load time: an unknown key, a missing field or a wrong type is an error naming the file and field.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/probe_options.h"

namespace faultline::kernels {

class ThresholdsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Fractions of a spec number a healthy GPU must reach.
struct PassFractions {
  double hbm_bandwidth = 0.85;
  double gemm_tflops = 0.55;       // of dense spec TFLOP/s
  double gemm_vs_baseline = 0.86;  // burn TFLOP/s / plain cuBLAS TFLOP/s in the same run
  double pcie_bandwidth = 0.60;
  double p2p_bandwidth = 0.70;
  double nccl_busbw = 0.70;
};

// Absolute limits.
struct Limits {
  double bit_errors_max = 0;
  double checksum_mismatches_max = 0;
  double data_errors_max = 0;
  double ecc_uncorrected_max = 0;
  double retired_pages_pending_max = 0;
  double remapped_rows_pending_max = 0;
  double remapped_rows_failure_max = 0;
  double temperature_c_max = 87;
  // GEMM throughput (gemm_tflops and gemm_vs_baseline) is judged only for matrices at least this
  // large; smaller ones get correctness checks alone. Measured on an H200 (1 s burns): bf16 246,
  // 537, 638, 661 TFLOP/s at n = 2048, 4096, 8192, 16384, and burn/plain-cuBLAS 0.35, 0.75, 0.92,
  // 0.94 (limits 544 and 0.90): a small healthy burn misses both.
  double gemm_throughput_min_size = 16384;
  // ... and only for burns at least this long (seconds per path): 1 s is the shortest burn
  // measured, and 1 s burns cleared the spec-fraction limit by 8+ points on an H100 and an H200.
  double gemm_throughput_min_duration_s = 1;
  // gemm_vs_baseline needs longer burns: at n = 16384 a healthy H100's 1 s burns reached 0.896 of
  // the same-run cuBLAS loop (within 4 points of the limit), its 5 s burns 0.926 and more.
  double gemm_vs_baseline_min_duration_s = 5;
};

struct ModelThresholds {
  std::string name;
  std::vector<std::string> match;
  // Spec numbers; absent when unknown (the matching check is then skipped with a note).
  std::optional<double> hbm_gbps;
  std::optional<double> bf16_dense_tflops;
  std::optional<double> fp16_dense_tflops;
  std::optional<double> tf32_dense_tflops;
  std::optional<double> pcie_gbps;        // per direction
  std::optional<double> nvlink_gbps;      // per direction, one peer copy
  std::optional<double> nccl_busbw_gbps;  // expected intra-node bus bandwidth
  PassFractions fractions;
  Limits limits;

  // Spec dense TFLOP/s for a GEMM path (nullopt for the tiled kernel and unknown specs).
  std::optional<double> dense_tflops(GemmPath path) const;
};

class ThresholdTable {
 public:
  // Validates and reads a thresholds document; `source` names it in errors. Throws ThresholdsError.
  static ThresholdTable parse(const nlohmann::json& doc, std::string source);
  // Reads and parses a file. Throws ThresholdsError (unreadable file, bad JSON, bad content).
  static ThresholdTable load(const std::filesystem::path& path);
  // A table with only a fallback model (no spec numbers), for when no file can be found.
  static ThresholdTable built_in();

  // The model for a CUDA device name (see the header comment). Never fails.
  const ModelThresholds& lookup(std::string_view device_name) const;
  const std::vector<ModelThresholds>& models() const { return models_; }
  const ModelThresholds& fallback() const { return fallback_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<ModelThresholds> models_;
  ModelThresholds fallback_;
  std::string source_;
};

// Where the thresholds file is: `explicit_path` when non-empty (it must exist), else
// $FAULTLINE_PROBE_THRESHOLDS, else <dir of exe>/../share/faultline/thresholds.json, else
// `compiled_in_path` (the source tree's copy). nullopt when none exists.
std::optional<std::filesystem::path> find_thresholds_file(const std::string& explicit_path,
                                                          const EnvLookup& env,
                                                          const std::filesystem::path& exe_path,
                                                          const std::string& compiled_in_path);

}  // namespace faultline::kernels
