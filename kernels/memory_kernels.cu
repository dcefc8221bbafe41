// Kernels for the memory, copy and collective probes: pattern fill and verification with an error
// log, moving inversions, STREAM-style bandwidth kernels, the throttle sleep, and the all-reduce
// test data. See device_kernels.h for the contracts.

#include <cuda_runtime.h>

#include "kernels/device_kernels.h"
#include "kernels/launch.cuh"

namespace faultline::kernels {
namespace {

__device__ void record_error(MemoryErrorLog* log, std::uint64_t index, std::uint32_t expected,
                             std::uint32_t actual) {
  atomicAdd(&log->bit_errors, static_cast<unsigned long long>(__popc(expected ^ actual)));
  atomicAdd(&log->word_errors, 1ull);
  const unsigned slot = atomicAdd(&log->recorded, 1u);
  if (slot < kMaxRecordedErrors) {
    log->records[slot].word_index = index;
    log->records[slot].expected = expected;
    log->records[slot].actual = actual;
  }
}

__global__ void fill_pattern_kernel(uint4* words, std::uint64_t vectors, PatternSpec spec) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += stride) {
    const std::uint64_t i = v * 4;
    words[v] = make_uint4(expected_word(spec, i), expected_word(spec, i + 1),
                          expected_word(spec, i + 2), expected_word(spec, i + 3));
  }
}

__global__ void verify_pattern_kernel(const uint4* words, std::uint64_t vectors, PatternSpec spec,
                                      MemoryErrorLog* log) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += stride) {
    const uint4 got = words[v];
    const std::uint64_t i = v * 4;
    const std::uint32_t g[4] = {got.x, got.y, got.z, got.w};
    for (int e = 0; e < 4; ++e) {
      const std::uint32_t want = expected_word(spec, i + e);
      if (g[e] != want) record_error(log, i + e, want, g[e]);
    }
  }
}

__global__ void moving_inversion_kernel(uint4* words, std::uint64_t vectors, std::uint32_t pattern,
                                        bool descending, MemoryErrorLog* log) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint32_t inverse = ~pattern;
  for (std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       t < vectors; t += stride) {
    const std::uint64_t v = descending ? vectors - 1 - t : t;
    const uint4 got = words[v];
    const std::uint32_t g[4] = {got.x, got.y, got.z, got.w};
    for (int e = 0; e < 4; ++e) {
      if (g[e] != pattern) record_error(log, v * 4 + e, pattern, g[e]);
    }
    words[v] = make_uint4(inverse, inverse, inverse, inverse);
  }
}

__global__ void flip_word_bit_kernel(std::uint32_t* words, std::uint64_t index, int bit) {
  words[index] ^= (1u << bit);
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                            std::uint64_t vectors) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += stride) {
    dst[v] = src[v];
  }
}

__global__ void triad_kernel(float4* __restrict__ a, const float4* __restrict__ b,
                             const float4* __restrict__ c, float scalar, std::uint64_t vectors) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += stride) {
    const float4 x = b[v];
    const float4 y = c[v];
    a[v] =
        make_float4(x.x + scalar * y.x, x.y + scalar * y.y, x.z + scalar * y.z, x.w + scalar * y.w);
  }
}

__global__ void read_kernel(const uint4* __restrict__ src, std::uint64_t vectors,
                            std::uint32_t* sink) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  std::uint32_t acc = 0;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += stride) {
    const uint4 x = src[v];
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  // Written only when impossible in practice, but the compiler cannot know that.
  if (acc == 0x9E3779B9u) *sink = acc;
}

__global__ void sleep_kernel(unsigned long long nanoseconds) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= nanoseconds) break;
    __nanosleep(1000);
  }
}

// Spins until *release becomes non-zero, which nothing does: a kernel that never finishes.
__global__ void spin_kernel(const volatile unsigned int* release) {
  while (*release == 0) __nanosleep(1000);
}

__global__ void fill_allreduce_kernel(float* data, std::uint64_t count, std::uint64_t key,
                                      int rank) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    data[i] = allreduce_input(key, i, rank);
  }
}

__global__ void verify_allreduce_kernel(const float* data, std::uint64_t count, std::uint64_t key,
                                        int nranks, MemoryErrorLog* log) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    float want = 0.0f;
    for (int r = 0; r < nranks; ++r) want += allreduce_input(key, i, r);
    const std::uint32_t w = __float_as_uint(want);
    const std::uint32_t g = __float_as_uint(data[i]);
    if (w != g) record_error(log, i, w, g);
  }
}

__global__ void noop_kernel() {}

}  // namespace

void launch_fill_pattern(std::uint32_t* words, std::uint64_t count, PatternSpec spec,
                         cudaStream_t stream) {
  const std::uint64_t vectors = count / 4;
  fill_pattern_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(reinterpret_cast<uint4*>(words),
                                                                  vectors, spec);
}

void launch_verify_pattern(const std::uint32_t* words, std::uint64_t count, PatternSpec spec,
                           MemoryErrorLog* log, cudaStream_t stream) {
  const std::uint64_t vectors = count / 4;
  verify_pattern_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(words), vectors, spec, log);
}

void launch_moving_inversion(std::uint32_t* words, std::uint64_t count, std::uint32_t pattern,
                             bool descending, MemoryErrorLog* log, cudaStream_t stream) {
  const std::uint64_t vectors = count / 4;
  moving_inversion_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(
      reinterpret_cast<uint4*>(words), vectors, pattern, descending, log);
}

void launch_flip_word_bit(std::uint32_t* words, std::uint64_t index, int bit, cudaStream_t stream) {
  flip_word_bit_kernel<<<1, 1, 0, stream>>>(words, index, bit & 31);
}

void launch_copy(const void* src, void* dst, std::uint64_t vectors, cudaStream_t stream) {
  copy_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(static_cast<const uint4*>(src),
                                                          static_cast<uint4*>(dst), vectors);
}

void launch_triad(void* a, const void* b, const void* c, float scalar, std::uint64_t vectors,
                  cudaStream_t stream) {
  triad_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(
      static_cast<float4*>(a), static_cast<const float4*>(b), static_cast<const float4*>(c), scalar,
      vectors);
}

void launch_read(const void* src, std::uint64_t vectors, std::uint32_t* sink, cudaStream_t stream) {
  read_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(static_cast<const uint4*>(src), vectors,
                                                          sink);
}

void launch_sleep(double microseconds, cudaStream_t stream) {
  if (!(microseconds > 0)) return;
  sleep_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds * 1000.0));
}

void launch_spin_forever(const unsigned int* release, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(release);
}

void launch_fill_allreduce_input(float* data, std::uint64_t count, std::uint64_t key, int rank,
                                 cudaStream_t stream) {
  fill_allreduce_kernel<<<grid_for(count), kThreads, 0, stream>>>(data, count, key, rank);
}

void launch_verify_allreduce_output(const float* data, std::uint64_t count, std::uint64_t key,
                                    int nranks, MemoryErrorLog* log, cudaStream_t stream) {
  verify_allreduce_kernel<<<grid_for(count), kThreads, 0, stream>>>(data, count, key, nranks, log);
}

cudaError_t check_kernel_image() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, noop_kernel);
}

}  // namespace faultline::kernels
