#pragma once

// NVML, loaded at run time with dlopen("libnvidia-ml.so.1"), for the `env` probe: driver version,
// GPU inventory, ECC counters, retired pages, remapped rows, clocks, temperature, power. Loading at
// run time keeps faultline-probe linkable and runnable on machines without the NVIDIA driver (CI,
// laptops), where the library's absence is reported rather than treated as an error. Every field
// is optional: an NVML call that is missing from this driver or "not supported" on this GPU leaves
// its field empty instead of failing the probe. No CUDA here.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/probe_report.h"

namespace faultline::kernels {

struct NvmlDeviceInfo {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> temperature_slowdown_c;
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> sm_clock_max_mhz;
  std::optional<unsigned> memory_clock_mhz;
  std::optional<unsigned> memory_clock_max_mhz;
  std::optional<double> power_w;
  std::optional<int> performance_state;
  std::optional<std::uint64_t> clock_event_reasons;  // bit mask (NVML clocks event reasons)
  std::optional<bool> ecc_enabled;
  std::optional<std::uint64_t> ecc_corrected_volatile;
  std::optional<std::uint64_t> ecc_uncorrected_volatile;
  std::optional<std::uint64_t> ecc_corrected_aggregate;
  std::optional<std::uint64_t> ecc_uncorrected_aggregate;
  std::optional<unsigned> retired_pages_single_bit;
  std::optional<unsigned> retired_pages_double_bit;
  std::optional<bool> retired_pages_pending;
  std::optional<unsigned> remapped_rows_correctable;
  std::optional<unsigned> remapped_rows_uncorrectable;
  std::optional<bool> remapped_rows_pending;
  std::optional<bool> remapped_rows_failure;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> memory_used_bytes;
};

// All fields, absent ones as null.
nlohmann::json nvml_device_json(const NvmlDeviceInfo& info);

// Adds what NVML can tell without CUDA to `report`: metric env_nvml_available (0/1),
// env_nvml_device_count, details.driver_version and details.nvml_devices; when NVML is absent, a
// note saying why. Used where no GPU is usable through CUDA, so the env probe still inventories.
void add_nvml_inventory(ProbeReport& report);

class Nvml {
 public:
  // Loads `library` and initialises NVML. Returns nullptr and sets *why_not when the library is
  // absent or nvmlInit fails (e.g. "libnvidia-ml.so.1: cannot open shared object file").
  static std::unique_ptr<Nvml> open(std::string* why_not,
                                    const char* library = "libnvidia-ml.so.1");
  ~Nvml();  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::string driver_version() const;  // "" when unknown
  std::string nvml_version() const;
  std::optional<int> cuda_driver_version() const;
  std::optional<unsigned> device_count() const;
  // Everything NVML will tell about one device, by NVML index or by PCI bus id
  // ("0000:3B:00.0", as cudaDeviceGetPCIBusId writes it).
  std::optional<NvmlDeviceInfo> device_by_index(unsigned index) const;
  std::optional<NvmlDeviceInfo> device_by_pci_bus_id(const std::string& bus_id) const;

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);
  std::optional<NvmlDeviceInfo> describe(void* device, unsigned index) const;

  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace faultline::kernels
