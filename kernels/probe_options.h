#pragma once

// Command line of `faultline-probe`: `faultline-probe <probe> [options]`, one probe per process.
// The options are declared once, in a table in probe_options.cc: each probe's flag table
// (cli/flag_table.h: one usage-error wording) and the `--help` texts are generated from it, so
// help cannot forget an option. Parsing never touches the
// GPU, so a typo is answered with exit code 2 in microseconds on any machine.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/probe_report.h"

namespace faultline::kernels {

// --inject: make a healthy GPU look faulty so the failure path is testable.
//   bitflip:  flip bits in results (GEMM output, tested memory, copied buffers, collective
//             outputs); the checksum / memory / data checks must catch every one.
//   throttle: insert sleeps into the timed work; bandwidth and TFLOP/s checks must catch it.
//   hang:     the probe stops responding before touching the GPU; the deadline must catch it.
//   hang-kernel (gemm only): the first burn launches a GPU kernel that never finishes and waits
//             for it, as a wedged GPU would; the deadline must kill the probe and its context.
enum class Injection { kNone, kBitflip, kThrottle, kHang, kHangKernel };
std::string_view injection_name(Injection injection);

// The GEMM paths the burn exercises: cuBLAS in three precisions plus our own tiled kernel (BF16
// inputs on tensor cores through WMMA), so a cuBLAS-specific and a hand-written code path see the
// same checks.
enum class GemmPath { kBf16, kFp16, kTf32, kTiled };
std::string_view gemm_path_name(GemmPath path);

enum class HbmTest { kWalkingOnes, kMovingInversions, kRandom };
std::string_view hbm_test_name(HbmTest test);

// Where NCCL ranks on different machines exchange the unique id.
struct RendezvousSpec {
  enum class Kind { kFile, kTcp };
  Kind kind = Kind::kFile;
  std::string path;  // kFile
  std::string host;  // kTcp
  int port = 0;      // kTcp
};
// Parses "file:/path" or "tcp:host:port"; nullopt when malformed.
std::optional<RendezvousSpec> parse_rendezvous(std::string_view spec);

struct CommonOptions {
  int device = 0;
  double deadline_s = 300.0;
  std::string thresholds_path;  // empty: search (see thresholds.h)
  Injection inject = Injection::kNone;
  std::uint64_t seed = 20240607;
  bool watchdog = true;  // false: run in-process, deadline by SIGALRM + _exit
  bool pretty = false;
};

struct GemmOptions {
  std::vector<GemmPath> paths = {GemmPath::kBf16, GemmPath::kFp16, GemmPath::kTf32,
                                 GemmPath::kTiled};
  // m = n = k; large enough that the O(n^2) checksum work stays a few percent of the O(n^3) GEMM.
  int size = 16384;
  double duration_s = 5.0;  // burn time per path
  bool baseline = true;     // interleave plain cuBLAS chunks to measure the same-run baseline
  int digest_size = 1024;   // 0 disables the bit-exact digest GEMM
  double tolerance_sigma = 16.0;
  std::string expect_digest;  // hex; when set, the digest must equal it
};

struct HbmOptions {
  double fraction = 0.90;  // of free device memory
  std::vector<HbmTest> tests = {HbmTest::kWalkingOnes, HbmTest::kMovingInversions,
                                HbmTest::kRandom};
  int passes = 1;
  std::uint64_t bandwidth_bytes = std::uint64_t{1} << 30;  // per array
  int iterations = 20;
};

struct TransferOptions {
  std::uint64_t bytes = std::uint64_t{256} << 20;
  int iterations = 20;
};

struct NcclOptions {
  std::vector<Collective> collectives = {Collective::kAllReduce, Collective::kAllGather,
                                         Collective::kAllToAll};
  std::uint64_t bytes = std::uint64_t{256} << 20;
  int iterations = 20;
  int warmup = 5;
  std::optional<RendezvousSpec> rendezvous;  // set: multi-process mode, one GPU per process
  int rank = -1;
  int nranks = -1;
  int gpus = 0;                 // local mode: how many local GPUs (0 = all)
  double min_busbw_gbps = 0.0;  // 0: use the thresholds file (local mode only)
};

struct ProbeOptions {
  ProbeKind probe = ProbeKind::kEnv;
  CommonOptions common;
  GemmOptions gemm;
  HbmOptions hbm;
  TransferOptions pcie;
  TransferOptions p2p = {std::uint64_t{256} << 20, 10};
  NcclOptions nccl;
};

struct ParseResult {
  enum class Kind { kRun, kHelp, kError };
  Kind kind = Kind::kError;
  ProbeOptions options;
  std::string probe_label;  // the probe as typed (for error reports); empty when none
  std::string text;         // kHelp: the help text; kError: the usage-error line (cli/flag_table.h)
};

// Reads an environment variable; injectable so tests do not depend on the real environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_env();

// Parses the arguments after argv[0]. Defaults taken from the environment (torchrun conventions):
// --device from LOCAL_RANK, --rank from RANK, --nranks from WORLD_SIZE (the latter two only when
// --rendezvous is given). Cross-option rules (e.g. --rank < --nranks) are checked here.
ParseResult parse_probe_args(std::span<const std::string_view> args, const EnvLookup& env);

// Help for the program (probe list + common options) and for one probe (all its options).
std::string program_help();
std::string probe_help(ProbeKind kind);

// Every option name (e.g. "--deadline") that applies to `kind`, for tests of the help text.
std::vector<std::string> option_names(ProbeKind kind);

// Parses "256M", "1G", "4096", "1GiB" (binary multiples). nullopt when malformed.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

}  // namespace faultline::kernels
