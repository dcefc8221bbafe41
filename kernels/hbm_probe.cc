// The hbm probe: STREAM-style bandwidth (copy, triad, read) on a few arrays, then memory tests
// (walking ones, moving inversions, seeded random patterns) over most of the free device memory,
// counting bit errors and keeping the first addresses.

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/cuda_probes.h"
#include "kernels/cuda_util.h"
#include "kernels/device_kernels.h"
#include "kernels/patterns.h"

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kReportedErrors = 8;
constexpr std::uint64_t kAllocationGranule = std::uint64_t{2} << 20;

struct BandwidthResult {
  double best_gbps = 0;
  double mean_gbps = 0;
};

// Times `iterations` launches of `launch`, each moving `bytes`, after one warm-up.
template <typename Launch>
BandwidthResult time_kernel(const Launch& launch, double bytes, int iterations, bool throttle,
                            const Stream& stream) {
  Event start, stop;
  launch();
  stream.synchronize("bandwidth warm-up");
  BandwidthResult r;
  double total = 0;
  for (int i = 0; i < iterations; ++i) {
    start.record(stream.get());
    if (throttle) launch_sleep(2000.0, stream.get());
    launch();
    stop.record(stream.get());
    FAULTLINE_CUDA(cudaGetLastError());
    stream.synchronize("bandwidth kernel");
    const double gbps = gigabytes_per_second(bytes, elapsed_ms(start, stop) / 1e3);
    r.best_gbps = std::max(r.best_gbps, gbps);
    total += gbps;
  }
  r.mean_gbps = iterations > 0 ? total / iterations : 0;
  return r;
}

// Accumulates bit errors per test and the first error records across the whole probe.
class ErrorTally {
 public:
  ErrorTally(std::uint64_t base_address, MemoryErrorLog* device_log, const Stream& stream)
      : base_(base_address), device_log_(device_log), stream_(stream) {}

  void reset_device_log() {
    FAULTLINE_CUDA(cudaMemsetAsync(device_log_, 0, sizeof(MemoryErrorLog), stream_.get()));
  }

  // Reads the device log (after the stream is synchronised) and folds it into the totals.
  // Returns the bit errors found since the last collect.
  std::uint64_t collect(const std::string& test, const std::string& pattern) {
    FAULTLINE_CUDA(cudaGetLastError());
    stream_.synchronize(("memory test " + test).c_str());
    MemoryErrorLog log{};
    FAULTLINE_CUDA(cudaMemcpy(&log, device_log_, sizeof log, cudaMemcpyDeviceToHost));
    bit_errors_ += log.bit_errors;
    word_errors_ += log.word_errors;
    per_test_[test] += log.bit_errors;
    const std::size_t stored = std::min<std::size_t>(log.recorded, kMaxRecordedErrors);
    for (std::size_t i = 0; i < stored && records_.size() < kReportedErrors; ++i) {
      const MemoryErrorRecord& e = log.records[i];
      records_.push_back({{"test", test},
                          {"pattern", pattern},
                          {"address", hex_address(base_ + e.word_index * 4)},
                          {"offset_bytes", e.word_index * 4},
                          {"expected", hex32(e.expected)},
                          {"actual", hex32(e.actual)},
                          {"bits", __builtin_popcount(e.expected ^ e.actual)}});
    }
    reset_device_log();
    return log.bit_errors;
  }

  std::uint64_t bit_errors() const { return bit_errors_; }
  std::uint64_t word_errors() const { return word_errors_; }
  const std::map<std::string, std::uint64_t>& per_test() const { return per_test_; }
  const nlohmann::json& records() const { return records_; }

 private:
  std::uint64_t base_;
  MemoryErrorLog* device_log_;
  const Stream& stream_;
  std::uint64_t bit_errors_ = 0;
  std::uint64_t word_errors_ = 0;
  std::map<std::string, std::uint64_t> per_test_;
  nlohmann::json records_ = nlohmann::json::array();
};

