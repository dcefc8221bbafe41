// Child processes for live mode: fork + execve of a fixed argv, never a shell.
//
// The agent runs training ranks, probes, gdb and `ip` through these functions. The argv
// and environment are built by the caller from the local config and checked values, so
// nothing a peer sends is interpreted by a shell. Children get an empty signal mask and
// default signal dispositions (the reactor blocks signals for its signalfd), their own
// process group when asked (so a whole rank, helpers included, can be stopped or killed
// as one) and, by default, SIGKILL when the agent dies (a lost agent is a lost machine).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "realexec/net/reactor.h"

namespace faultline::live {

// Where one of the child's standard streams goes.
struct Redirect {
  enum class Kind { kInherit, kDevNull, kFile, kPipe };
  Kind kind = Kind::kInherit;
  std::string path;  // kFile: opened O_WRONLY|O_CREAT|O_APPEND, mode 0644

  static Redirect inherit() { return {}; }
  static Redirect dev_null() { return {Kind::kDevNull, {}}; }
  static Redirect file(std::string p) { return {Kind::kFile, std::move(p)}; }
  static Redirect pipe() { return {Kind::kPipe, {}}; }
};

struct SpawnSpec {
  // argv[0] is the program: a path, or a bare name looked up in the agent's own PATH.
  std::vector<std::string> argv;
  // The complete environment ("KEY=VALUE"); see make_env().
  std::vector<std::string> env;
  std::string cwd;  // "" = the agent's
  Redirect stdin_from = Redirect::dev_null();
  Redirect stdout_to = Redirect::inherit();
  Redirect stderr_to = Redirect::inherit();
  // Extra descriptors: child fd number -> parent fd (not taken; the caller closes its copy).
  std::map<int, int> extra_fds;
  bool new_process_group = true;  // the child leads a group whose id is its pid
  bool die_with_agent = true;     // PR_SET_PDEATHSIG SIGKILL
};

struct Spawned {
  pid_t pid = -1;
  int stdout_fd = -1;  // parent's read end when stdout_to is a pipe (non-blocking, owned)
  int stderr_fd = -1;  // likewise for stderr
};

// Starts the child. Returns false with *err ("cannot execute PROG: reason", or the
// redirect that failed) when the program could not be started; exec failures are
// reported here, not as an exit status, through a close-on-exec pipe.
bool spawn(const SpawnSpec& spec, Spawned* out, std::string* err);

// The agent's environment with `overrides` applied (later keys replace earlier ones).
std::vector<std::string> make_env(const std::map<std::string, std::string>& overrides);
// The full path of `name` in PATH (or `name` itself when it contains '/'); "" when no
// executable file is found.
std::string find_program(const std::string& name);

// SIGCONT then `sig` to process group `pgid` (so a stopped group dies too).
void signal_group(pid_t pgid, int sig);

// Describes a wait status: "exit code N" or "killed by signal N (SIGNAME)".
std::string describe_wait_status(int wait_status);
// "SIGKILL" for 9, "SIG<n>" when unknown.
std::string signal_name(int signo);

// The result of run_child().
struct ChildResult {
  bool started = false;
  std::string spawn_error;  // when !started
  int wait_status = 0;
  bool timed_out = false;  // killed at the deadline
  std::string out;         // stdout, truncated to max_output bytes
  std::string err;         // stderr, truncated likewise (the tail is kept)
  Duration elapsed;
  int exit_code() const;  // -1 unless it exited normally
};

// A child run to completion on the reactor: output collected, process group killed at
// the deadline. `done` is called exactly once, from the reactor (never from within
// run_child itself, even when the spawn fails). The returned handle may be dropped;
// cancel() kills the child early (done still follows, with timed_out false).
class ChildRun {
 public:
  void cancel();
  pid_t pid() const { return pid_; }

 private:
  friend std::shared_ptr<ChildRun> run_child(Reactor&, SpawnSpec, Duration,
                                             std::function<void(const ChildResult&)>, std::size_t);
  explicit ChildRun(Reactor& r) : r_(r) {}
  void on_pipe(int* fd, std::string* buf);
  void drain_and_finish();

  Reactor& r_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::uint64_t deadline_timer_ = 0;
  std::size_t max_output_ = 0;
  Instant started_;
  ChildResult result_;
  std::function<void(const ChildResult&)> done_;
  std::shared_ptr<ChildRun> self_;  // keeps the run alive until done_ has been called
};

// Runs `spec` (its stdout and stderr are replaced by pipes unless they name a file or
// /dev/null) with a deadline (Duration::infinite() for none).
std::shared_ptr<ChildRun> run_child(Reactor& r, SpawnSpec spec, Duration deadline,
                                    std::function<void(const ChildResult&)> done,
                                    std::size_t max_output = 256 * 1024);

}  // namespace faultline::live
