#include "kernels/nvml_loader.h"

#include <dlfcn.h>

#include <cstring>

namespace faultline::kernels {
namespace {

// The subset of nvml.h we use, declared here so no NVML header is needed at build time. Values
// and layouts are part of NVML's stable C ABI.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
constexpr int kClockGraphics = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr int kTemperatureGpu = 0;
constexpr int kTemperatureThresholdSlowdown = 1;
constexpr int kMemoryErrorCorrected = 0;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;
constexpr int kAggregateEcc = 1;
constexpr int kRetiredMultipleSingleBit = 0;
constexpr int kRetiredDoubleBit = 1;

struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

template <typename T>
T symbol(void* handle, const char* name) {
  return reinterpret_cast<T>(::dlsym(handle, name));
}

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*system_driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*system_nvml_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*system_cuda_driver_version)(int*) = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*handle_by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*performance_state)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*clock_event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*total_ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pages)(nvmlDevice_t, int, unsigned*, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pages_pending)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*memory_info)(nvmlDevice_t, NvmlMemory*) = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
};

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  if (api_->shutdown != nullptr) api_->shutdown();
  ::dlclose(handle_);
}

std::unique_ptr<Nvml> Nvml::open(std::string* why_not, const char* library) {
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (why_not != nullptr) {
      const char* error = ::dlerror();
      *why_not = error != nullptr ? error : std::string(library) + ": cannot be loaded";
    }
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  api->init = symbol<decltype(api->init)>(handle, "nvmlInit_v2");
  api->shutdown = symbol<decltype(api->shutdown)>(handle, "nvmlShutdown");
  api->system_driver_version =
      symbol<decltype(api->system_driver_version)>(handle, "nvmlSystemGetDriverVersion");
  api->system_nvml_version =
      symbol<decltype(api->system_nvml_version)>(handle, "nvmlSystemGetNVMLVersion");
  api->system_cuda_driver_version = symbol<decltype(api->system_cuda_driver_version)>(
      handle, "nvmlSystemGetCudaDriverVersion_v2");
  api->device_count = symbol<decltype(api->device_count)>(handle, "nvmlDeviceGetCount_v2");
  api->handle_by_index =
      symbol<decltype(api->handle_by_index)>(handle, "nvmlDeviceGetHandleByIndex_v2");
  api->handle_by_pci =
      symbol<decltype(api->handle_by_pci)>(handle, "nvmlDeviceGetHandleByPciBusId_v2");
  api->name = symbol<decltype(api->name)>(handle, "nvmlDeviceGetName");
  api->uuid = symbol<decltype(api->uuid)>(handle, "nvmlDeviceGetUUID");
  api->pci_info = symbol<decltype(api->pci_info)>(handle, "nvmlDeviceGetPciInfo_v3");
  api->temperature = symbol<decltype(api->temperature)>(handle, "nvmlDeviceGetTemperature");
  api->temperature_threshold =
      symbol<decltype(api->temperature_threshold)>(handle, "nvmlDeviceGetTemperatureThreshold");
  api->clock = symbol<decltype(api->clock)>(handle, "nvmlDeviceGetClockInfo");
  api->max_clock = symbol<decltype(api->max_clock)>(handle, "nvmlDeviceGetMaxClockInfo");
  api->power = symbol<decltype(api->power)>(handle, "nvmlDeviceGetPowerUsage");
  api->performance_state =
      symbol<decltype(api->performance_state)>(handle, "nvmlDeviceGetPerformanceState");
  api->clock_event_reasons =
      symbol<decltype(api->clock_event_reasons)>(handle, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->clock_event_reasons == nullptr) {
    api->clock_event_reasons = symbol<decltype(api->clock_event_reasons)>(
        handle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  api->ecc_mode = symbol<decltype(api->ecc_mode)>(handle, "nvmlDeviceGetEccMode");
  api->total_ecc_errors =
      symbol<decltype(api->total_ecc_errors)>(handle, "nvmlDeviceGetTotalEccErrors");
  api->retired_pages = symbol<decltype(api->retired_pages)>(handle, "nvmlDeviceGetRetiredPages");
  api->retired_pages_pending = symbol<decltype(api->retired_pages_pending)>(
      handle, "nvmlDeviceGetRetiredPagesPendingStatus");
  api->remapped_rows = symbol<decltype(api->remapped_rows)>(handle, "nvmlDeviceGetRemappedRows");
  api->memory_info = symbol<decltype(api->memory_info)>(handle, "nvmlDeviceGetMemoryInfo");
  api->error_string = symbol<decltype(api->error_string)>(handle, "nvmlErrorString");

  if (api->init == nullptr || api->shutdown == nullptr || api->device_count == nullptr ||
      api->handle_by_index == nullptr) {
    if (why_not != nullptr) *why_not = std::string(library) + ": missing nvmlInit_v2 or peers";
    ::dlclose(handle);
    return nullptr;
  }
  const nvmlReturn_t r = api->init();
  if (r != kNvmlSuccess) {
    if (why_not != nullptr) {
      *why_not = std::string("nvmlInit_v2 failed: ") +
                 (api->error_string != nullptr ? api->error_string(r) : std::to_string(r));
    }
    ::dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

std::string Nvml::driver_version() const {
  char buf[96] = {};
  if (api_->system_driver_version == nullptr ||
      api_->system_driver_version(buf, sizeof buf) != kNvmlSuccess) {
    return "";
  }
  return buf;
}

std::string Nvml::nvml_version() const {
  char buf[96] = {};
  if (api_->system_nvml_version == nullptr ||
      api_->system_nvml_version(buf, sizeof buf) != kNvmlSuccess) {
    return "";
  }
  return buf;
}

std::optional<int> Nvml::cuda_driver_version() const {
  int v = 0;
  if (api_->system_cuda_driver_version == nullptr ||
      api_->system_cuda_driver_version(&v) != kNvmlSuccess) {
    return std::nullopt;
  }
  return v;
}

std::optional<unsigned> Nvml::device_count() const {
  unsigned n = 0;
  if (api_->device_count(&n) != kNvmlSuccess) return std::nullopt;
  return n;
}

std::optional<NvmlDeviceInfo> Nvml::device_by_index(unsigned index) const {
  nvmlDevice_t device = nullptr;
  if (api_->handle_by_index(index, &device) != kNvmlSuccess) return std::nullopt;
  return describe(device, index);
}

std::optional<NvmlDeviceInfo> Nvml::device_by_pci_bus_id(const std::string& bus_id) const {
  if (api_->handle_by_pci == nullptr) return std::nullopt;
  nvmlDevice_t device = nullptr;
  if (api_->handle_by_pci(bus_id.c_str(), &device) != kNvmlSuccess) return std::nullopt;
  // Find its NVML index for the report.
  const auto count = device_count();
  unsigned index = 0;
  for (unsigned i = 0; count && i < *count; ++i) {
    nvmlDevice_t other = nullptr;
    if (api_->handle_by_index(i, &other) == kNvmlSuccess && other == device) index = i;
  }
  return describe(device, index);
}

std::optional<NvmlDeviceInfo> Nvml::describe(void* device, unsigned index) const {
  const Api& a = *api_;
  NvmlDeviceInfo info;
  info.index = index;
  char buf[256] = {};
  if (a.name != nullptr && a.name(device, buf, sizeof buf) == kNvmlSuccess) info.name = buf;
  std::memset(buf, 0, sizeof buf);
  if (a.uuid != nullptr && a.uuid(device, buf, sizeof buf) == kNvmlSuccess) info.uuid = buf;
  NvmlPciInfo pci{};
  if (a.pci_info != nullptr && a.pci_info(device, &pci) == kNvmlSuccess) {
    info.pci_bus_id = pci.bus_id;
  }
  unsigned u = 0;
  if (a.temperature != nullptr && a.temperature(device, kTemperatureGpu, &u) == kNvmlSuccess) {
    info.temperature_c = u;
  }
  if (a.temperature_threshold != nullptr &&
      a.temperature_threshold(device, kTemperatureThresholdSlowdown, &u) == kNvmlSuccess) {
    info.temperature_slowdown_c = u;
  }
  if (a.clock != nullptr && a.clock(device, kClockSm, &u) == kNvmlSuccess) info.sm_clock_mhz = u;
  if (a.max_clock != nullptr && a.max_clock(device, kClockSm, &u) == kNvmlSuccess) {
    info.sm_clock_max_mhz = u;
  }
  if (a.clock != nullptr && a.clock(device, kClockMem, &u) == kNvmlSuccess) {
    info.memory_clock_mhz = u;
  }
  if (a.max_clock != nullptr && a.max_clock(device, kClockMem, &u) == kNvmlSuccess) {
    info.memory_clock_max_mhz = u;
  }
  (void)kClockGraphics;
  if (a.power != nullptr && a.power(device, &u) == kNvmlSuccess) info.power_w = u / 1000.0;
  int state = 0;
  if (a.performance_state != nullptr && a.performance_state(device, &state) == kNvmlSuccess) {
    info.performance_state = state;
  }
  unsigned long long ull = 0;
  if (a.clock_event_reasons != nullptr && a.clock_event_reasons(device, &ull) == kNvmlSuccess) {
    info.clock_event_reasons = ull;
  }
  int current = 0, pending = 0;
  if (a.ecc_mode != nullptr && a.ecc_mode(device, &current, &pending) == kNvmlSuccess) {
    info.ecc_enabled = current != 0;
  }
  if (a.total_ecc_errors != nullptr) {
    if (a.total_ecc_errors(device, kMemoryErrorCorrected, kVolatileEcc, &ull) == kNvmlSuccess) {
      info.ecc_corrected_volatile = ull;
    }
    if (a.total_ecc_errors(device, kMemoryErrorUncorrected, kVolatileEcc, &ull) == kNvmlSuccess) {
      info.ecc_uncorrected_volatile = ull;
    }
    if (a.total_ecc_errors(device, kMemoryErrorCorrected, kAggregateEcc, &ull) == kNvmlSuccess) {
      info.ecc_corrected_aggregate = ull;
    }
    if (a.total_ecc_errors(device, kMemoryErrorUncorrected, kAggregateEcc, &ull) == kNvmlSuccess) {
      info.ecc_uncorrected_aggregate = ull;
    }
  }
  if (a.retired_pages != nullptr) {
    for (int cause : {kRetiredMultipleSingleBit, kRetiredDoubleBit}) {
      unsigned count = 0;
      const nvmlReturn_t r = a.retired_pages(device, cause, &count, nullptr);
      if (r == kNvmlSuccess || r == kNvmlInsufficientSize) {
        (cause == kRetiredDoubleBit ? info.retired_pages_double_bit
                                    : info.retired_pages_single_bit) = count;
      }
    }
  }
  if (a.retired_pages_pending != nullptr &&
      a.retired_pages_pending(device, &state) == kNvmlSuccess) {
    info.retired_pages_pending = state != 0;
  }
  unsigned corrected = 0, uncorrected = 0, is_pending = 0, failure = 0;
  if (a.remapped_rows != nullptr &&
      a.remapped_rows(device, &corrected, &uncorrected, &is_pending, &failure) == kNvmlSuccess) {
    info.remapped_rows_correctable = corrected;
    info.remapped_rows_uncorrectable = uncorrected;
    info.remapped_rows_pending = is_pending != 0;
    info.remapped_rows_failure = failure != 0;
  }
  NvmlMemory memory{};
  if (a.memory_info != nullptr && a.memory_info(device, &memory) == kNvmlSuccess) {
    info.memory_total_bytes = memory.total;
    info.memory_used_bytes = memory.used;
  }
  return info;
}

nlohmann::json nvml_device_json(const NvmlDeviceInfo& info) {
  nlohmann::json j;
  auto put = [&j](const char* key, const auto& optional) {
    if (optional) {
      j[key] = *optional;
    } else {
      j[key] = nullptr;
    }
  };
  j["index"] = info.index;
  j["name"] = info.name;
  j["uuid"] = info.uuid;
  j["pci_bus_id"] = info.pci_bus_id;
  put("temperature_c", info.temperature_c);
  put("temperature_slowdown_c", info.temperature_slowdown_c);
  put("sm_clock_mhz", info.sm_clock_mhz);
  put("sm_clock_max_mhz", info.sm_clock_max_mhz);
  put("memory_clock_mhz", info.memory_clock_mhz);
  put("memory_clock_max_mhz", info.memory_clock_max_mhz);
  put("power_w", info.power_w);
  put("performance_state", info.performance_state);
  put("clock_event_reasons", info.clock_event_reasons);
  put("ecc_enabled", info.ecc_enabled);
  put("ecc_corrected_volatile", info.ecc_corrected_volatile);
  put("ecc_uncorrected_volatile", info.ecc_uncorrected_volatile);
  put("ecc_corrected_aggregate", info.ecc_corrected_aggregate);
  put("ecc_uncorrected_aggregate", info.ecc_uncorrected_aggregate);
  put("retired_pages_single_bit", info.retired_pages_single_bit);
  put("retired_pages_double_bit", info.retired_pages_double_bit);
  put("retired_pages_pending", info.retired_pages_pending);
  put("remapped_rows_correctable", info.remapped_rows_correctable);
  put("remapped_rows_uncorrectable", info.remapped_rows_uncorrectable);
  put("remapped_rows_pending", info.remapped_rows_pending);
  put("remapped_rows_failure", info.remapped_rows_failure);
  put("memory_total_bytes", info.memory_total_bytes);
  put("memory_used_bytes", info.memory_used_bytes);
  return j;
}

void add_nvml_inventory(ProbeReport& report) {
  std::string why;
  auto nvml = Nvml::open(&why);
  report.metrics["env_nvml_available"] = nvml ? 1.0 : 0.0;
  if (!nvml) {
    report.notes.push_back("NVML not available: " + why);
    return;
  }
  report.details["driver_version"] = nvml->driver_version();
  const unsigned count = nvml->device_count().value_or(0);
  report.metrics["env_nvml_device_count"] = count;
  auto& devices = report.details["nvml_devices"] = nlohmann::json::array();
  for (unsigned i = 0; i < count; ++i) {
    if (auto info = nvml->device_by_index(i)) devices.push_back(nvml_device_json(*info));
  }
}

}  // namespace faultline::kernels
