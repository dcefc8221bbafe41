#include "kernels/probe_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include "cli/flag_table.h"

namespace faultline::kernels {
namespace {

using Apply = std::function<std::optional<std::string>(ProbeOptions&, std::string_view)>;

struct OptionSpec {
  std::string_view name;
  std::string_view arg;  // empty for flags
  std::string_view help;
  std::vector<ProbeKind> probes;  // empty: every probe
  Apply apply;
};

struct ProbeDescription {
  ProbeKind kind;
  std::string_view summary;
  std::string_view detail;
};

const std::vector<ProbeDescription>& probe_descriptions() {
  static const std::vector<ProbeDescription> kDescriptions = {
      {ProbeKind::kGemm, "sustained GEMM burn verified by checksums, plus a bit-exact digest",
       "Burns cuBLAS BF16/FP16/TF32 GEMMs and a hand-written tiled BF16 tensor-core kernel.\n"
       "Every burn iteration is verified by algorithm-based checksums: the row and column sums\n"
       "of C are compared with A*(B*1) and (1^T*A)*B within a precision-aware tolerance.\n"
       "Plain cuBLAS chunks are interleaved with the burn so its TFLOP/s is compared with a\n"
       "baseline measured in the same run. A GEMM on fixed seeded integer inputs is exact in\n"
       "FP32, so its 64-bit digest must be identical on every healthy GPU (and equal to the\n"
       "CPU-computed digest)."},
      {ProbeKind::kHbm, "device memory tests over most of free memory, copy/triad bandwidth",
       "Walking ones, moving inversions and seeded random patterns over --fraction of free\n"
       "device memory, counting bit errors and reporting the first addresses; then STREAM-style\n"
       "copy and triad bandwidth in GB/s."},
      {ProbeKind::kPcie, "pinned host<->device bandwidth both ways, with data verification",
       "Times pinned host-to-device and device-to-host copies and verifies the copied data."},
      {ProbeKind::kP2p, "peer copies between every pair of local GPUs",
       "Times cudaMemcpyPeer between every ordered pair of visible GPUs and verifies the data.\n"
       "With fewer than two GPUs the verdict is skip (exit 0) with a note."},
      {ProbeKind::kNccl, "all-reduce / all-gather / all-to-all bus bandwidth, under a deadline",
       "Local mode (no --rendezvous): one process drives all local GPUs. Multi-process mode:\n"
       "one GPU per process, ranks exchange the NCCL unique id through --rendezvous. Results\n"
       "are verified; communicators are non-blocking and aborted at the deadline, so a hang\n"
       "becomes a deadline_exceeded verdict naming the stage that hung."},
      {ProbeKind::kEnv, "driver and GPU inventory, ECC, retired/remapped rows, clocks, temperature",
       "Reads the CUDA runtime and NVML (loaded at run time from libnvidia-ml.so.1; when it is\n"
       "absent that is reported, not an error)."},
  };
  return kDescriptions;
}

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    out.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// Helpers that build Apply functions writing through a field accessor.
template <typename Field>
Apply int_option(Field field, int min_value, int max_value) {
  return [field, min_value, max_value](ProbeOptions& o,
                                       std::string_view v) -> std::optional<std::string> {
    auto n = parse_number<long long>(v);
    if (!n || *n < min_value || *n > max_value) {
      return "expected an integer in [" + std::to_string(min_value) + ", " +
             std::to_string(max_value) + "], got '" + std::string(v) + "'";
    }
    field(o) = static_cast<int>(*n);
    return std::nullopt;
  };
}

template <typename Field>
Apply double_option(Field field, double min_value, double max_value, bool min_exclusive) {
  return [=](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
    auto n = parse_number<double>(v);
    const bool below = !n || (min_exclusive ? !(*n > min_value) : !(*n >= min_value));
    if (below || !(*n <= max_value) || !std::isfinite(*n)) {
      std::ostringstream msg;
      msg << "expected a number in " << (min_exclusive ? "(" : "[") << min_value << ", "
          << max_value << "], got '" << v << "'";
      return msg.str();
    }
    field(o) = *n;
    return std::nullopt;
  };
}

template <typename Field>
Apply bytes_option(Field field, std::uint64_t min_value) {
  return [=](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
    auto n = parse_byte_size(v);
    if (!n || *n < min_value || *n % 16 != 0) {
      return "expected a byte size (e.g. 256M, 1G) of at least " + std::to_string(min_value) +
             " that is a multiple of 16, got '" + std::string(v) + "'";
    }
    field(o) = *n;
    return std::nullopt;
  };
}

template <typename Enum, typename Field, typename Parse>
Apply list_option(Field field, Parse parse, std::string_view allowed) {
  return [=](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
    std::vector<Enum> values;
    for (auto item : split_list(v)) {
      auto e = parse(item);
      if (!e)
        return "unknown value '" + std::string(item) + "' (allowed: " + std::string(allowed) + ")";
      if (std::find(values.begin(), values.end(), *e) == values.end()) values.push_back(*e);
    }
    if (values.empty()) return "expected a comma-separated list of " + std::string(allowed);
    field(o) = std::move(values);
    return std::nullopt;
  };
}

std::optional<GemmPath> parse_gemm_path(std::string_view s) {
  for (GemmPath p : {GemmPath::kBf16, GemmPath::kFp16, GemmPath::kTf32, GemmPath::kTiled}) {
    if (gemm_path_name(p) == s) return p;
  }
  return std::nullopt;
}

std::optional<HbmTest> parse_hbm_test(std::string_view s) {
  for (HbmTest t : {HbmTest::kWalkingOnes, HbmTest::kMovingInversions, HbmTest::kRandom}) {
    if (hbm_test_name(t) == s) return t;
  }
  return std::nullopt;
}

// lint: table
const std::vector<OptionSpec>& option_table() {
  using P = ProbeKind;
  static const std::vector<OptionSpec> kTable = {
      // Common options.
      {"--help", "", "print this help and exit 0", {}, nullptr},
      {"--device",
       "N",
       "CUDA device ordinal (default: $LOCAL_RANK, else 0); p2p and local nccl use all GPUs",
       {},
       int_option([](ProbeOptions& o) -> int& { return o.common.device; }, 0, 1023)},
      {"--deadline",
       "SECONDS",
       "hard deadline for the whole probe (default 300); past it the probe is killed and the "
       "verdict is deadline_exceeded (exit 4)",
       {},
       double_option([](ProbeOptions& o) -> double& { return o.common.deadline_s; }, 0.0, 86400.0,
                     true)},
      {"--thresholds",
       "PATH",
       "thresholds file (default: $FAULTLINE_PROBE_THRESHOLDS, <bin>/../share/faultline/"
       "thresholds.json, then the source tree's kernels/thresholds.json)",
       {},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         if (v.empty()) return "expected a path";
         o.common.thresholds_path = std::string(v);
         return std::nullopt;
       }},
      {"--inject",
       "KIND",
       "fault injection: none, bitflip (flip result bits; checks must catch them), throttle "
       "(slow the timed work), hang (stop responding; the deadline must catch it), hang-kernel "
       "(gemm: launch a GPU kernel that never finishes)",
       {},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         for (Injection i : {Injection::kNone, Injection::kBitflip, Injection::kThrottle,
                             Injection::kHang, Injection::kHangKernel}) {
           if (injection_name(i) == v) {
             o.common.inject = i;
             return std::nullopt;
           }
         }
         return "unknown injection '" + std::string(v) +
                "' (allowed: none, bitflip, throttle, hang, hang-kernel)";
       }},
      {"--seed",
       "N",
       "seed for generated inputs and patterns (default 20240607)",
       {},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto n = parse_number<std::uint64_t>(v);
         if (!n) return "expected an unsigned integer, got '" + std::string(v) + "'";
         o.common.seed = *n;
         return std::nullopt;
       }},
      {"--no-watchdog",
       "",
       "run the GPU work in this process instead of a watched child (deadline by SIGALRM)",
       {},
       [](ProbeOptions& o, std::string_view) -> std::optional<std::string> {
         o.common.watchdog = false;
         return std::nullopt;
       }},
      {"--pretty",
       "",
       "indent the JSON output",
       {},
       [](ProbeOptions& o, std::string_view) -> std::optional<std::string> {
         o.common.pretty = true;
         return std::nullopt;
       }},

