// Launch geometry shared by the probe kernels: enough blocks to fill the GPU, with
// grid-stride loops doing the rest.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace faultline::kernels {

inline constexpr int kThreads = 256;

inline unsigned grid_for(std::uint64_t items) {
  int device = 0;
  int sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  const std::uint64_t wanted = (items + kThreads - 1) / kThreads;
  const std::uint64_t cap = static_cast<std::uint64_t>(sms) * 16;
  const std::uint64_t blocks = wanted < cap ? wanted : cap;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

}  // namespace faultline::kernels
