#include "kernels/cuda_backend.h"

#include "kernels/cuda_probes.h"
#include "kernels/device_kernels.h"
#include "kernels/nvml_loader.h"

namespace faultline::kernels {
namespace {

#ifndef FAULTLINE_KERNELS_HAVE_NCCL
}  // namespace

// Built without NCCL: the probe cannot run here, which is a configuration problem, not a fault.
void run_nccl_probe(const ProbeOptions&, const ProbeContext&, ProbeReport& report) {
  report.verdict = Verdict::kUsageError;
  report.notes.push_back(
      "this faultline-probe was built without NCCL (nccl.h / libnccl not found "
      "when it was configured)");
}

namespace {
#endif

class CudaBackend final : public ProbeBackend {
 public:
  std::string_view name() const override { return "cuda"; }

  ProbeReport run(const ProbeOptions& options, const ProbeContext& context) override {
    ProbeReport report;
    report.probe = std::string(probe_name(options.probe));
    const GpuPresence presence = query_gpu_presence();
    report.details["cuda_runtime"] = presence.description;
    if (presence.no_gpu()) {
      report.verdict = Verdict::kNoGpu;
      report.notes.push_back("no GPU: the CUDA runtime reports " + presence.description);
      if (options.probe == ProbeKind::kEnv) add_nvml_inventory(report);
      return report;
    }
    if (presence.error != 0) {
      report.verdict = Verdict::kFail;
      report.notes.push_back("the CUDA runtime cannot enumerate GPUs: " + presence.description);
      return report;
    }
    const int device = options.common.device;
    if (device >= presence.count) {
      report.verdict = Verdict::kUsageError;
      report.notes.push_back("--device " + std::to_string(device) + " does not exist: " +
                             std::to_string(presence.count) + " GPU(s) visible");
      return report;
    }
    try {
      FAULTLINE_CUDA(cudaSetDevice(device));
      report.device = describe_device(device);
      const cudaError_t image = check_kernel_image();
      if (image != cudaSuccess) {
        report.verdict = Verdict::kUsageError;
        report.notes.push_back(
            std::string("this faultline-probe has no kernels for compute capability ") +
            std::to_string(report.device->cc_major) + "." +
            std::to_string(report.device->cc_minor) + " (" + cudaGetErrorName(image) +
            "): rebuild with CMAKE_CUDA_ARCHITECTURES including it");
        return report;
      }
      switch (options.probe) {
        case ProbeKind::kGemm:
          run_gemm_probe(options, context, report);
          break;
        case ProbeKind::kHbm:
          run_hbm_probe(options, context, report);
          break;
        case ProbeKind::kPcie:
          run_pcie_probe(options, context, report);
          break;
        case ProbeKind::kP2p:
          run_p2p_probe(options, context, report);
          break;
        case ProbeKind::kNccl:
          run_nccl_probe(options, context, report);
          break;
        case ProbeKind::kEnv:
          run_env_probe(options, context, report);
          break;
      }
    } catch (const GpuError& e) {
      report.verdict = Verdict::kFail;
      report.notes.push_back(std::string("GPU error: ") + e.what());
    }
    return report;
  }
};

}  // namespace

std::unique_ptr<ProbeBackend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

GpuPresence cuda_gpu_presence() { return query_gpu_presence(); }

}  // namespace faultline::kernels
