#include "kernels/cuda_util.h"

#include <cstdio>

namespace faultline::kernels {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  // Clear a non-sticky error so later calls are not blamed for it.
  (void)cudaGetLastError();
  throw GpuError(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                     std::to_string(static_cast<int>(status)) + "): " + cudaGetErrorString(status),
                 static_cast<int>(status));
}

bool is_no_gpu_error(int code) {
  return code == static_cast<int>(cudaErrorInsufficientDriver) ||
         code == static_cast<int>(cudaErrorNoDevice);
}

GpuPresence query_gpu_presence() {
  GpuPresence p;
  const cudaError_t status = cudaGetDeviceCount(&p.count);
  p.error = static_cast<int>(status);
  if (status != cudaSuccess) {
    p.count = 0;
    p.description = std::string(cudaGetErrorName(status)) + " (" + std::to_string(p.error) +
                    "): " + cudaGetErrorString(status);
    (void)cudaGetLastError();
  } else {
    p.description = std::to_string(p.count) + " device(s)";
  }
  return p;
}

DeviceDescription describe_device(int device) {
  cudaDeviceProp prop{};
  FAULTLINE_CUDA(cudaGetDeviceProperties(&prop, device));
  DeviceDescription d;
  d.index = device;
  d.name = prop.name;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  d.uuid = uuid;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) d.pci_bus_id = bus;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.memory_bytes = prop.totalGlobalMem;
  d.sm_count = prop.multiProcessorCount;
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  return d;
}

void DeviceDeleter::operator()(void* p) const {
  if (p != nullptr) cudaFree(p);
}

void PinnedDeleter::operator()(void* p) const {
  if (p != nullptr) cudaFreeHost(p);
}

void* device_malloc_bytes(std::size_t bytes, const char* what) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes == 0 ? 16 : bytes), what);
  return p;
}

void* pinned_malloc_bytes(std::size_t bytes, const char* what) {
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes == 0 ? 16 : bytes), what);
  return p;
}

Stream::Stream() { FAULTLINE_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize(const char* what) const {
  check_cuda(cudaStreamSynchronize(stream_), what);
}

Event::Event() { FAULTLINE_CUDA(cudaEventCreate(&event_)); }

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) { FAULTLINE_CUDA(cudaEventRecord(event_, stream)); }

double elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0.0f;
  FAULTLINE_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

std::string hex_address(std::uint64_t address) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%012llx", static_cast<unsigned long long>(address));
  return buf;
}

std::string hex32(std::uint32_t value) {
  char buf[12];
  std::snprintf(buf, sizeof buf, "0x%08x", value);
  return buf;
}

}  // namespace faultline::kernels
