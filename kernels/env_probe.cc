// The env probe: CUDA runtime and driver versions, and what NVML says about the selected GPU (ECC
// counters, retired pages, remapped rows, clocks, temperature, power) plus an inventory of every
// GPU NVML sees. NVML is optional: without it the probe reports that and checks nothing NVML-based.

#include <optional>
#include <string>

#include "kernels/cuda_probes.h"
#include "kernels/cuda_util.h"
#include "kernels/nvml_loader.h"

namespace faultline::kernels {
namespace {

template <typename T>
void put(ProbeReport& r, const char* key, const std::optional<T>& value) {
  if (value) r.metrics[key] = static_cast<double>(*value);
}

}  // namespace

void run_env_probe(const ProbeOptions& options, const ProbeContext&, ProbeReport& report) {
  int count = 0;
  FAULTLINE_CUDA(cudaGetDeviceCount(&count));
  report.metrics["env_cuda_device_count"] = count;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  report.details["cuda_driver_version"] = driver;
  report.details["cuda_runtime_version"] = runtime;
  nlohmann::json cuda_devices = nlohmann::json::array();
  for (int d = 0; d < count; ++d) {
    const DeviceDescription desc = describe_device(d);
    cuda_devices.push_back({{"index", d},
                            {"name", desc.name},
                            {"uuid", desc.uuid},
                            {"pci_bus_id", desc.pci_bus_id},
                            {"memory_bytes", desc.memory_bytes}});
  }
  report.details["cuda_devices"] = cuda_devices;

  std::string why;
  auto nvml = Nvml::open(&why);
  report.metrics["env_nvml_available"] = nvml ? 1.0 : 0.0;
  if (!nvml) {
    report.notes.push_back("NVML not available (" + why +
                           "): ECC, retired/remapped rows, clocks and temperature not checked");
    return;
  }
  report.details["driver_version"] = nvml->driver_version();
  report.details["nvml_version"] = nvml->nvml_version();
  const unsigned nvml_count = nvml->device_count().value_or(0);
  report.metrics["env_nvml_device_count"] = nvml_count;
  nlohmann::json inventory = nlohmann::json::array();
  for (unsigned i = 0; i < nvml_count; ++i) {
    if (auto info = nvml->device_by_index(i)) inventory.push_back(nvml_device_json(*info));
  }
  report.details["nvml_devices"] = inventory;

  const std::string bus = report.device ? report.device->pci_bus_id : "";
  const std::string uuid = report.device ? report.device->uuid : "";
  std::optional<NvmlDeviceInfo> info;
  if (!bus.empty()) info = nvml->device_by_pci_bus_id(bus);
  for (unsigned i = 0; !info && i < nvml_count; ++i) {
    auto candidate = nvml->device_by_index(i);
    if (candidate && !uuid.empty() && candidate->uuid == uuid) info = candidate;
  }
  if (!info) {
    report.notes.push_back("NVML does not know the selected device (PCI " + bus +
                           "): per-device health not checked");
    return;
  }
  report.details["nvml_selected_index"] = info->index;
  put(report, "env_temperature_c", info->temperature_c);
  put(report, "env_temperature_slowdown_c", info->temperature_slowdown_c);
  put(report, "env_sm_clock_mhz", info->sm_clock_mhz);
  put(report, "env_sm_clock_max_mhz", info->sm_clock_max_mhz);
  put(report, "env_memory_clock_mhz", info->memory_clock_mhz);
  put(report, "env_memory_clock_max_mhz", info->memory_clock_max_mhz);
  put(report, "env_power_w", info->power_w);
  put(report, "env_performance_state", info->performance_state);
  put(report, "env_clock_event_reasons", info->clock_event_reasons);
  if (info->ecc_enabled) report.metrics["env_ecc_enabled"] = *info->ecc_enabled ? 1.0 : 0.0;
  put(report, "env_ecc_corrected_volatile", info->ecc_corrected_volatile);
  put(report, "env_ecc_uncorrected_volatile", info->ecc_uncorrected_volatile);
  put(report, "env_ecc_corrected_aggregate", info->ecc_corrected_aggregate);
  put(report, "env_ecc_uncorrected_aggregate", info->ecc_uncorrected_aggregate);
  put(report, "env_retired_pages_single_bit", info->retired_pages_single_bit);
  put(report, "env_retired_pages_double_bit", info->retired_pages_double_bit);
  if (info->retired_pages_pending) {
    report.metrics["env_retired_pages_pending"] = *info->retired_pages_pending ? 1.0 : 0.0;
  }
  put(report, "env_remapped_rows_correctable", info->remapped_rows_correctable);
  put(report, "env_remapped_rows_uncorrectable", info->remapped_rows_uncorrectable);
  if (info->remapped_rows_pending) {
    report.metrics["env_remapped_rows_pending"] = *info->remapped_rows_pending ? 1.0 : 0.0;
  }
  if (info->remapped_rows_failure) {
    report.metrics["env_remapped_rows_failure"] = *info->remapped_rows_failure ? 1.0 : 0.0;
  }
  if (info->ecc_enabled && !*info->ecc_enabled) {
    report.notes.push_back("ECC is disabled on this GPU: memory errors go uncounted");
  }
  if (options.common.inject != Injection::kNone && options.common.inject != Injection::kHang) {
    report.notes.push_back("--inject " + std::string(injection_name(options.common.inject)) +
                           " has no effect on the env probe");
  }
}

}  // namespace faultline::kernels