      // gemm
      {"--paths",
       "LIST",
       "GEMM paths to burn, comma-separated from bf16,fp16,tf32,tiled (default: all)",
       {P::kGemm},
       list_option<GemmPath>([](ProbeOptions& o) -> std::vector<GemmPath>& { return o.gemm.paths; },
                             parse_gemm_path, "bf16, fp16, tf32, tiled")},
      {"--size",
       "N",
       "GEMM size m=n=k, a multiple of 128 (default 16384)",
       {P::kGemm},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto n = parse_number<int>(v);
         if (!n || *n < 128 || *n > 32768 || *n % 128 != 0) {
           return "expected a multiple of 128 in [128, 32768], got '" + std::string(v) + "'";
         }
         o.gemm.size = *n;
         return std::nullopt;
       }},
      {"--duration",
       "SECONDS",
       "burn time per path (default 5)",
       {P::kGemm},
       double_option([](ProbeOptions& o) -> double& { return o.gemm.duration_s; }, 0.0, 86400.0,
                     true)},
      {"--baseline",
       "",
       "interleave plain cuBLAS chunks and report burn TFLOP/s relative to them (default on)",
       {P::kGemm},
       [](ProbeOptions& o, std::string_view) -> std::optional<std::string> {
         o.gemm.baseline = true;
         return std::nullopt;
       }},
      {"--no-baseline",
       "",
       "do not measure the same-run cuBLAS baseline",
       {P::kGemm},
       [](ProbeOptions& o, std::string_view) -> std::optional<std::string> {
         o.gemm.baseline = false;
         return std::nullopt;
       }},
      {"--digest-size",
       "N",
       "size of the bit-exact digest GEMM, a multiple of 128 up to 4096, 0 to skip (default 1024)",
       {P::kGemm},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto n = parse_number<int>(v);
         if (!n || *n < 0 || *n > 4096 || *n % 128 != 0) {
           return "expected 0 or a multiple of 128 up to 4096, got '" + std::string(v) + "'";
         }
         o.gemm.digest_size = *n;
         return std::nullopt;
       }},
      {"--tolerance-sigma",
       "X",
       "checksum tolerance in standard deviations of the rounding-error model (default 16)",
       {P::kGemm},
       double_option([](ProbeOptions& o) -> double& { return o.gemm.tolerance_sigma; }, 1.0, 1e6,
                     false)},
      {"--expect-digest",
       "HEX",
       "digest a healthy GPU produced (e.g. on a reference machine); a different one fails",
       {P::kGemm},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         std::string_view hex = v;
         if (hex.starts_with("0x")) hex.remove_prefix(2);
         if (hex.empty() || hex.size() > 16 ||
             !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(c) != 0; })) {
           return "expected up to 16 hex digits, got '" + std::string(v) + "'";
         }
         o.gemm.expect_digest = std::string(hex);
         return std::nullopt;
       }},

      // hbm
      {"--fraction",
       "F",
       "fraction of free device memory to test (default 0.90)",
       {P::kHbm},
       double_option([](ProbeOptions& o) -> double& { return o.hbm.fraction; }, 0.0, 0.98, true)},
      {"--tests",
       "LIST",
       "memory tests, comma-separated from walking_ones,moving_inversions,random (default: all)",
       {P::kHbm},
       list_option<HbmTest>([](ProbeOptions& o) -> std::vector<HbmTest>& { return o.hbm.tests; },
                            parse_hbm_test, "walking_ones, moving_inversions, random")},
      {"--passes",
       "N",
       "passes over the memory tests (default 1)",
       {P::kHbm},
       int_option([](ProbeOptions& o) -> int& { return o.hbm.passes; }, 1, 1000)},
      {"--bandwidth-bytes",
       "BYTES",
       "size of each copy/triad array (default 1G)",
       {P::kHbm},
       bytes_option([](ProbeOptions& o) -> std::uint64_t& { return o.hbm.bandwidth_bytes; },
                    std::uint64_t{1} << 20)},

      // Shared by several probes; the lambdas pick the probe's own group.
      {"--iterations",
       "N",
       "timed iterations (defaults: hbm 20, pcie 20, p2p 10, nccl 20)",
       {P::kHbm, P::kPcie, P::kP2p, P::kNccl},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto n = parse_number<int>(v);
         if (!n || *n < 1 || *n > 100000) {
           return "expected an integer in [1, 100000], got '" + std::string(v) + "'";
         }
         switch (o.probe) {
           case ProbeKind::kHbm:
             o.hbm.iterations = *n;
             break;
           case ProbeKind::kPcie:
             o.pcie.iterations = *n;
             break;
           case ProbeKind::kP2p:
             o.p2p.iterations = *n;
             break;
           case ProbeKind::kNccl:
             o.nccl.iterations = *n;
             break;
           default:
             break;
         }
         return std::nullopt;
       }},
      {"--bytes",
       "BYTES",
       "bytes per transfer or collective buffer (default 256M)",
       {P::kPcie, P::kP2p, P::kNccl},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto n = parse_byte_size(v);
         if (!n || *n < 4096 || *n % 16 != 0) {
           return "expected a byte size of at least 4K that is a multiple of 16, got '" +
                  std::string(v) + "'";
         }
         switch (o.probe) {
           case ProbeKind::kPcie:
             o.pcie.bytes = *n;
             break;
           case ProbeKind::kP2p:
             o.p2p.bytes = *n;
             break;
           case ProbeKind::kNccl:
             o.nccl.bytes = *n;
             break;
           default:
             break;
         }
         return std::nullopt;
       }},

      // nccl
      {"--collectives",
       "LIST",
       "comma-separated from all_reduce,all_gather,all_to_all (default: all)",
       {P::kNccl},
       list_option<Collective>(
           [](ProbeOptions& o) -> std::vector<Collective>& { return o.nccl.collectives; },
           parse_collective, "all_reduce, all_gather, all_to_all")},
      {"--warmup",
       "N",
       "untimed iterations before timing (default 5)",
       {P::kNccl},
       int_option([](ProbeOptions& o) -> int& { return o.nccl.warmup; }, 0, 10000)},
      {"--rendezvous",
       "SPEC",
       "multi-process mode: file:/path (rank 0 writes the NCCL unique id there) or "
       "tcp:host:port (rank 0 serves it there)",
       {P::kNccl},
       [](ProbeOptions& o, std::string_view v) -> std::optional<std::string> {
         auto spec = parse_rendezvous(v);
         if (!spec) return "expected file:/path or tcp:host:port, got '" + std::string(v) + "'";
         o.nccl.rendezvous = *spec;
         return std::nullopt;
       }},
      {"--rank",
       "R",
       "this process's rank with --rendezvous (default: $RANK)",
       {P::kNccl},
       int_option([](ProbeOptions& o) -> int& { return o.nccl.rank; }, 0, 1 << 20)},
      {"--nranks",
       "N",
       "number of ranks with --rendezvous (default: $WORLD_SIZE)",
       {P::kNccl},
       int_option([](ProbeOptions& o) -> int& { return o.nccl.nranks; }, 1, 1 << 20)},
      {"--gpus",
       "N",
       "local mode: number of local GPUs to use (default: all)",
       {P::kNccl},
       int_option([](ProbeOptions& o) -> int& { return o.nccl.gpus; }, 1, 1024)},
      {"--min-busbw",
       "GBPS",
       "minimum bus bandwidth in GB/s (default: the thresholds file, local mode only)",
       {P::kNccl},
       double_option([](ProbeOptions& o) -> double& { return o.nccl.min_busbw_gbps; }, 0.0, 1e6,
                     true)},
  };
  return kTable;
}

