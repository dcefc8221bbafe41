// Kernels for the GEMM burn: input generation, the ABFT checksum pieces (row/column sums, the
// reference GEMVs, the comparison against the tolerance of abft.h), bit-flip injection, and our
// own tiled BF16 tensor-core GEMM. See device_kernels.h for the contracts.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kernels/abft.h"
#include "kernels/device_kernels.h"
#include "kernels/launch.cuh"

namespace faultline::kernels {
namespace {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}

template <typename T>
__global__ void fill_uniform_kernel(T* data, std::uint64_t count, std::uint64_t key) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    data[i] = from_float<T>(uniform_value(key, i));
  }
}

// One block covers kSumRows rows x kSumCols columns; thread t owns row t of the tile. Row partial
// sums stay in registers; column partial sums are reduced across each warp with shuffles, parked
// per warp in shared memory (plain stores, no shared atomics), summed across the warps, and added
// to global memory with one atomic per column and block.
constexpr int kSumRows = 128;
constexpr int kSumCols = 128;
constexpr int kSumWarps = kSumRows / 32;

template <typename T>
__global__ void __launch_bounds__(kSumRows)
    matrix_sums_kernel(const T* __restrict__ m, int rows, int cols, double* row_sum, double* row_sq,
                       double* col_sum, double* col_sq) {
  __shared__ float col_part[kSumWarps][kSumCols];
  __shared__ float col_part_sq[kSumWarps][kSumCols];
  const int t = threadIdx.x;
  const int warp = t / 32;
  const int lane = t & 31;
  const int i = blockIdx.x * kSumRows + t;
  const int j0 = blockIdx.y * kSumCols;
  const bool want_cols = col_sum != nullptr || col_sq != nullptr;
  const bool want_col_sq = col_sq != nullptr;
  double r = 0.0;
  double r2 = 0.0;
  for (int jj = 0; jj < kSumCols; ++jj) {
    const int j = j0 + jj;
    float v = 0.0f;
    if (i < rows && j < cols) v = to_float(m[static_cast<std::size_t>(j) * rows + i]);
    r += v;
    r2 += static_cast<double>(v) * v;
    if (want_cols) {
      float s = v;
      for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, offset);
      if (lane == 0) col_part[warp][jj] = s;
      if (want_col_sq) {
        float s2 = v * v;
        for (int offset = 16; offset > 0; offset >>= 1) {
          s2 += __shfl_down_sync(0xFFFFFFFFu, s2, offset);
        }
        if (lane == 0) col_part_sq[warp][jj] = s2;
      }
    }
  }
  if (i < rows) {
    if (row_sum != nullptr) atomicAdd(&row_sum[i], r);
    if (row_sq != nullptr) atomicAdd(&row_sq[i], r2);
  }
  if (want_cols) {
    __syncthreads();
    for (int c = t; c < kSumCols; c += blockDim.x) {
      const int j = j0 + c;
      if (j >= cols) continue;
      double s = 0.0;
      double s2 = 0.0;
      for (int w = 0; w < kSumWarps; ++w) {
        s += col_part[w][c];
        if (want_col_sq) s2 += col_part_sq[w][c];
      }
      if (col_sum != nullptr) atomicAdd(&col_sum[j], s);
      if (want_col_sq) atomicAdd(&col_sq[j], s2);
    }
  }
}

// out[i] = sum_l f(m[i + l*rows]) * x[l]; one thread per row (reads are coalesced across rows),
// the l range split across blockIdx.y with atomics to give the GPU enough blocks.
constexpr int kGemvSplit = 64;

template <typename T>
__global__ void gemv_rows_kernel(const T* __restrict__ m, int rows, int cols,
                                 const double* __restrict__ x, bool square, double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const int per = (cols + gridDim.y - 1) / gridDim.y;
  const int l0 = blockIdx.y * per;
  const int l1 = min(cols, l0 + per);
  double acc = 0.0;
  for (int l = l0; l < l1; ++l) {
    double v = to_float(m[static_cast<std::size_t>(l) * rows + i]);
    if (square) v *= v;
    acc += v * x[l];
  }
  atomicAdd(&out[i], acc);
}

