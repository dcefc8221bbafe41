#pragma once

// Algorithm-based fault tolerance (ABFT) for the GEMM burn: a silent error in C = A*B shows up in
// its checksums. For every row i the sum of C's row must equal (A*(B*1))_i and for every column j
// the column sum must equal ((1^T*A)*B)_j; the right-hand sides come from the inputs alone, so a
// corrupted output element is caught (and located at the crossing of the failing row and column)
// without a second GEMM.
//
// A healthy GPU does not match exactly: C is rounded to its storage type, tensor cores accumulate
// in (roughly) FP32, and TF32 rounds its inputs. The tolerance models those roundings as
// independent errors, so a row sum's error has variance
//     coef(k) * Q_i,   Q_i = sum_l a_il^2 * sum_j b_lj^2,
//     coef(k) = u_out^2 + u_acc^2 * k / 2 + 2 * u_in^2,
// (Q_i is E[sum_j c_ij^2] for the zero-mean random inputs the burn uses; columns are symmetric),
// and the tolerance is sigma * sqrt(coef * Q). Consequence: a flip that multiplies an element by a
// large power of two (an exponent bit) is caught; a flip in a low mantissa bit that changes the
// element by less than the tolerance is not, by design of any checksum with rounding. The bit-exact
// digest GEMM (digest.h) covers that gap on fixed inputs.
//
// The inline functions below run on the CPU (tests, reference) and inside the CUDA compare kernel.

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/host_device.h"

namespace faultline::kernels {

enum class GemmPrecision { kBf16, kFp16, kTf32, kFp32 };

// Unit roundoffs of the three error sources. FP32 accumulation inside tensor cores is not IEEE
// round-to-nearest (alignment truncates), so u_acc is taken 4x wider than FP32's 2^-24; TF32 may
// truncate its inputs, so u_in is 2^-10 rather than 2^-11.
struct RoundingModel {
  double u_in;
  double u_out;
  double u_acc;
};

FAULTLINE_HD inline RoundingModel rounding_model(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBf16:
      return {0.0, 0x1p-8, 0x1p-22};
    case GemmPrecision::kFp16:
      return {0.0, 0x1p-11, 0x1p-22};
    case GemmPrecision::kTf32:
      return {0x1p-10, 0x1p-24, 0x1p-22};
    case GemmPrecision::kFp32:
      break;
  }
  return {0.0, 0x1p-24, 0x1p-22};
}

FAULTLINE_HD inline double abft_variance_coefficient(GemmPrecision p, int k) {
  const RoundingModel m = rounding_model(p);
  return m.u_out * m.u_out + m.u_acc * m.u_acc * static_cast<double>(k) * 0.5 +
         2.0 * m.u_in * m.u_in;
}

// Absolute slack for rows whose Q is (near) zero; far below any error worth reporting.
inline constexpr double kAbftAbsoluteFloor = 1e-6;

FAULTLINE_HD inline double abft_tolerance(double coefficient, double q, double sigma) {
  return sigma * sqrt(coefficient * (q > 0.0 ? q : 0.0)) + kAbftAbsoluteFloor;
}

// True when a checksum disagrees: outside the tolerance, or not a number at all.
FAULTLINE_HD inline bool abft_mismatch(double got, double expected, double tolerance) {
  const double diff = fabs(got - expected);
  return !(diff <= tolerance);  // NaN compares false, so NaN is a mismatch
}

// The exponent bit whose flip enlarges a value's magnitude: the highest exponent bit that is 0.
// (Flipping a 1 shrinks the value, which can hide under the tolerance.) `exponent_lsb` and
// `exponent_width` describe the format: bf16 7/8, fp16 10/5, fp32 23/8.
FAULTLINE_HD inline int magnifying_bit(std::uint32_t bits, int exponent_lsb, int exponent_width) {
  for (int b = exponent_lsb + exponent_width - 1; b >= exponent_lsb; --b) {
    if (((bits >> b) & 1u) == 0u) return b;
  }
  return exponent_lsb + exponent_width - 1;
}

// ---- CPU reference (tests, and documentation of what the kernels compute) ----

// Storage conversions with round-to-nearest-even, as CUDA's __float2bfloat16 / __float2half do.
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);
// Rounds a float to what storing it in the precision's output type keeps.
float round_to_storage(float value, GemmPrecision p);

// Expected checksums and Q terms, from column-major A (m x k) and B (k x n) as the GEMM sees them.
struct AbftReference {
  std::vector<double> row_expected;  // (A*(B*1))_i, size m
  std::vector<double> col_expected;  // ((1^T*A)*B)_j, size n
  std::vector<double> row_q;
  std::vector<double> col_q;
};
AbftReference abft_reference(std::span<const float> a, std::span<const float> b, int m, int n,
                             int k);

struct AbftSums {
  std::vector<double> row;
  std::vector<double> col;
};
// Row and column sums of column-major C (m x n).
AbftSums abft_sums(std::span<const float> c, int m, int n);

struct AbftMismatch {
  bool is_row = true;
  int index = 0;
  double got = 0;
  double expected = 0;
  double tolerance = 0;
};
std::vector<AbftMismatch> abft_compare(const AbftReference& ref, const AbftSums& sums,
                                       GemmPrecision p, int k, double sigma);

// C = A*B, column-major, FP32 accumulation in order l = 0..k-1.
void cpu_gemm(std::span<const float> a, std::span<const float> b, std::span<float> c, int m, int n,
              int k);

}  // namespace faultline::kernels
