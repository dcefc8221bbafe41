#include "kernels/abft.h"

#include <bit>
#include <cstring>

namespace faultline::kernels {

std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x0200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // rounds to zero
    const int exponent = static_cast<int>(abs >> 23);
    const std::uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - exponent;  // places to the half subnormal grid (2^-24)
    const std::uint32_t half_mantissa = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t result = half_mantissa;
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u) != 0)) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits.
  std::uint32_t rebased = abs - 0x38000000u;  // subtract (127 - 15) << 23
  const std::uint32_t remainder = rebased & 0x1FFFu;
  std::uint32_t result = rebased >> 13;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float round_to_storage(float value, GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBf16:
      return bf16_bits_to_float(float_to_bf16_bits(value));
    case GemmPrecision::kFp16:
      return half_bits_to_float(float_to_half_bits(value));
    case GemmPrecision::kTf32:
    case GemmPrecision::kFp32:
      return value;
  }
  return value;
}

AbftReference abft_reference(std::span<const float> a, std::span<const float> b, int m, int n,
                             int k) {
  // B*1 and sum_j b_lj^2 per row l of B; 1^T*A and sum_i a_il^2 per column l of A.
  std::vector<double> b_row_sum(k, 0.0), b_row_sq(k, 0.0), a_col_sum(k, 0.0), a_col_sq(k, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int l = 0; l < k; ++l) {
      const double v = b[static_cast<std::size_t>(j) * k + l];
      b_row_sum[l] += v;
      b_row_sq[l] += v * v;
    }
  }
  for (int l = 0; l < k; ++l) {
    for (int i = 0; i < m; ++i) {
      const double v = a[static_cast<std::size_t>(l) * m + i];
      a_col_sum[l] += v;
      a_col_sq[l] += v * v;
    }
  }
  AbftReference ref;
  ref.row_expected.assign(m, 0.0);
  ref.row_q.assign(m, 0.0);
  for (int l = 0; l < k; ++l) {
    for (int i = 0; i < m; ++i) {
      const double v = a[static_cast<std::size_t>(l) * m + i];
      ref.row_expected[i] += v * b_row_sum[l];
      ref.row_q[i] += v * v * b_row_sq[l];
    }
  }
  ref.col_expected.assign(n, 0.0);
  ref.col_q.assign(n, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int l = 0; l < k; ++l) {
      const double v = b[static_cast<std::size_t>(j) * k + l];
      ref.col_expected[j] += a_col_sum[l] * v;
      ref.col_q[j] += a_col_sq[l] * v * v;
    }
  }
  return ref;
}

AbftSums abft_sums(std::span<const float> c, int m, int n) {
  AbftSums sums;
  sums.row.assign(m, 0.0);
  sums.col.assign(n, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const double v = c[static_cast<std::size_t>(j) * m + i];
      sums.row[i] += v;
      sums.col[j] += v;
    }
  }
  return sums;
}

std::vector<AbftMismatch> abft_compare(const AbftReference& ref, const AbftSums& sums,
                                       GemmPrecision p, int k, double sigma) {
  const double coef = abft_variance_coefficient(p, k);
  std::vector<AbftMismatch> out;
  for (std::size_t i = 0; i < ref.row_expected.size(); ++i) {
    const double tol = abft_tolerance(coef, ref.row_q[i], sigma);
    if (abft_mismatch(sums.row[i], ref.row_expected[i], tol)) {
      out.push_back({true, static_cast<int>(i), sums.row[i], ref.row_expected[i], tol});
    }
  }
  for (std::size_t j = 0; j < ref.col_expected.size(); ++j) {
    const double tol = abft_tolerance(coef, ref.col_q[j], sigma);
    if (abft_mismatch(sums.col[j], ref.col_expected[j], tol)) {
      out.push_back({false, static_cast<int>(j), sums.col[j], ref.col_expected[j], tol});
    }
  }
  return out;
}

void cpu_gemm(std::span<const float> a, std::span<const float> b, std::span<float> c, int m, int n,
              int k) {
  for (int j = 0; j < n; ++j) {
    float* cj = c.data() + static_cast<std::size_t>(j) * m;
    for (int i = 0; i < m; ++i) cj[i] = 0.0f;
    for (int l = 0; l < k; ++l) {
      const float blj = b[static_cast<std::size_t>(j) * k + l];
      const float* al = a.data() + static_cast<std::size_t>(l) * m;
      for (int i = 0; i < m; ++i) cj[i] += al[i] * blj;
    }
  }
}

}  // namespace faultline::kernels
