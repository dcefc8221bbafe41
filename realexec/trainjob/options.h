#pragma once

// Command line and environment of faultline-trainjob, parsed into one value so the job itself
// never reads getenv. The environment is the torchrun-style contract with faultline-agent
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, FAULTLINE_*); see README.md.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace faultline::live::trainjob {

enum class Mode { kTrain, kProbeBitwise, kProbeAllgather, kReplay };

struct Options {
  Mode mode = Mode::kTrain;
  // Flags.
  std::uint64_t seed = 1;
  std::int64_t steps = 0;  // train: stop once this step is reached, 0 = forever
  int step_ms = 0;
  int hidden = 64;
  int microbatches = 8;
  std::string loss_log;
  std::string version = "dev";
  std::int64_t deadline_ms = 30000;  // probes
  int probe_mib = 4;                 // allgather probe: MiB per rank
  // Data at fault: the batch of this step makes every rank's gradient NaN, in every run
  // that computes the step (-1: none). A deterministic NaN no machine can be blamed for.
  std::int64_t bad_batch_at = -1;
  // Code or data at fault: the last rank dies in this step with an illegal memory access,
  // in every run that computes the step (-1: none). A deterministic crash no machine can
  // be blamed for.
  std::int64_t crash_at = -1;
  // Environment.
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 0;  // 0: unknown (LOCAL_WORLD_SIZE unset)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string host_addr;
  // The rendezvous' credential (FAULTLINE_RENDEZVOUS_KEY, from the agent, one per generation)
  // and the generation (FAULTLINE_GEN, -1: unset): rank 0 takes only registrations that carry
  // both; empty: any well-formed registration of the right world size.
  std::string rendezvous_key;
  std::int64_t gen = -1;
  int report_fd = -1;
  std::string ckpt_dir;  // empty: no checkpoints
  int ckpt_every = 10;
  std::string fault_file;
  double rendezvous_s = 60;
  double collective_timeout_s = 0;  // 0: collectives wait forever
};

struct ParsedOptions {
  std::optional<Options> options;  // nullopt: exit with exit_code after printing message
  int exit_code = 0;
  std::string message;  // one line for stderr (usage errors) or the help text (stdout)
};

using EnvLookup = std::function<const char*(const char*)>;

// Parses argv[1..] and the environment. Unknown flags, bad values and inconsistent settings
// (e.g. WORLD_SIZE not dividing --microbatches) give exit code 2 and a one-line message naming
// the flag or variable; --help gives exit code 0 and the usage text.
ParsedOptions parse_options(const std::vector<std::string>& args, const EnvLookup& env);

std::string usage_text();

}  // namespace faultline::live::trainjob
