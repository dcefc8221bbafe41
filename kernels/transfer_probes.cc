// The pcie probe (pinned host<->device bandwidth both ways) and the p2p probe (peer copies between
// every ordered pair of local GPUs). Both verify the data they moved, so a link that corrupts
// rather than slows is caught too.

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/cuda_probes.h"
#include "kernels/cuda_util.h"
#include "kernels/device_kernels.h"
#include "kernels/patterns.h"

namespace faultline::kernels {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// Per-iteration GB/s of `iterations` timed launches of `copy` (after one warm-up).
template <typename Copy>
std::vector<double> time_copies(const Copy& copy, double bytes, int iterations, bool throttle,
                                cudaStream_t stream) {
  Event start, stop;
  copy();
  FAULTLINE_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> rates;
  for (int i = 0; i < iterations; ++i) {
    start.record(stream);
    if (throttle) launch_sleep(2000.0, stream);
    copy();
    stop.record(stream);
    FAULTLINE_CUDA(cudaStreamSynchronize(stream));
    rates.push_back(gigabytes_per_second(bytes, elapsed_ms(start, stop) / 1e3));
  }
  return rates;
}

// Bit errors the device verification logged (and resets the log).
std::uint64_t read_log(MemoryErrorLog* device_log, cudaStream_t stream) {
  FAULTLINE_CUDA(cudaGetLastError());
  FAULTLINE_CUDA(cudaStreamSynchronize(stream));
  MemoryErrorLog log{};
  FAULTLINE_CUDA(cudaMemcpy(&log, device_log, sizeof log, cudaMemcpyDeviceToHost));
  FAULTLINE_CUDA(cudaMemsetAsync(device_log, 0, sizeof(MemoryErrorLog), stream));
  return log.bit_errors;
}

// One GPU's buffers for the peer-to-peer probe: a source filled with its own pattern, a
// destination and an error log zeroed, and a stream.
struct P2pDevice {
  DeviceBuffer<std::uint32_t> src;
  DeviceBuffer<std::uint32_t> dst;
  DeviceBuffer<MemoryErrorLog> log;
  std::unique_ptr<Stream> stream;
  PatternSpec pattern;
};

std::vector<P2pDevice> p2p_devices(int gpus, std::uint64_t count, std::uint64_t seed) {
  std::vector<P2pDevice> dev(gpus);
  for (int d = 0; d < gpus; ++d) {
    FAULTLINE_CUDA(cudaSetDevice(d));
    dev[d].stream = std::make_unique<Stream>();
    dev[d].src = device_alloc<std::uint32_t>(count, "cudaMalloc(p2p src)");
    dev[d].dst = device_alloc<std::uint32_t>(count, "cudaMalloc(p2p dst)");
    dev[d].log = device_alloc<MemoryErrorLog>(1, "cudaMalloc(p2p log)");
    dev[d].pattern.kind = PatternKind::kRandom;
    dev[d].pattern.key = stream_key(seed, 0x92900 + static_cast<std::uint64_t>(d));
    const cudaStream_t s = dev[d].stream->get();
    launch_fill_pattern(dev[d].src.get(), count, dev[d].pattern, s);
    FAULTLINE_CUDA(cudaMemsetAsync(dev[d].dst.get(), 0, count * 4, s));
    FAULTLINE_CUDA(cudaMemsetAsync(dev[d].log.get(), 0, sizeof(MemoryErrorLog), s));
    FAULTLINE_CUDA(cudaStreamSynchronize(s));
  }
  return dev;
}

// Enables peer access between every ordered pair of GPUs that allows it; the matrix of which
// pairs have it (a GPU with itself does), the pairs without it counted into *without.
nlohmann::json enable_peer_access(int gpus, int* without) {
  nlohmann::json access = nlohmann::json::array();
  for (int a = 0; a < gpus; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < gpus; ++b) {
      int can = 0;
      if (a != b) {
        FAULTLINE_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
        if (can != 0) {
          FAULTLINE_CUDA(cudaSetDevice(a));
          const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
          if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) check_cuda(e, "peer");
          (void)cudaGetLastError();
        } else {
          ++*without;
        }
      }
      row.push_back(a == b || can != 0);
    }
    access.push_back(row);
  }
  return access;
}

}  // namespace

