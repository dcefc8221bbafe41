// The gemm probe: a sustained GEMM burn per path (cuBLAS BF16/FP16/TF32 and our tiled kernel),
// every iteration verified by ABFT checksums (abft.h), with plain cuBLAS chunks interleaved as the
// same-run baseline, followed by the bit-exact digest GEMM (digest.h).

#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "kernels/abft.h"
#include "kernels/bandwidth.h"
#include "kernels/cuda_probes.h"
#include "kernels/cuda_util.h"
#include "kernels/device_kernels.h"
#include "kernels/digest.h"
#include "kernels/patterns.h"

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxChunk = 4096;
constexpr double kChunkTargetMs = 200.0;
constexpr int kBaselineEvery = 4;  // chunk i is a baseline chunk when i % 4 == 1
constexpr std::size_t kReportedMismatches = 8;

// cuBLAS is opened the first time a GEMM probe needs it instead of being linked: loading
// libcublas runs its initialisers (about half a second of CPU on a 2-core machine), which every
// other probe, and every program linking the probes, paid at start-up. The soname is the one of
// the headers built against; the library is looked for where the loader looks, then beside the
// CUDA runtime this program is linked with.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

template <typename T>
void bind(void* library, const char* name, T& fn, const std::string& soname) {
  fn = reinterpret_cast<T>(::dlsym(library, name));
  if (fn == nullptr) throw GpuError(soname + ": has no symbol " + name, -1);
}

CublasApi open_cublas() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why;
  if (library == nullptr) {
    const char* error = ::dlerror();
    why = error != nullptr ? error : soname + ": not found";
    Dl_info runtime{};
    if (::dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &runtime) != 0 &&
        runtime.dli_fname != nullptr) {
      const auto beside = std::filesystem::path(runtime.dli_fname).parent_path() / soname;
      library = ::dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr) why += "; nor beside the CUDA runtime, " + beside.string();
    }
  }
  if (library == nullptr) throw GpuError("cannot load cuBLAS: " + why, -1);
  CublasApi api;
  bind(library, "cublasCreate_v2", api.create, soname);
  bind(library, "cublasDestroy_v2", api.destroy, soname);
  bind(library, "cublasSetStream_v2", api.set_stream, soname);
  bind(library, "cublasGemmEx", api.gemm_ex, soname);
  bind(library, "cublasGetStatusName", api.status_name, soname);
  bind(library, "cublasGetStatusString", api.status_string, soname);
  return api;  // the library stays loaded for the life of the process
}

// Throws GpuError when cuBLAS cannot be loaded (and tries again at the next call).
const CublasApi& cublas() {
  static const CublasApi api = open_cublas();
  return api;
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw GpuError(std::string(what) + ": " + cublas().status_name(status) + ": " +
                     cublas().status_string(status),
                 -1);
}