// out[j] = sum_l x[l] * f(m[l + j*rows]); one block per column j.
template <typename T>
__global__ void gemv_cols_kernel(const T* __restrict__ m, int rows, int cols,
                                 const double* __restrict__ x, bool square, double* out) {
  __shared__ double partial[kThreads];
  const int j = blockIdx.x;
  double acc = 0.0;
  for (int l = threadIdx.x; l < rows; l += blockDim.x) {
    double v = to_float(m[static_cast<std::size_t>(j) * rows + l]);
    if (square) v *= v;
    acc += x[l] * v;
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[j] = partial[0];
}

__global__ void abft_compare_kernel(AbftCompareArgs a) {
  const int total = a.m + a.n;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const bool is_row = t < a.m;
    const int index = is_row ? t : t - a.m;
    double* sum = is_row ? &a.row_sum[index] : &a.col_sum[index];
    const double got = *sum;
    *sum = 0.0;  // ready for the next iteration's sums
    const double expected = is_row ? a.row_expected[index] : a.col_expected[index];
    const double q = is_row ? a.row_q[index] : a.col_q[index];
    const double tolerance = abft_tolerance(a.coefficient, q, a.sigma);
    if (abft_mismatch(got, expected, tolerance)) {
      atomicAdd(is_row ? &a.log->row_mismatches : &a.log->col_mismatches, 1ull);
      a.iteration_flags[a.flag_index] = 1;
      const unsigned slot = atomicAdd(&a.log->recorded, 1u);
      if (slot < kMaxRecordedErrors) {
        AbftRecord& r = a.log->records[slot];
        r.iteration = a.iteration;
        r.is_row = is_row ? 1 : 0;
        r.index = index;
        r.got = got;
        r.expected = expected;
        r.tolerance = tolerance;
      }
    } else if (a.track_margin != 0) {
      const float ratio = static_cast<float>(fabs(got - expected) / tolerance);
      // Non-negative floats order like their bit patterns.
      atomicMax(&a.log->max_ratio_bits, __float_as_uint(ratio));
    }
  }
}

__global__ void flip_element_bit_kernel(void* data, ElementType type, std::uint64_t index) {
  if (type == ElementType::kFp32) {
    auto* p = static_cast<std::uint32_t*>(data) + index;
    *p ^= 1u << magnifying_bit(*p, 23, 8);
  } else {
    auto* p = static_cast<std::uint16_t*>(data) + index;
    const std::uint32_t bits = *p;
    const int bit =
        type == ElementType::kBf16 ? magnifying_bit(bits, 7, 8) : magnifying_bit(bits, 10, 5);
    *p = static_cast<std::uint16_t>(bits ^ (1u << bit));
  }
}

// ---- tiled GEMM ----
// Block tile 64x64, k-step 32, 4 warps in a 2x2 layout, each warp 32x32 = 2x2 WMMA 16x16x16
// fragments. Tiles are staged in shared memory (column-major, padded to spread banks); the
// epilogue goes through shared memory so C can be stored in any type.
constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 32;
constexpr int kLdA = kBM + 8;
constexpr int kLdB = kBK + 8;
constexpr int kLdC = kBM + 4;

template <typename OutT>
__global__ void __launch_bounds__(128)
    tiled_gemm_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                      OutT* __restrict__ c, int m, int n, int k) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(128) __nv_bfloat16 as[kBK * kLdA];
  __shared__ __align__(128) __nv_bfloat16 bs[kBN * kLdB];
  __shared__ __align__(128) float cs[kBN * kLdC];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int wm = warp % 2;
  const int wn = warp / 2;
  const int i0 = blockIdx.x * kBM;
  const int j0 = blockIdx.y * kBN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int f = 0; f < 2; ++f) {
    for (int g = 0; g < 2; ++g) wmma::fill_fragment(acc[f][g], 0.0f);
  }
  for (int l0 = 0; l0 < k; l0 += kBK) {
    for (int v = tid; v < kBK * kBM / 8; v += blockDim.x) {
      const int col = v / (kBM / 8);
      const int row = (v % (kBM / 8)) * 8;
      *reinterpret_cast<uint4*>(as + col * kLdA + row) =
          *reinterpret_cast<const uint4*>(a + static_cast<std::size_t>(l0 + col) * m + i0 + row);
    }
    for (int v = tid; v < kBN * kBK / 8; v += blockDim.x) {
      const int col = v / (kBK / 8);
      const int row = (v % (kBK / 8)) * 8;
      *reinterpret_cast<uint4*>(bs + col * kLdB + row) =
          *reinterpret_cast<const uint4*>(b + static_cast<std::size_t>(j0 + col) * k + l0 + row);
    }
    __syncthreads();
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
      for (int f = 0; f < 2; ++f) {
        wmma::load_matrix_sync(fa[f], as + kk * kLdA + wm * 32 + f * 16, kLdA);
      }
      for (int g = 0; g < 2; ++g) {
        wmma::load_matrix_sync(fb[g], bs + (wn * 32 + g * 16) * kLdB + kk, kLdB);
      }
      for (int f = 0; f < 2; ++f) {
        for (int g = 0; g < 2; ++g) wmma::mma_sync(acc[f][g], fa[f], fb[g], acc[f][g]);
      }
    }
    __syncthreads();
  }
  for (int f = 0; f < 2; ++f) {
    for (int g = 0; g < 2; ++g) {
      wmma::store_matrix_sync(cs + (wn * 32 + g * 16) * kLdC + wm * 32 + f * 16, acc[f][g], kLdC,
                              wmma::mem_col_major);
    }
  }
  __syncthreads();
  for (int e = tid; e < kBM * kBN; e += blockDim.x) {
    const int col = e / kBM;
    const int row = e % kBM;
    c[static_cast<std::size_t>(j0 + col) * m + i0 + row] = from_float<OutT>(cs[col * kLdC + row]);
  }
}

}  // namespace

