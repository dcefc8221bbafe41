#pragma once

// Fault hooks of the reference training job: a per-machine control file that tests and demos
// write to make a rank misbehave the way real jobs do, so live mode's detection, diagnosis and
// recovery have something real to find.
//
// One directive per line, optionally prefixed by the agent's id and a target:
//   [id=ID] [local_rank=K|K1,K2|all] crash SIGNATURE...   one-shot: SIGNATURE on stderr, fatal
//                                                  report, exit 1
//   [local_rank=...] hang                          one-shot: block forever in the next collective
//   [local_rank=...] nan                           one-shot: next step's local gradient is NaN
//   [local_rank=...] slow FACTOR                   persistent: step time x FACTOR
//   [local_rank=...] sdc [after=N]                 persistent: from this process's (N+1)-th
//                                                  computed step on, flip an exponent bit of one
//                                                  local gradient element each step
// Without a prefix a directive targets local rank 0 only. `id=ID` (1 to 64 letters, digits,
// '.', '_' or '-') names the directive: the job acknowledges it by that id (a "fault" report)
// when it takes it, before it acts, and the agent confirms the fault only then
// (realexec/PROTOCOL.md, "Fault acknowledgement"). Blank lines and lines starting with
// '#' are ignored. Unknown directives are reported and otherwise ignored (never consumed).
//
// One-shot directives are consumed before they act: under an flock of the file's directory the
// rank re-reads the file and rewrites it without that directive (temporary file + rename), so a
// restarted rank does not fire it again and two ranks never both fire a single-rank directive.
// For "local_rank=all" the rank only removes itself: with LOCAL_WORLD_SIZE known the line is
// rewritten to list the local ranks that have not fired yet; without it the line is removed.
// Persistent directives stay: the fault belongs to the machine, not the process.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::live::trainjob {

enum class FaultKind { kCrash, kHang, kNan, kSlow, kSdc };
// The directive's name in the file and in acknowledgements ("crash", "hang", ...).
const char* fault_kind_name(FaultKind k);

struct FaultDirective {
  FaultKind kind = FaultKind::kCrash;
  std::string signature;         // crash
  double factor = 1;             // slow
  std::int64_t after_steps = 0;  // sdc
  bool all_local_ranks = false;
  std::vector<int> local_ranks;  // targets when !all_local_ranks
  std::string id;                // the agent's id of the directive, "" when none
  std::string line;              // the line as written (trimmed), identifies it for consumption

  bool one_shot() const {
    return kind == FaultKind::kCrash || kind == FaultKind::kHang || kind == FaultKind::kNan;
  }
  bool applies_to(int local_rank) const;
};

struct ParsedFaultFile {
  std::vector<FaultDirective> directives;  // in file order
  std::vector<std::string> errors;         // "line N: what is wrong"
};

ParsedFaultFile parse_fault_text(std::string_view text);

// The text of `text` after `local_rank` consumed the first line equal to `line` that applies to
// it, or nullopt when no such line is left. `local_world_size` <= 0 means unknown.
std::optional<std::string> consume_in_text(std::string_view text, const std::string& line,
                                           int local_rank, int local_world_size);

// One rank's view of its machine's fault file; cheap to poll at every step boundary.
class FaultFile {
 public:
  // An empty path disables fault injection.
  FaultFile(std::string path, int local_rank, int local_world_size);

  // Re-reads the file when its identity, size or mtime changed. Parse errors are printed to
  // stderr once per change.
  void poll();

  // Directives currently in the file that apply to this rank, in file order.
  const std::vector<FaultDirective>& active() const { return active_; }

  // Removes `d` for this rank from the file atomically. True when this process consumed it,
  // false when it was gone already (consumed by someone else): then it must not act.
  bool consume(const FaultDirective& d);

  // The persistent directive of `kind` in force (the last matching line), or null.
  const FaultDirective* persistent(FaultKind kind) const;

  // Persistent settings (the last matching line wins); nullopt when absent.
  std::optional<double> slow_factor() const;
  std::optional<std::int64_t> sdc_after() const;

 private:
  std::string path_;
  int local_rank_;
  int local_world_size_;
  bool seen_ = false;
  ino_t ino_ = 0;
  off_t size_ = -1;
  std::int64_t mtime_ns_ = -1;
  std::vector<FaultDirective> active_;
};

}  // namespace faultline::live::trainjob