void run_pcie_probe(const ProbeOptions& options, const ProbeContext&, ProbeReport& report) {
  const auto& t = options.pcie;
  const bool bitflip = options.common.inject == Injection::kBitflip;
  const bool throttle = options.common.inject == Injection::kThrottle;
  const std::uint64_t count = t.bytes / 4;
  const double bytes = static_cast<double>(count) * 4;
  Stream stream;
  const cudaStream_t s = stream.get();
  auto host = pinned_alloc<std::uint32_t>(count, "cudaMallocHost");
  auto device = device_alloc<std::uint32_t>(count, "cudaMalloc");
  auto device_log = device_alloc<MemoryErrorLog>(1, "cudaMalloc(log)");
  FAULTLINE_CUDA(cudaMemsetAsync(device_log.get(), 0, sizeof(MemoryErrorLog), s));
  std::int64_t injected = 0;
  std::int64_t detected = 0;

  // Host to device: a seeded pattern written on the CPU, checked on the GPU.
  PatternSpec h2d;
  h2d.kind = PatternKind::kRandom;
  h2d.key = stream_key(options.common.seed, 0x42D);
  for (std::uint64_t i = 0; i < count; ++i) host.get()[i] = expected_word(h2d, i);
  const auto h2d_rates = time_copies(
      [&] {
        FAULTLINE_CUDA(
            cudaMemcpyAsync(device.get(), host.get(), count * 4, cudaMemcpyHostToDevice, s));
      },
      bytes, t.iterations, throttle, s);
  if (bitflip) {
    launch_flip_word_bit(device.get(), count / 3, 7, s);
    ++injected;
  }
  launch_verify_pattern(device.get(), count, h2d, device_log.get(), s);
  const std::uint64_t h2d_errors = read_log(device_log.get(), s);
  if (bitflip && h2d_errors > 0) ++detected;

  // Device to host: a pattern written on the GPU, checked on the CPU.
  PatternSpec d2h;
  d2h.kind = PatternKind::kRandom;
  d2h.key = stream_key(options.common.seed, 0xD2B);
  launch_fill_pattern(device.get(), count, d2h, s);
  const auto d2h_rates = time_copies(
      [&] {
        FAULTLINE_CUDA(
            cudaMemcpyAsync(host.get(), device.get(), count * 4, cudaMemcpyDeviceToHost, s));
      },
      bytes, t.iterations, throttle, s);
  if (bitflip) {
    host.get()[count / 5] ^= 1u << 19;
    ++injected;
  }
  std::uint64_t d2h_errors = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    d2h_errors += static_cast<std::uint64_t>(std::popcount(host.get()[i] ^ expected_word(d2h, i)));
  }
  if (bitflip && d2h_errors > 0) ++detected;

  report.metrics["pcie_bytes"] = bytes;
  report.metrics["pcie_h2d_gbps"] = median(h2d_rates);
  report.metrics["pcie_h2d_best_gbps"] = *std::max_element(h2d_rates.begin(), h2d_rates.end());
  report.metrics["pcie_d2h_gbps"] = median(d2h_rates);
  report.metrics["pcie_d2h_best_gbps"] = *std::max_element(d2h_rates.begin(), d2h_rates.end());
  report.metrics["pcie_data_errors"] = static_cast<double>(h2d_errors + d2h_errors);
  if (bitflip) {
    report.metrics["injected_faults"] = static_cast<double>(injected);
    report.metrics["detected_injected_faults"] = static_cast<double>(detected);
  }
  if (throttle) report.notes.push_back("throttle injected: a 2 ms sleep precedes each timed copy");
  report.notes.push_back("bandwidth is the median over " + std::to_string(t.iterations) +
                         " timed copies of pinned memory");
}

