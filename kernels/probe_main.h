#pragma once

// The program logic of `faultline-probe`, independent of how the probes are implemented: parse the
// command line, load the thresholds, run the probe under the watchdog, turn whatever happened
// (report, crash, hang) into one JSON verdict on stdout, and return the exit code. The probes come
// from a ProbeBackend: the CUDA one (cuda_backend.h) when the program was built with nvcc, or the
// no-CUDA one here, which answers no_gpu for every probe, so the program builds and behaves
// sensibly on machines without the CUDA toolkit.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "kernels/probe_options.h"
#include "kernels/probe_report.h"
#include "kernels/thresholds.h"

namespace faultline::kernels {

// What a running probe may know about its surroundings.
struct ProbeContext {
  std::chrono::steady_clock::time_point start;
  // Work that can notice time (NCCL polling, rendezvous) gives up at this point and reports
  // deadline_exceeded itself, naming the stage; it lies a little before the hard deadline so the
  // report gets out before the watchdog kills the process.
  std::chrono::steady_clock::time_point soft_deadline;
  const ThresholdTable* thresholds = nullptr;
  // Publishes a progress snapshot; if the probe is later killed at the deadline, the last
  // snapshot's metrics are reported. May be empty.
  std::function<void(const ProbeReport&)> publish;

  bool past_soft_deadline() const { return std::chrono::steady_clock::now() >= soft_deadline; }
};

class ProbeBackend {
 public:
  virtual ~ProbeBackend() = default;
  virtual std::string_view name() const = 0;
  // Runs one probe. Returns the report with probe, device, metrics, notes and details filled; the
  // verdict stays pending unless the probe decided it (skip, no_gpu, usage_error, fail,
  // deadline_exceeded); evaluation against thresholds happens afterwards (evaluation.h).
  // Runtime failures (a CUDA error) are reported as verdict fail with a note, not thrown.
  virtual ProbeReport run(const ProbeOptions& options, const ProbeContext& context) = 0;
};

// A backend for builds without CUDA: every probe reports no_gpu (env also lists what NVML sees).
std::unique_ptr<ProbeBackend> make_no_cuda_backend();

struct ProgramEnvironment {
  EnvLookup env;
  std::filesystem::path exe_path;      // for finding ../share/faultline/thresholds.json
  std::string compiled_in_thresholds;  // the source tree's kernels/thresholds.json
};

// Runs the program on `args` (argv without argv[0]); writes the JSON report (or help) to `out` and
// diagnostics to `err`. Returns the exit code (probe_report.h).
int probe_main(std::span<const std::string_view> args, ProbeBackend& backend, std::ostream& out,
               std::ostream& err, const ProgramEnvironment& environment);

// The soft deadline for a hard deadline of `deadline_s` seconds from `start`.
std::chrono::steady_clock::time_point soft_deadline_for(std::chrono::steady_clock::time_point start,
                                                        double deadline_s);

}  // namespace faultline::kernels
