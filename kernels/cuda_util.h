#pragma once

// Plumbing shared by the CUDA probes: turning CUDA/cuBLAS/NCCL status codes into a GpuError that
// the backend converts into a fail verdict, telling "no GPU here" (CUDA errors 35 and 100) apart
// from real failures, describing a device for the report, RAII owners for device memory, pinned
// host memory, streams and events, and event timing. Host code only (no kernels).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/probe_report.h"

namespace faultline::kernels {

// A failure of the GPU stack inside a probe. `code` is the CUDA runtime error code when the
// failure came from the runtime, else -1.
class GpuError : public std::runtime_error {
 public:
  GpuError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Throws GpuError("<what>: <error name> (<code>): <description>") unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);
#define FAULTLINE_CUDA(call) ::faultline::kernels::check_cuda((call), #call)

// cudaErrorInsufficientDriver (35) and cudaErrorNoDevice (100): this machine has no usable GPU.
bool is_no_gpu_error(int code);

struct GpuPresence {
  int error = 0;  // cudaGetDeviceCount's result
  int count = 0;
  std::string description;  // "cudaErrorInsufficientDriver (35): ..."
  bool no_gpu() const { return is_no_gpu_error(error) || (error == 0 && count == 0); }
};
// Asks the CUDA runtime how many devices there are; never throws.
GpuPresence query_gpu_presence();

// The report's description of `device`. Throws GpuError.
DeviceDescription describe_device(int device);

struct DeviceDeleter {
  void operator()(void* p) const;
};
struct PinnedDeleter {
  void operator()(void* p) const;
};
template <typename T>
using DeviceBuffer = std::unique_ptr<T, DeviceDeleter>;
template <typename T>
using PinnedBuffer = std::unique_ptr<T, PinnedDeleter>;

void* device_malloc_bytes(std::size_t bytes, const char* what);  // throws GpuError
void* pinned_malloc_bytes(std::size_t bytes, const char* what);  // throws GpuError

// `count` elements of T on the current device (uninitialised).
template <typename T>
DeviceBuffer<T> device_alloc(std::size_t count, const char* what) {
  return DeviceBuffer<T>(static_cast<T*>(device_malloc_bytes(count * sizeof(T), what)));
}
template <typename T>
PinnedBuffer<T> pinned_alloc(std::size_t count, const char* what) {
  return PinnedBuffer<T>(static_cast<T*>(pinned_malloc_bytes(count * sizeof(T), what)));
}

// A non-blocking stream on the current device.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize(const char* what) const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);

 private:
  cudaEvent_t event_ = nullptr;
};

// Milliseconds between two recorded, completed events.
double elapsed_ms(const Event& start, const Event& stop);

// "0x7f12_3456_7890"-style rendering of a device address.
std::string hex_address(std::uint64_t address);
std::string hex32(std::uint32_t value);

}  // namespace faultline::kernels