void run_p2p_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report) {
  const auto& t = options.p2p;
  const bool bitflip = options.common.inject == Injection::kBitflip;
  const bool throttle = options.common.inject == Injection::kThrottle;
  int gpus = 0;
  FAULTLINE_CUDA(cudaGetDeviceCount(&gpus));
  report.metrics["p2p_gpus"] = gpus;
  if (gpus < 2) {
    report.verdict = Verdict::kSkip;
    report.notes.push_back("only " + std::to_string(gpus) +
                           " GPU visible: no peer pair to test (skip)");
    return;
  }
  const std::uint64_t count = t.bytes / 4;
  const double bytes = static_cast<double>(count) * 4;

  std::vector<P2pDevice> dev = p2p_devices(gpus, count, options.common.seed);
  int pairs_without_access = 0;
  const nlohmann::json access = enable_peer_access(gpus, &pairs_without_access);

  std::vector<double> rates;
  nlohmann::json matrix = nlohmann::json::array();
  std::uint64_t errors = 0;
  std::int64_t injected = 0;
  std::int64_t detected = 0;
  for (int a = 0; a < gpus; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < gpus; ++b) {
      if (a == b) {
        row.push_back(nullptr);
        continue;
      }
      FAULTLINE_CUDA(cudaSetDevice(a));
      const cudaStream_t s = dev[a].stream->get();
      const auto r = time_copies(
          [&] {
            FAULTLINE_CUDA(
                cudaMemcpyPeerAsync(dev[b].dst.get(), b, dev[a].src.get(), a, count * 4, s));
          },
          bytes, t.iterations, throttle, s);
      const double gbps = median(r);
      rates.push_back(gbps);
      row.push_back(gbps);
      FAULTLINE_CUDA(cudaSetDevice(b));
      const cudaStream_t sb = dev[b].stream->get();
      const bool inject = bitflip && a == 0 && b == 1;
      if (inject) {
        launch_flip_word_bit(dev[b].dst.get(), count / 2, 3, sb);
        ++injected;
      }
      launch_verify_pattern(dev[b].dst.get(), count, dev[a].pattern, dev[b].log.get(), sb);
      const std::uint64_t e = read_log(dev[b].log.get(), sb);
      errors += e;
      if (inject && e > 0) ++detected;
    }
    matrix.push_back(row);
    if (context.publish) {
      report.metrics["p2p_data_errors"] = static_cast<double>(errors);
      context.publish(report);
    }
  }
  FAULTLINE_CUDA(cudaSetDevice(options.common.device));
  report.metrics["p2p_pairs"] = static_cast<double>(rates.size());
  report.metrics["p2p_bytes"] = bytes;
  report.metrics["p2p_min_gbps"] = *std::min_element(rates.begin(), rates.end());
  report.metrics["p2p_max_gbps"] = *std::max_element(rates.begin(), rates.end());
  double sum = 0;
  for (double r : rates) sum += r;
  report.metrics["p2p_mean_gbps"] = sum / static_cast<double>(rates.size());
  report.metrics["p2p_data_errors"] = static_cast<double>(errors);
  report.metrics["p2p_pairs_without_peer_access"] = pairs_without_access;
  report.details["gbps_matrix"] = matrix;
  report.details["peer_access"] = access;
  if (bitflip) {
    report.metrics["injected_faults"] = static_cast<double>(injected);
    report.metrics["detected_injected_faults"] = static_cast<double>(detected);
  }
  if (throttle) report.notes.push_back("throttle injected: a 2 ms sleep precedes each timed copy");
  if (pairs_without_access > 0) {
    report.notes.push_back(std::to_string(pairs_without_access) +
                           " ordered GPU pair(s) without peer access: those copies are staged "
                           "through host memory");
  }
}

}  // namespace faultline::kernels