bool applies_to(const OptionSpec& spec, ProbeKind kind) {
  return spec.probes.empty() ||
         std::find(spec.probes.begin(), spec.probes.end(), kind) != spec.probes.end();
}

const OptionSpec* find_option(std::string_view name) {
  for (const auto& spec : option_table()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

void append_option_help(std::ostringstream& out, const OptionSpec& spec) {
  std::string left = "  " + std::string(spec.name);
  if (!spec.arg.empty()) left += " " + std::string(spec.arg);
  out << left;
  constexpr std::size_t kColumn = 26;
  if (left.size() + 2 > kColumn) {
    out << "\n" << std::string(kColumn, ' ');
  } else {
    out << std::string(kColumn - left.size(), ' ');
  }
  // Wrap the help text at 100 columns.
  std::string_view text = spec.help;
  std::size_t column = kColumn;
  bool first = true;
  while (!text.empty()) {
    auto space = text.find(' ');
    std::string_view word = text.substr(0, space);
    if (!first && column + 1 + word.size() > 100) {
      out << "\n" << std::string(kColumn, ' ');
      column = kColumn;
      first = true;
    }
    if (!first) {
      out << ' ';
      ++column;
    }
    out << word;
    column += word.size();
    first = false;
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  out << "\n";
}

constexpr std::string_view kExitCodesHelp =
    "exit codes:\n"
    "  0 pass (or skip: nothing to test)   1 fail   2 usage or configuration error\n"
    "  3 no GPU (CUDA error 35 or 100)      4 deadline exceeded\n"
    "\n"
    "output: one JSON document on stdout with probe, device, metrics, thresholds, checks,\n"
    "verdict, exit_code, notes, details, elapsed_s.\n";

std::optional<int> env_int(const EnvLookup& env, const char* name) {
  if (!env) return std::nullopt;
  auto v = env(name);
  if (!v) return std::nullopt;
  return parse_number<int>(*v);
}

std::optional<std::string> validate(ProbeOptions& o, const std::set<std::string>& seen,
                                    const EnvLookup& env) {
  if (!seen.contains("--device")) {
    if (auto local_rank = env_int(env, "LOCAL_RANK"); local_rank && *local_rank >= 0) {
      o.common.device = *local_rank;
    }
  }
  if (o.common.inject == Injection::kHangKernel && o.probe != ProbeKind::kGemm) {
    return "--inject hang-kernel applies to the gemm probe only";
  }
  if (o.probe == ProbeKind::kNccl) {
    auto& n = o.nccl;
    if (n.rendezvous) {
      if (!seen.contains("--rank")) {
        if (auto r = env_int(env, "RANK")) n.rank = *r;
      }
      if (!seen.contains("--nranks")) {
        if (auto w = env_int(env, "WORLD_SIZE")) n.nranks = *w;
      }
      if (n.nranks < 1) return "--rendezvous needs --nranks (or $WORLD_SIZE)";
      if (n.rank < 0) return "--rendezvous needs --rank (or $RANK)";
      if (n.rank >= n.nranks) {
        return "--rank " + std::to_string(n.rank) + " must be below --nranks " +
               std::to_string(n.nranks);
      }
      if (seen.contains("--gpus"))
        return "--gpus is for local mode; with --rendezvous each "
               "process drives one GPU (--device)";
    } else if (seen.contains("--rank") || seen.contains("--nranks")) {
      return "--rank and --nranks need --rendezvous";
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view injection_name(Injection injection) {
  switch (injection) {
    case Injection::kNone:
      return "none";
    case Injection::kBitflip:
      return "bitflip";
    case Injection::kThrottle:
      return "throttle";
    case Injection::kHang:
      return "hang";
    case Injection::kHangKernel:
      return "hang-kernel";
  }
  return "none";
}

std::string_view gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::kBf16:
      return "bf16";
    case GemmPath::kFp16:
      return "fp16";
    case GemmPath::kTf32:
      return "tf32";
    case GemmPath::kTiled:
      return "tiled";
  }
  return "unknown";
}

std::string_view hbm_test_name(HbmTest test) {
  switch (test) {
    case HbmTest::kWalkingOnes:
      return "walking_ones";
    case HbmTest::kMovingInversions:
      return "moving_inversions";
    case HbmTest::kRandom:
      return "random";
  }
  return "unknown";
}

std::optional<RendezvousSpec> parse_rendezvous(std::string_view spec) {
  RendezvousSpec r;
  if (spec.starts_with("file:")) {
    r.kind = RendezvousSpec::Kind::kFile;
    r.path = std::string(spec.substr(5));
    if (r.path.empty()) return std::nullopt;
    return r;
  }
  if (spec.starts_with("tcp:")) {
    std::string_view rest = spec.substr(4);
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view host = rest.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {  // [::1]:port
      host = host.substr(1, host.size() - 2);
    }
    auto port = parse_number<int>(rest.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535 || host.empty()) return std::nullopt;
    r.kind = RendezvousSpec::Kind::kTcp;
    r.host = std::string(host);
    r.port = *port;
    return r;
  }
  return std::nullopt;
}

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  auto base = parse_number<std::uint64_t>(text.substr(0, digits));
  if (!base) return std::nullopt;
  std::string suffix(text.substr(digits));
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (suffix.ends_with("IB"))
    suffix.resize(suffix.size() - 2);
  else if (suffix.size() > 1 && suffix.ends_with("B"))
    suffix.resize(suffix.size() - 1);
  int shift = 0;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K")
    shift = 10;
  else if (suffix == "M")
    shift = 20;
  else if (suffix == "G")
    shift = 30;
  else if (suffix == "T")
    shift = 40;
  else
    return std::nullopt;
  if (*base > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  return *base << shift;
}

namespace {

const std::string kProbeList = "gemm, hbm, pcie, p2p, nccl, env";

// The flag table of probe `kind` (cli/flag_table.h): the options of option_table() that apply
// to it, applied into *o and recorded in *seen; its --help is probe_help(kind).
cli::FlagTable probe_table(ProbeKind kind, ProbeOptions* o, std::set<std::string>* seen) {
  const std::string probe(probe_name(kind));
  cli::FlagTable t("faultline-probe", "faultline-probe " + probe + " [options]");
  t.inline_values().help_text(probe_help(kind));
  for (const auto& spec : option_table()) {
    if (!spec.apply || !applies_to(spec, kind)) continue;  // --help: the table's own
    const std::string name(spec.name);
    t.add({name, std::string(spec.arg), "", std::string(spec.help),
           [o, seen, name, apply = spec.apply](const std::string& v) {
             if (auto error = apply(*o, v)) return name + ": " + *error;
             seen->insert(name);
             return std::string();
           }});
  }
  t.unknown([probe](const std::string& a) {
    return find_option(a) ? "option " + a + " does not apply to probe " + probe
                          : "unknown option " + a;
  });
  return t;
}

ParseResult usage(ParseResult result, const std::string& message) {
  result.kind = ParseResult::Kind::kError;
  result.text = cli::usage_line("faultline-probe", message);
  return result;
}

}  // namespace

ParseResult parse_probe_args(std::span<const std::string_view> args, const EnvLookup& env) {
  ParseResult result;
  const std::string first = args.empty() ? "" : std::string(args[0]);
  if (args.empty()) return usage(result, "no probe given (expected one of " + kProbeList + ")");
  if (cli::is_help(first) || first == "help") {
    result.kind = ParseResult::Kind::kHelp;
    result.text = program_help();
    return result;
  }
  result.probe_label = first;
  const auto kind = parse_probe_kind(args[0]);
  if (!kind)
    return usage(result, "unknown probe '" + first + "' (expected one of " + kProbeList + ")");
  ProbeOptions& o = result.options;
  o.probe = *kind;
  std::set<std::string> seen;
  const cli::FlagTable table = probe_table(*kind, &o, &seen);
  switch (table.parse({args.begin() + 1, args.end()}, &result.text)) {
    case 0:
      result.kind = ParseResult::Kind::kHelp;
      return result;
    case 2:
      result.kind = ParseResult::Kind::kError;
      return result;
  }
  if (auto error = validate(o, seen, env)) return usage(result, *error);
  result.kind = ParseResult::Kind::kRun;
  return result;
}

std::string program_help() {
  std::ostringstream out;
  out << "faultline-probe: GPU health probes (one probe per process, JSON on stdout, exit code =\n"
         "verdict)\n\n"
         "usage: faultline-probe <probe> [options]\n"
         "       faultline-probe <probe> --help     (every option of that probe)\n\n"
         "probes:\n";
  for (const auto& d : probe_descriptions()) {
    std::string name(probe_name(d.kind));
    out << "  " << name << std::string(8 - name.size(), ' ') << d.summary << "\n";
  }
  out << "\ncommon options (every probe):\n";
  for (const auto& spec : option_table()) {
    if (spec.probes.empty()) append_option_help(out, spec);
  }
  out << "\nprobe options:\n";
  for (const auto& spec : option_table()) {
    if (spec.probes.empty()) continue;
    std::string probes;
    for (ProbeKind k : spec.probes) {
      if (!probes.empty()) probes += ",";
      probes += probe_name(k);
    }
    OptionSpec labelled = spec;
    std::string help = "[" + probes + "] " + std::string(spec.help);
    labelled.help = help;
    append_option_help(out, labelled);
  }
  out << "\n" << kExitCodesHelp;
  return out.str();
}

std::string probe_help(ProbeKind kind) {
  std::ostringstream out;
  for (const auto& d : probe_descriptions()) {
    if (d.kind != kind) continue;
    out << "faultline-probe " << probe_name(kind) << ": " << d.summary << "\n\n"
        << d.detail << "\n\nusage: faultline-probe " << probe_name(kind) << " [options]\n";
  }
  bool any = false;
  for (const auto& spec : option_table()) {
    if (spec.probes.empty() || !applies_to(spec, kind)) continue;
    if (!any) out << "\n" << probe_name(kind) << " options:\n";
    any = true;
    append_option_help(out, spec);
  }
  out << "\ncommon options:\n";
  for (const auto& spec : option_table()) {
    if (spec.probes.empty()) append_option_help(out, spec);
  }
  out << "\n" << kExitCodesHelp;
  return out.str();
}

std::vector<std::string> option_names(ProbeKind kind) {
  std::vector<std::string> names;
  for (const auto& spec : option_table()) {
    if (applies_to(spec, kind)) names.emplace_back(spec.name);
  }
  return names;
}

}  // namespace faultline::kernels
