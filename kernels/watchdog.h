#pragma once

// Deadlines that hold even when the GPU does not: a faulty GPU can hang a kernel, a driver call or
// an NCCL collective forever (DCGM users report exactly that, docs/domain.md §8), and a probe
// that hangs is worse than one that fails. run_in_child() forks before any CUDA call, lets the
// child do the GPU work and stream its report through a pipe, and SIGKILLs it at the deadline;
// the parent never touches the GPU, so it can always print a verdict. InProcessDeadline is the
// lighter alternative for `--no-watchdog` (debuggers, profilers): a SIGALRM handler that writes a
// pre-rendered verdict and _exit()s.

#include <functional>
#include <string>
#include <string_view>

namespace faultline::kernels {

struct ChildResult {
  enum class Kind {
    kExited,     // the child exited by itself (exit_status)
    kSignaled,   // the child died of a signal (signal)
    kDeadline,   // the deadline passed; the child was killed
    kForkFailed  // no child could be started (error)
  };
  Kind kind = Kind::kForkFailed;
  int exit_status = 0;
  int signal = 0;
  std::string output;  // everything the child wrote to its pipe
  double elapsed_s = 0.0;
  std::string error;
};

// Runs `body` in a forked child, passing it the write end of a pipe; body's return value becomes
// the child's exit status (an escaping exception becomes 125). The parent collects the pipe until
// the child exits or `deadline_s` passes, then kills it with SIGKILL and waits at most 2 s more
// for it to be reaped (a child stuck in the driver may never be). The child is also killed if the
// parent dies (PR_SET_PDEATHSIG). Requires: no CUDA context exists in this process yet.
ChildResult run_in_child(const std::function<int(int out_fd)>& body, double deadline_s);

// The last '\n'-terminated line of `output` (without the newline), or "" when there is none.
std::string last_complete_line(std::string_view output);

// Writes all of `data` to `fd`, retrying on EINTR and short writes. Returns false on error.
bool write_all(int fd, std::string_view data);

// Arms a one-shot SIGALRM after `seconds`; when it fires, `message` is written to `fd` (stdout by
// default) and the process _exit()s with `exit_code`. Only one may be armed at a time; the
// destructor disarms it.
class InProcessDeadline {
 public:
  InProcessDeadline(double seconds, std::string message, int exit_code, int fd = 1);
  ~InProcessDeadline();
  InProcessDeadline(const InProcessDeadline&) = delete;
  InProcessDeadline& operator=(const InProcessDeadline&) = delete;
};

}  // namespace faultline::kernels