void launch_fill_uniform(void* data, ElementType type, std::uint64_t count, std::uint64_t key,
                         cudaStream_t stream) {
  const unsigned grid = grid_for(count);
  switch (type) {
    case ElementType::kBf16:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count,
                                                         key);
      break;
    case ElementType::kFp16:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(data), count, key);
      break;
    case ElementType::kFp32:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(data), count, key);
      break;
  }
}

void launch_matrix_sums(const void* m, ElementType type, int rows, int cols, double* row_sum,
                        double* row_sq, double* col_sum, double* col_sq, cudaStream_t stream) {
  const dim3 grid((rows + kSumRows - 1) / kSumRows, (cols + kSumCols - 1) / kSumCols);
  switch (type) {
    case ElementType::kBf16:
      matrix_sums_kernel<<<grid, kSumRows, 0, stream>>>(static_cast<const __nv_bfloat16*>(m), rows,
                                                        cols, row_sum, row_sq, col_sum, col_sq);
      break;
    case ElementType::kFp16:
      matrix_sums_kernel<<<grid, kSumRows, 0, stream>>>(static_cast<const __half*>(m), rows, cols,
                                                        row_sum, row_sq, col_sum, col_sq);
      break;
    case ElementType::kFp32:
      matrix_sums_kernel<<<grid, kSumRows, 0, stream>>>(static_cast<const float*>(m), rows, cols,
                                                        row_sum, row_sq, col_sum, col_sq);
      break;
  }
}

void launch_gemv_rows(const void* m, ElementType type, int rows, int cols, const double* x,
                      bool square, double* out, cudaStream_t stream) {
  const dim3 grid((rows + 127) / 128, kGemvSplit);
  switch (type) {
    case ElementType::kBf16:
      gemv_rows_kernel<<<grid, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(m), rows, cols,
                                                 x, square, out);
      break;
    case ElementType::kFp16:
      gemv_rows_kernel<<<grid, 128, 0, stream>>>(static_cast<const __half*>(m), rows, cols, x,
                                                 square, out);
      break;
    case ElementType::kFp32:
      gemv_rows_kernel<<<grid, 128, 0, stream>>>(static_cast<const float*>(m), rows, cols, x,
                                                 square, out);
      break;
  }
}

void launch_gemv_cols(const void* m, ElementType type, int rows, int cols, const double* x,
                      bool square, double* out, cudaStream_t stream) {
  switch (type) {
    case ElementType::kBf16:
      gemv_cols_kernel<<<cols, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(m), rows,
                                                      cols, x, square, out);
      break;
    case ElementType::kFp16:
      gemv_cols_kernel<<<cols, kThreads, 0, stream>>>(static_cast<const __half*>(m), rows, cols, x,
                                                      square, out);
      break;
    case ElementType::kFp32:
      gemv_cols_kernel<<<cols, kThreads, 0, stream>>>(static_cast<const float*>(m), rows, cols, x,
                                                      square, out);
      break;
  }
}

void launch_abft_compare(const AbftCompareArgs& args, cudaStream_t stream) {
  abft_compare_kernel<<<grid_for(static_cast<std::uint64_t>(args.m) + args.n), kThreads, 0,
                        stream>>>(args);
}

void launch_flip_element_bit(void* data, ElementType type, std::uint64_t index,
                             cudaStream_t stream) {
  flip_element_bit_kernel<<<1, 1, 0, stream>>>(data, type, index);
}

void launch_tiled_gemm(const void* a, const void* b, void* c, ElementType c_type, int m, int n,
                       int k, cudaStream_t stream) {
  const dim3 grid(m / kBM, n / kBN);
  const auto* a16 = static_cast<const __nv_bfloat16*>(a);
  const auto* b16 = static_cast<const __nv_bfloat16*>(b);
  if (c_type == ElementType::kFp32) {
    tiled_gemm_kernel<<<grid, 128, 0, stream>>>(a16, b16, static_cast<float*>(c), m, n, k);
  } else {
    tiled_gemm_kernel<<<grid, 128, 0, stream>>>(a16, b16, static_cast<__nv_bfloat16*>(c), m, n, k);
  }
}

}  // namespace faultline::kernels