// STREAM-like copy, triad and read bandwidth over three arrays of up to a quarter of the
// free memory each: the best and mean of h.iterations timed kernels, into report.
void measure_hbm_bandwidth(const HbmOptions& h, bool throttle, Stream& stream,
                           ProbeReport& report) {
  const cudaStream_t s = stream.get();
  std::size_t free_bytes = 0, total_bytes = 0;
  FAULTLINE_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::uint64_t array_bytes = std::min<std::uint64_t>(h.bandwidth_bytes, free_bytes / 4);
  array_bytes -= array_bytes % 16;
  auto x = device_alloc<std::byte>(array_bytes, "cudaMalloc(bandwidth a)");
  auto y = device_alloc<std::byte>(array_bytes, "cudaMalloc(bandwidth b)");
  auto z = device_alloc<std::byte>(array_bytes, "cudaMalloc(bandwidth c)");
  auto sink = device_alloc<std::uint32_t>(1, "cudaMalloc(sink)");
  FAULTLINE_CUDA(cudaMemsetAsync(x.get(), 0, array_bytes, s));
  FAULTLINE_CUDA(cudaMemsetAsync(y.get(), 0, array_bytes, s));
  FAULTLINE_CUDA(cudaMemsetAsync(z.get(), 0, array_bytes, s));
  const std::uint64_t vectors = array_bytes / 16;
  const double b = static_cast<double>(array_bytes);
  const auto copy = time_kernel([&] { launch_copy(x.get(), y.get(), vectors, s); }, 2 * b,
                                h.iterations, throttle, stream);
  const auto triad = time_kernel([&] { launch_triad(x.get(), y.get(), z.get(), 3.0f, vectors, s); },
                                 3 * b, h.iterations, throttle, stream);
  const auto read = time_kernel([&] { launch_read(x.get(), vectors, sink.get(), s); }, b,
                                h.iterations, throttle, stream);
  report.metrics["hbm_bandwidth_array_bytes"] = b;
  report.metrics["hbm_copy_gbps"] = copy.best_gbps;
  report.metrics["hbm_copy_mean_gbps"] = copy.mean_gbps;
  report.metrics["hbm_triad_gbps"] = triad.best_gbps;
  report.metrics["hbm_triad_mean_gbps"] = triad.mean_gbps;
  report.metrics["hbm_read_gbps"] = read.best_gbps;
  report.metrics["hbm_read_mean_gbps"] = read.mean_gbps;
  report.metrics["hbm_bandwidth_gbps"] =
      std::max({copy.best_gbps, triad.best_gbps, read.best_gbps});
}

// The most of *test_bytes (rounded down to the allocation granule) that cudaMalloc grants,
// shrinking by a twentieth at a time; *test_bytes becomes what was allocated. Throws
// GpuError when not even one granule is free.
std::uint32_t* allocate_test_memory(std::uint64_t* test_bytes) {
  *test_bytes -= *test_bytes % kAllocationGranule;
  while (*test_bytes >= kAllocationGranule) {
    void* p = nullptr;
    if (cudaMalloc(&p, *test_bytes) == cudaSuccess) return static_cast<std::uint32_t*>(p);
    (void)cudaGetLastError();
    *test_bytes -= std::max<std::uint64_t>(
        kAllocationGranule, (*test_bytes / 20) - (*test_bytes / 20) % kAllocationGranule);
  }
  throw GpuError("cannot allocate device memory to test", -1);
}

// The memory tests' totals: bit and word errors, the first errors, and with an injected
// bit flip how many were injected and found.
void report_memory_tests(const ErrorTally& tally, bool bitflip, std::int64_t injected,
                         std::int64_t detected, ProbeReport& report) {
  report.metrics["hbm_bit_errors"] = static_cast<double>(tally.bit_errors());
  report.metrics["hbm_word_errors"] = static_cast<double>(tally.word_errors());
  report.details["first_errors"] = tally.records();
  if (bitflip) {
    report.metrics["injected_faults"] = static_cast<double>(injected);
    report.metrics["detected_injected_faults"] = static_cast<double>(detected);
  }
}

}  // namespace