class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream) {
    check_cublas(cublas().create(&handle_), "cublasCreate");
    check_cublas(cublas().set_stream(handle_, stream), "cublasSetStream");
  }
  ~CublasHandle() { cublas().destroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

struct PathSetup {
  ElementType type;
  cudaDataType_t data_type;
  cublasComputeType_t compute;
  GemmPrecision precision;
  bool tiled;
};

PathSetup setup_for(GemmPath path) {
  switch (path) {
    case GemmPath::kBf16:
      return {ElementType::kBf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F, GemmPrecision::kBf16, false};
    case GemmPath::kFp16:
      return {ElementType::kFp16, CUDA_R_16F, CUBLAS_COMPUTE_32F, GemmPrecision::kFp16, false};
    case GemmPath::kTf32:
      return {ElementType::kFp32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, GemmPrecision::kTf32,
              false};
    case GemmPath::kTiled:
      break;
  }
  return {ElementType::kBf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F, GemmPrecision::kBf16, true};
}

// C = A * B on the path; C is stored as `c_type`.
void run_gemm(const PathSetup& p, cublasHandle_t handle, const void* a, const void* b, void* c,
              ElementType c_type, int n, cudaStream_t stream) {
  if (p.tiled) {
    launch_tiled_gemm(a, b, c, c_type, n, n, n, stream);
    return;
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const cudaDataType_t c_data = c_type == ElementType::kFp32 ? CUDA_R_32F : p.data_type;
  check_cublas(
      cublas().gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, p.data_type, n, b,
                       p.data_type, n, &beta, c, c_data, n, p.compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

struct BurnResult {
  std::int64_t burn_iterations = 0;
  double burn_ms = 0;
  std::int64_t baseline_iterations = 0;
  double baseline_ms = 0;
  std::int64_t mismatched_iterations = 0;
  std::int64_t injected = 0;
  std::int64_t detected = 0;
  double gemm_ms = 0;
  AbftLog log{};
};

void put_burn_metrics(ProbeReport& report, const std::string& p, const BurnResult& r, bool baseline,
                      bool injecting, int n) {
  const std::string prefix = "gemm_" + p + "_";
  report.metrics[prefix + "size"] = n;
  report.metrics[prefix + "iterations"] = static_cast<double>(r.burn_iterations);
  report.metrics[prefix + "gemm_ms"] = r.gemm_ms;
  report.metrics[prefix + "tflops"] = gemm_tflops(n, n, n, r.burn_iterations, r.burn_ms / 1e3);
  if (baseline && r.baseline_iterations > 0) {
    const double base = gemm_tflops(n, n, n, r.baseline_iterations, r.baseline_ms / 1e3);
    report.metrics[prefix + "baseline_tflops"] = base;
    report.metrics[prefix + "vs_baseline"] =
        base > 0 ? report.metrics[prefix + "tflops"] / base : 0.0;
  }
  report.metrics[prefix + "mismatched_iterations"] = static_cast<double>(r.mismatched_iterations);
  report.metrics[prefix + "row_mismatches"] = static_cast<double>(r.log.row_mismatches);
  report.metrics[prefix + "col_mismatches"] = static_cast<double>(r.log.col_mismatches);
  if (injecting) {
    report.metrics[prefix + "injected_iterations"] = static_cast<double>(r.injected);
    report.metrics[prefix + "detected_injected_iterations"] = static_cast<double>(r.detected);
  } else {
    report.metrics[prefix + "max_error_to_tolerance"] = std::bit_cast<float>(r.log.max_ratio_bits);
  }
}

// The ABFT sums of one burn, n doubles each in one allocation: the reference checksums and
// Q terms (from the inputs alone: they do not change during the burn) and the sums of C.
enum SumVector {
  kBRowSum,
  kBRowSq,
  kAColSum,
  kAColSq,
  kRowRef,
  kRowQ,
  kColRef,
  kColQ,
  kRowSum,
  kColSum,
  kVectors
};

double* sum_vector(double* vectors, SumVector which, int n) {
  return vectors + static_cast<std::size_t>(which) * n;
}

// Zeroes `vectors` and computes the reference row and column checksums and Q terms of A x B.
void reference_checksums(ElementType type, int n, const void* a, const void* b, double* vectors,
                         cudaStream_t s) {
  auto vec = [&](SumVector which) { return sum_vector(vectors, which, n); };
  FAULTLINE_CUDA(cudaMemsetAsync(vectors, 0, sizeof(double) * kVectors * n, s));
  launch_matrix_sums(b, type, n, n, vec(kBRowSum), vec(kBRowSq), nullptr, nullptr, s);
  launch_matrix_sums(a, type, n, n, nullptr, nullptr, vec(kAColSum), vec(kAColSq), s);
  launch_gemv_rows(a, type, n, n, vec(kBRowSum), false, vec(kRowRef), s);
  launch_gemv_rows(a, type, n, n, vec(kBRowSq), true, vec(kRowQ), s);
  launch_gemv_cols(b, type, n, n, vec(kAColSum), false, vec(kColRef), s);
  launch_gemv_cols(b, type, n, n, vec(kAColSq), true, vec(kColQ), s);
}

// The time of one GEMM (ms): the mean of three after two to warm up.
double calibrate_gemm_ms(const PathSetup& p, cublasHandle_t handle, const void* a, const void* b,
                         void* c, int n, const Stream& stream) {
  const cudaStream_t s = stream.get();
  Event e0, e1;
  run_gemm(p, handle, a, b, c, p.type, n, s);
  run_gemm(p, handle, a, b, c, p.type, n, s);
  e0.record(s);
  for (int i = 0; i < 3; ++i) run_gemm(p, handle, a, b, c, p.type, n, s);
  e1.record(s);
  FAULTLINE_CUDA(cudaGetLastError());
  stream.synchronize("GEMM calibration");
  return elapsed_ms(e0, e1) / 3.0;
}

// The comparison of C's sums with the reference (log, flags and margin left to the caller).
AbftCompareArgs abft_args(double* vectors, int n, GemmPrecision precision, double sigma) {
  AbftCompareArgs args{};
  args.row_sum = sum_vector(vectors, kRowSum, n);
  args.row_expected = sum_vector(vectors, kRowRef, n);
  args.row_q = sum_vector(vectors, kRowQ, n);
  args.m = n;
  args.col_sum = sum_vector(vectors, kColSum, n);
  args.col_expected = sum_vector(vectors, kColRef, n);
  args.col_q = sum_vector(vectors, kColQ, n);
  args.n = n;
  args.coefficient = abft_variance_coefficient(precision, n);
  args.sigma = sigma;
  return args;
}

// A burn chunk of `chunk` iterations that took `ms`: its flagged iterations (read back from
// the device) are mismatches, and with an injected bit flip in each, injected and detected.
void count_burn_chunk(const int* device_flags, std::vector<int>& host_flags, int chunk,
                      bool bitflip, double ms, BurnResult& result) {
  FAULTLINE_CUDA(
      cudaMemcpy(host_flags.data(), device_flags, sizeof(int) * chunk, cudaMemcpyDeviceToHost));
  const auto flagged = std::count(host_flags.begin(), host_flags.end(), 1);
  result.mismatched_iterations += flagged;
  if (bitflip) {
    result.injected += chunk;
    result.detected += flagged;
  }
  result.burn_iterations += chunk;
  result.burn_ms += ms;
}

BurnResult burn(GemmPath path, const ProbeOptions& options, const ProbeContext& context,
                ProbeReport& report, const Stream& stream, cublasHandle_t handle) {
  const PathSetup p = setup_for(path);
  const int n = options.gemm.size;
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  const std::size_t bytes = elements * element_size(p.type);
  const cudaStream_t s = stream.get();
  const bool bitflip = options.common.inject == Injection::kBitflip;
  const bool throttle = options.common.inject == Injection::kThrottle;
  const bool baseline = options.gemm.baseline && !p.tiled;

  auto a = device_alloc<std::byte>(bytes, "cudaMalloc(A)");
  auto b = device_alloc<std::byte>(bytes, "cudaMalloc(B)");
  auto c = device_alloc<std::byte>(bytes, "cudaMalloc(C)");
  const std::uint64_t seed = options.common.seed;
  launch_fill_uniform(a.get(), p.type, elements, stream_key(seed, 0xA), s);
  launch_fill_uniform(b.get(), p.type, elements, stream_key(seed, 0xB), s);

  // Reference checksums and Q terms, from the inputs alone (they do not change during the burn).
  auto vectors = device_alloc<double>(static_cast<std::size_t>(kVectors) * n, "cudaMalloc(sums)");
  reference_checksums(p.type, n, a.get(), b.get(), vectors.get(), s);
  auto log = device_alloc<AbftLog>(1, "cudaMalloc(log)");
  auto flags = device_alloc<int>(kMaxChunk, "cudaMalloc(flags)");
  FAULTLINE_CUDA(cudaMemsetAsync(log.get(), 0, sizeof(AbftLog), s));
  FAULTLINE_CUDA(cudaGetLastError());
  stream.synchronize("reference checksums");

  // Calibrate: time of one GEMM, hence iterations per chunk and the throttle's sleep.
  BurnResult result;
  result.gemm_ms = calibrate_gemm_ms(p, handle, a.get(), b.get(), c.get(), n, stream);
  const int chunk =
      std::clamp(static_cast<int>(kChunkTargetMs / std::max(result.gemm_ms, 1e-3)), 1, kMaxChunk);
  const double sleep_us = throttle ? result.gemm_ms * 1000.0 : 0.0;

  AbftCompareArgs args = abft_args(vectors.get(), n, p.precision, options.gemm.tolerance_sigma);
  args.log = log.get();
  args.iteration_flags = flags.get();
  args.track_margin = bitflip ? 0 : 1;

  const std::string name(gemm_path_name(path));
  std::vector<int> host_flags(chunk);
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.gemm.duration_s));
  auto last_publish = Clock::now();
  int burn_chunks = 0;
  int baseline_chunks = 0;
  Event e0, e1;
  for (int chunk_index = 0;; ++chunk_index) {
    const bool baseline_chunk = baseline && chunk_index % kBaselineEvery == 1;
    e0.record(s);
    if (baseline_chunk) {
      for (int it = 0; it < chunk; ++it) {
        run_gemm(p, handle, a.get(), b.get(), c.get(), p.type, n, s);
      }
    } else {
      FAULTLINE_CUDA(cudaMemsetAsync(flags.get(), 0, sizeof(int) * chunk, s));
      for (int it = 0; it < chunk; ++it) {
        const std::int64_t iteration = result.burn_iterations + it;
        run_gemm(p, handle, a.get(), b.get(), c.get(), p.type, n, s);
        if (throttle) launch_sleep(sleep_us, s);
        if (bitflip) {
          const std::uint64_t where =
              mix64(stream_key(seed, 0xF11B) ^ static_cast<std::uint64_t>(iteration)) % elements;
          launch_flip_element_bit(c.get(), p.type, where, s);
        }
        launch_matrix_sums(c.get(), p.type, n, n, args.row_sum, nullptr, args.col_sum, nullptr, s);
        args.iteration = static_cast<int>(iteration);
        args.flag_index = it;
        launch_abft_compare(args, s);
      }
    }
    e1.record(s);
    FAULTLINE_CUDA(cudaGetLastError());
    stream.synchronize("GEMM burn chunk");
    const double ms = elapsed_ms(e0, e1);
    if (baseline_chunk) {
      result.baseline_iterations += chunk;
      result.baseline_ms += ms;
      ++baseline_chunks;
    } else {
      count_burn_chunk(flags.get(), host_flags, chunk, bitflip, ms, result);
      ++burn_chunks;
    }
    const bool enough = burn_chunks >= 2 && (!baseline || baseline_chunks >= 1);
    if (enough && Clock::now() >= end) break;
    if (context.publish && Clock::now() - last_publish > std::chrono::seconds(1)) {
      FAULTLINE_CUDA(cudaMemcpy(&result.log, log.get(), sizeof(AbftLog), cudaMemcpyDeviceToHost));
      put_burn_metrics(report, name, result, baseline, bitflip, n);
      context.publish(report);
      last_publish = Clock::now();
    }
  }
  FAULTLINE_CUDA(cudaMemcpy(&result.log, log.get(), sizeof(AbftLog), cudaMemcpyDeviceToHost));
  return result;
}

// Host inputs and reference for the digest, shared by every path.
struct DigestInputs {
  int size = 0;
  std::vector<float> a;
  std::vector<float> b;
  std::uint64_t reference = 0;
};

// Runs the digest GEMM on `path`; returns the digest.
std::uint64_t digest_on(GemmPath path, const DigestInputs& in, const ProbeOptions& options,
                        const Stream& stream, cublasHandle_t handle, bool inject) {
  const PathSetup p = setup_for(path);
  const int n = in.size;
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  const cudaStream_t s = stream.get();
  auto a = device_alloc<std::byte>(elements * element_size(p.type), "cudaMalloc(digest A)");
  auto b = device_alloc<std::byte>(elements * element_size(p.type), "cudaMalloc(digest B)");
  auto c = device_alloc<float>(elements, "cudaMalloc(digest C)");
  auto upload = [&](const std::vector<float>& host, void* device) {
    if (p.type == ElementType::kFp32) {
      FAULTLINE_CUDA(cudaMemcpy(device, host.data(), elements * 4, cudaMemcpyHostToDevice));
      return;
    }
    std::vector<std::uint16_t> bits(elements);
    for (std::size_t i = 0; i < elements; ++i) {
      bits[i] =
          p.type == ElementType::kBf16 ? float_to_bf16_bits(host[i]) : float_to_half_bits(host[i]);
    }
    FAULTLINE_CUDA(cudaMemcpy(device, bits.data(), elements * 2, cudaMemcpyHostToDevice));
  };
  upload(in.a, a.get());
  upload(in.b, b.get());
  run_gemm(p, handle, a.get(), b.get(), c.get(), ElementType::kFp32, n, s);
  if (inject) {
    // The lowest mantissa bit: far below any checksum tolerance, yet the digest must change.
    const std::uint64_t where = mix64(options.common.seed ^ 0xD16E57ull) % elements;
    launch_flip_word_bit(reinterpret_cast<std::uint32_t*>(c.get()), where, 0, s);
  }
  FAULTLINE_CUDA(cudaGetLastError());
  stream.synchronize("digest GEMM");
  std::vector<float> out(elements);
  FAULTLINE_CUDA(cudaMemcpy(out.data(), c.get(), elements * 4, cudaMemcpyDeviceToHost));
  return digest_floats(out);
}

nlohmann::json mismatch_records(const AbftLog& log) {
  nlohmann::json out = nlohmann::json::array();
  const std::size_t count = std::min<std::size_t>(
      {log.recorded, static_cast<std::size_t>(kMaxRecordedErrors), kReportedMismatches});
  for (std::size_t i = 0; i < count; ++i) {
    const AbftRecord& r = log.records[i];
    out.push_back({{"iteration", r.iteration},
                   {"checksum", r.is_row != 0 ? "row" : "column"},
                   {"index", r.index},
                   {"got", r.got},
                   {"expected", r.expected},
                   {"tolerance", r.tolerance}});
  }
  return out;
}

}  // namespace

void run_gemm_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report) {
  const auto& g = options.gemm;
  const bool bitflip = options.common.inject == Injection::kBitflip;
  Stream stream;
  CublasHandle handle(stream.get());
  std::int64_t injected = 0;
  std::int64_t detected = 0;

  report.details["abft"] = {{"tolerance_sigma", g.tolerance_sigma},
                            {"model", "sigma * sqrt(coef(k) * Q), see kernels/abft.h"}};
  if (options.common.inject == Injection::kHangKernel) {
    // A wedged GPU: the kernel never returns and this thread blocks in the driver. Only the
    // deadline (the watchdog kills this process, and with it the CUDA context) ends it.
    auto release = device_alloc<unsigned int>(1, "cudaMalloc(release)");
    FAULTLINE_CUDA(cudaMemsetAsync(release.get(), 0, sizeof(unsigned int), stream.get()));
    launch_spin_forever(release.get(), stream.get());
    FAULTLINE_CUDA(cudaStreamSynchronize(stream.get()));
  }
  for (GemmPath path : g.paths) {
    const std::string name(gemm_path_name(path));
    BurnResult r = burn(path, options, context, report, stream, handle.get());
    put_burn_metrics(report, name, r, g.baseline && path != GemmPath::kTiled, bitflip, g.size);
    injected += r.injected;
    detected += std::min(r.detected, r.injected);
    if (r.log.recorded > 0) report.details["checksum_mismatches"][name] = mismatch_records(r.log);
    if (context.publish) context.publish(report);
  }

  if (g.digest_size > 0) {
    DigestInputs in;
    in.size = g.digest_size;
    in.a = digest_input(options.common.seed, g.digest_size, 1);
    in.b = digest_input(options.common.seed, g.digest_size, 2);
    in.reference = reference_digest(options.common.seed, g.digest_size);
    std::optional<std::uint64_t> expected_elsewhere;
    if (!g.expect_digest.empty()) expected_elsewhere = parse_digest_hex(g.expect_digest);
    report.details["digest_reference"] = digest_hex(in.reference);
    report.details["digest_size"] = g.digest_size;
    report.details["digest_seed"] = options.common.seed;
    for (GemmPath path : g.paths) {
      const std::string name(gemm_path_name(path));
      const std::uint64_t d = digest_on(path, in, options, stream, handle.get(), bitflip);
      const bool mismatch = d != in.reference || (expected_elsewhere && d != *expected_elsewhere);
      report.metrics["gemm_" + name + "_digest_mismatch"] = mismatch ? 1.0 : 0.0;
      report.details["digests"][name] = digest_hex(d);
      if (bitflip) {
        ++injected;
        if (mismatch) ++detected;
      }
    }
    if (expected_elsewhere && *expected_elsewhere != in.reference) {
      report.notes.push_back("--expect-digest " + g.expect_digest +
                             " differs from the CPU reference " + digest_hex(in.reference) +
                             " for this seed and size: was it produced with other settings?");
    }
  }
  if (bitflip) {
    report.metrics["injected_faults"] = static_cast<double>(injected);
    report.metrics["detected_injected_faults"] = static_cast<double>(detected);
  }
  if (options.common.inject == Injection::kThrottle) {
    report.notes.push_back(
        "throttle injected: each burn GEMM is followed by a sleep as long as "
        "the GEMM itself");
  }
}

}  // namespace faultline::kernels
