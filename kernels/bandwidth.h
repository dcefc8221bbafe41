#pragma once

// Rate arithmetic shared by the probes, kept apart from any GPU code so the formulas are tested
// against worked numbers. Conventions follow nccl-tests: GB means 1e9 bytes, algorithm bandwidth
// is the operation's size divided by its time, and bus bandwidth rescales it by the fraction of
// data each rank must move over its links, so it is comparable to link speed whatever the rank
// count (busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for all-gather and all-to-all).

#include <cstdint>
#include <optional>
#include <string_view>

namespace faultline::kernels {

enum class Collective { kAllReduce, kAllGather, kAllToAll };
std::string_view collective_name(Collective c);  // "all_reduce", "all_gather", "all_to_all"
std::optional<Collective> parse_collective(std::string_view name);

// busbw / algbw for `nranks` ranks; 0 for nranks <= 1 (a single rank moves nothing over a bus).
double bus_bandwidth_factor(Collective c, int nranks);

// bytes / seconds / 1e9. Returns 0 when seconds <= 0.
double gigabytes_per_second(double bytes, double seconds);

// The "size" of one collective call, as nccl-tests counts it, given the per-rank buffer size
// `bytes`: all-reduce: the buffer; all-gather: the gathered (receive) buffer; all-to-all: what
// one rank sends in total. Kept as a function so probe and tests agree on it.
double collective_size_bytes(Collective c, double bytes);

double algorithm_bandwidth_gbps(double size_bytes, double seconds);
double bus_bandwidth_gbps(Collective c, double size_bytes, double seconds, int nranks);

// 2*m*n*k*iterations / seconds / 1e12.
double gemm_tflops(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t iterations,
                   double seconds);

}  // namespace faultline::kernels