void run_hbm_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report) {
  const auto& h = options.hbm;
  const bool bitflip = options.common.inject == Injection::kBitflip;
  const bool throttle = options.common.inject == Injection::kThrottle;
  Stream stream;
  const cudaStream_t s = stream.get();

  measure_hbm_bandwidth(h, throttle, stream, report);
  if (throttle)
    report.notes.push_back("throttle injected: a 2 ms sleep precedes each timed kernel");
  if (context.publish) context.publish(report);

  // ---- memory tests ----
  std::size_t free_bytes = 0, total_bytes = 0;
  FAULTLINE_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::uint64_t test_bytes =
      static_cast<std::uint64_t>(static_cast<double>(free_bytes) * h.fraction);
  std::uint32_t* words = allocate_test_memory(&test_bytes);
  DeviceBuffer<std::uint32_t> buffer(words);
  const std::uint64_t count = test_bytes / 4;
  auto device_log = device_alloc<MemoryErrorLog>(1, "cudaMalloc(error log)");
  ErrorTally tally(reinterpret_cast<std::uint64_t>(words), device_log.get(), stream);
  tally.reset_device_log();
  report.metrics["hbm_tested_bytes"] = static_cast<double>(test_bytes);
  report.metrics["hbm_tested_fraction_of_total"] =
      static_cast<double>(test_bytes) / static_cast<double>(total_bytes);

  std::int64_t injected = 0;
  std::int64_t detected = 0;
  std::uint64_t injection_counter = 0;
  // Flips one seeded bit (fault injection) in the freshly written pattern.
  auto maybe_inject = [&]() {
    if (!bitflip) return false;
    const std::uint64_t r = mix64(stream_key(options.common.seed, 0xB17F) ^ injection_counter++);
    launch_flip_word_bit(words, (r >> 8) % count, static_cast<int>(r & 31u), s);
    ++injected;
    return true;
  };
  auto account = [&](bool was_injected, std::uint64_t found) {
    if (was_injected && found > 0) ++detected;
  };

  const auto tests_start = Clock::now();
  for (int pass = 0; pass < h.passes; ++pass) {
    for (HbmTest test : h.tests) {
      const std::string name(hbm_test_name(test));
      switch (test) {
        case HbmTest::kWalkingOnes:
          for (std::uint32_t bit = 0; bit < 32; ++bit) {
            PatternSpec spec;
            spec.kind = PatternKind::kWalkingOnes;
            spec.walk_bit = bit;
            launch_fill_pattern(words, count, spec, s);
            const bool inj = bit == 0 && maybe_inject();
            launch_verify_pattern(words, count, spec, device_log.get(), s);
            account(inj, tally.collect(name, "walking bit " + std::to_string(bit)));
          }
          break;
        case HbmTest::kMovingInversions: {
          const std::uint32_t patterns[] = {
              0x00000000u, 0x55555555u,
              pattern_word(stream_key(options.common.seed, 0x3017), pass)};
          for (std::uint32_t pattern : patterns) {
            PatternSpec spec;
            spec.kind = PatternKind::kConstant;
            spec.constant = pattern;
            launch_fill_pattern(words, count, spec, s);
            const bool inj = pattern == patterns[0] && maybe_inject();
            launch_moving_inversion(words, count, pattern, false, device_log.get(), s);
            launch_moving_inversion(words, count, ~pattern, true, device_log.get(), s);
            launch_verify_pattern(words, count, spec, device_log.get(), s);
            account(inj, tally.collect(name, hex32(pattern)));
          }
          break;
        }
        case HbmTest::kRandom:
          for (std::uint32_t invert = 0; invert < 2; ++invert) {
            PatternSpec spec;
            spec.kind = PatternKind::kRandom;
            spec.key = stream_key(options.common.seed, 0x4A4D + static_cast<std::uint64_t>(pass));
            spec.invert = invert;
            launch_fill_pattern(words, count, spec, s);
            const bool inj = invert == 0 && maybe_inject();
            launch_verify_pattern(words, count, spec, device_log.get(), s);
            account(inj, tally.collect(name, invert != 0 ? "random, inverted" : "random"));
          }
          break;
      }
      report.metrics["hbm_" + name + "_bit_errors"] =
          static_cast<double>(tally.per_test().at(name));
      report.metrics["hbm_bit_errors"] = static_cast<double>(tally.bit_errors());
      if (context.publish) context.publish(report);
    }
  }
  report.metrics["hbm_test_seconds"] =
      std::chrono::duration<double>(Clock::now() - tests_start).count();
  report_memory_tests(tally, bitflip, injected, detected, report);
}

}  // namespace faultline::kernels
