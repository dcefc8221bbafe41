#pragma once

// The GPU kernels of the probes, behind plain launch functions. The .cu files (compiled by nvcc)
// hold only kernels and these thin launchers; the probes' host logic lives in .cc files compiled by
// the host compiler, so JSON, options and the rest never pass through nvcc (faster builds, fewer
// surprises). Every launcher is asynchronous on the given stream and returns nothing; errors
// surface at the next synchronising call, which the probes check. Matrices are column-major;
// memory-test buffers are arrays of 32-bit words whose length is a multiple of 4 (16 bytes).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/patterns.h"

namespace faultline::kernels {

// ---------------------------------------------------------------------------------------------
// Memory patterns and error logs (memory_kernels.cu)

enum class PatternKind : std::uint32_t { kConstant, kRandom, kWalkingOnes };

struct PatternSpec {
  PatternKind kind = PatternKind::kConstant;
  std::uint32_t constant = 0;  // kConstant
  std::uint32_t walk_bit = 0;  // kWalkingOnes: word i holds 1 << ((i + walk_bit) % 32)
  std::uint32_t invert = 0;    // non-zero: complement every word
  std::uint64_t key = 0;       // kRandom: pattern_word(key, i)
};

// The word a buffer filled with `spec` holds at `index` (used by kernels and by CPU checks).
FAULTLINE_HD inline std::uint32_t expected_word(const PatternSpec& spec, std::uint64_t index) {
  std::uint32_t w = 0;
  switch (spec.kind) {
    case PatternKind::kConstant:
      w = spec.constant;
      break;
    case PatternKind::kRandom:
      w = pattern_word(spec.key, index);
      break;
    case PatternKind::kWalkingOnes:
      w = 1u << static_cast<std::uint32_t>((index + spec.walk_bit) & 31u);
      break;
  }
  return spec.invert != 0 ? ~w : w;
}

inline constexpr int kMaxRecordedErrors = 16;

struct MemoryErrorRecord {
  std::uint64_t word_index;
  std::uint32_t expected;
  std::uint32_t actual;
};

// Lives in device memory; zero it (cudaMemsetAsync) before use.
struct MemoryErrorLog {
  unsigned long long bit_errors;
  unsigned long long word_errors;
  unsigned int recorded;  // may exceed kMaxRecordedErrors; only that many are stored
  unsigned int unused;
  MemoryErrorRecord records[kMaxRecordedErrors];
};

void launch_fill_pattern(std::uint32_t* words, std::uint64_t count, PatternSpec spec,
                         cudaStream_t stream);
// Counts words that differ from the pattern into `log`.
void launch_verify_pattern(const std::uint32_t* words, std::uint64_t count, PatternSpec spec,
                           MemoryErrorLog* log, cudaStream_t stream);
// One moving-inversions sweep: every word must equal `pattern` and is overwritten with ~pattern;
// ascending or descending address order.
void launch_moving_inversion(std::uint32_t* words, std::uint64_t count, std::uint32_t pattern,
                             bool descending, MemoryErrorLog* log, cudaStream_t stream);
// Flips bit `bit` (0..31) of words[index] (fault injection).
void launch_flip_word_bit(std::uint32_t* words, std::uint64_t index, int bit, cudaStream_t stream);

// STREAM-style bandwidth kernels over 16-byte vectors.
void launch_copy(const void* src, void* dst, std::uint64_t vectors, cudaStream_t stream);
// a = b + scalar * c over floats.
void launch_triad(void* a, const void* b, const void* c, float scalar, std::uint64_t vectors,
                  cudaStream_t stream);
// Reads every vector and folds it into `sink` (so the reads cannot be optimised away).
void launch_read(const void* src, std::uint64_t vectors, std::uint32_t* sink, cudaStream_t stream);

// A single-thread kernel that spins for `microseconds` (throttle injection).
void launch_sleep(double microseconds, cudaStream_t stream);
// A kernel that spins until *release (device memory) is non-zero: the hang-kernel injection.
void launch_spin_forever(const unsigned int* release, cudaStream_t stream);

// All-reduce test data: rank r's element i is allreduce_input(key, i) + r, a small integer, so the
// sum over n ranks is exact in FP32 and checkable.
FAULTLINE_HD inline float allreduce_input(std::uint64_t key, std::uint64_t index, int rank) {
  return static_cast<float>(static_cast<int>(pattern_word(key, index) % 17u) - 8 + rank);
}
void launch_fill_allreduce_input(float* data, std::uint64_t count, std::uint64_t key, int rank,
                                 cudaStream_t stream);
// Checks data[i] == sum over ranks of allreduce_input(key, i, r), bit for bit.
void launch_verify_allreduce_output(const float* data, std::uint64_t count, std::uint64_t key,
                                    int nranks, MemoryErrorLog* log, cudaStream_t stream);

// Returns cudaSuccess when this binary has a kernel image for the current device (else typically
// cudaErrorNoKernelImageForDevice, e.g. an sm_80 GPU with an sm_90-only build).
cudaError_t check_kernel_image();

// ---------------------------------------------------------------------------------------------
// GEMM burn support (gemm_kernels.cu)

enum class ElementType : std::uint32_t { kBf16, kFp16, kFp32 };

inline std::size_t element_size(ElementType t) { return t == ElementType::kFp32 ? 4 : 2; }

// Fills `count` elements with uniform_value(key, i) converted to the element type.
void launch_fill_uniform(void* data, ElementType type, std::uint64_t count, std::uint64_t key,
                         cudaStream_t stream);

// Adds the row and column sums (and sums of squares) of a rows x cols matrix into the given double
// arrays; any output may be null. The outputs must be zeroed first.
void launch_matrix_sums(const void* m, ElementType type, int rows, int cols, double* row_sum,
                        double* row_sq, double* col_sum, double* col_sq, cudaStream_t stream);
// out[i] = sum_l f(m[i, l]) * x[l], f = square or identity; m is rows x cols.
void launch_gemv_rows(const void* m, ElementType type, int rows, int cols, const double* x,
                      bool square, double* out, cudaStream_t stream);
// out[j] = sum_l x[l] * f(m[l, j]); m is rows x cols.
void launch_gemv_cols(const void* m, ElementType type, int rows, int cols, const double* x,
                      bool square, double* out, cudaStream_t stream);

struct AbftRecord {
  int iteration;
  int is_row;
  int index;
  int unused;
  double got;
  double expected;
  double tolerance;
};

// Lives in device memory; zero it before use.
struct AbftLog {
  unsigned long long row_mismatches;
  unsigned long long col_mismatches;
  unsigned int recorded;
  unsigned int max_ratio_bits;  // float bits of max |got - expected| / tolerance (healthy margin)
  AbftRecord records[kMaxRecordedErrors];
};

// Compares the sums with the references and zeroes the sums (so the next iteration's
// launch_matrix_sums can add into them without a memset).
struct AbftCompareArgs {
  double* row_sum;
  const double* row_expected;
  const double* row_q;
  int m;
  double* col_sum;
  const double* col_expected;
  const double* col_q;
  int n;
  double coefficient;  // abft_variance_coefficient
  double sigma;
  int iteration;     // global index, for the log
  int flag_index;    // slot in iteration_flags set to 1 on any mismatch
  int track_margin;  // non-zero: fold |diff| / tol into max_ratio_bits
  AbftLog* log;
  int* iteration_flags;
};
void launch_abft_compare(const AbftCompareArgs& args, cudaStream_t stream);

// Flips the magnifying exponent bit (abft.h) of element `index` (fault injection).
void launch_flip_element_bit(void* data, ElementType type, std::uint64_t index,
                             cudaStream_t stream);

// C = A * B with our own tiled kernel: BF16 inputs on tensor cores (WMMA), FP32 accumulation,
// C stored as BF16 or FP32. Requires m, n, k multiples of 64 and 16-byte aligned pointers.
void launch_tiled_gemm(const void* a, const void* b, void* c, ElementType c_type, int m, int n,
                       int k, cudaStream_t stream);

}  // namespace faultline::kernels
