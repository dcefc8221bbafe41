#include "kernels/bandwidth.h"

namespace faultline::kernels {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kAllToAll:
      return "all_to_all";
  }
  return "unknown";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kAllToAll}) {
    if (collective_name(c) == name) return c;
  }
  return std::nullopt;
}

double bus_bandwidth_factor(Collective c, int nranks) {
  if (nranks <= 1) return 0.0;
  const double n = nranks;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return (n - 1.0) / n;
  }
  return 0.0;
}

double gigabytes_per_second(double bytes, double seconds) {
  if (!(seconds > 0.0)) return 0.0;
  return bytes / seconds / 1e9;
}

double collective_size_bytes(Collective c, double bytes) {
  // Every convention we use already expresses the size as the per-rank buffer; the function exists
  // so that a change of convention happens in one place.
  (void)c;
  return bytes;
}

double algorithm_bandwidth_gbps(double size_bytes, double seconds) {
  return gigabytes_per_second(size_bytes, seconds);
}

double bus_bandwidth_gbps(Collective c, double size_bytes, double seconds, int nranks) {
  return algorithm_bandwidth_gbps(size_bytes, seconds) * bus_bandwidth_factor(c, nranks);
}

double gemm_tflops(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t iterations,
                   double seconds) {
  if (!(seconds > 0.0)) return 0.0;
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(iterations) / seconds / 1e12;
}

}  // namespace faultline::kernels
