// Stack capture of a live process and its reduction to a comparable signature.
//
// Stop-time diagnosis groups ranks by where their main thread is: ranks stuck in the
// same collective share a signature, the odd one out is the suspect. A signature is the
// main thread's function names innermost first, joined by " < ", with addresses,
// arguments, source locations and unknown ("??") frames removed, so the same place in
// the code gives the same string on every machine and run. "[stopped] " is prefixed
// when the process was stopped (state T or t) before the debugger attached. A Python rank
// that announced a stack signal writes its own Python stacks instead (capture_python_stack).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "realexec/net/proc.h"
#include "realexec/net/reactor.h"

namespace faultline::live {

inline constexpr std::size_t kMaxSignatureFrames = 48;

// The signature of the main thread in the output of `gdb -batch -ex "thread apply all bt"`
// for process `pid` (the thread whose LWP is pid; else "Thread 1"; else the only one).
// Returns "" when no named frame is found.
std::string gdb_signature(const std::string& gdb_output, pid_t pid);
// The same for `eu-stack -p PID` output (the "TID pid:" block).
std::string eu_stack_signature(const std::string& eu_output, pid_t pid);
// The function name of one gdb frame line ("#3  0x... in ns::f (x=1) at a.cc:3"), or ""
// for "??" frames and lines that are not frames. "<signal handler called>" becomes
// "<signal handler>".
std::string gdb_frame_function(const std::string& line);

// The process state letter from /proc/PID/stat ('R', 'S', 'T', ...), or nullopt when the
// process is gone. `proc_root` is "/proc" outside tests.
std::optional<char> process_state(pid_t pid, const std::string& proc_root = "/proc");

struct StackCaptureOptions {
  std::string gdb = "gdb";            // program name or path; "" disables gdb
  std::string eu_stack = "eu-stack";  // used when gdb is not found; "" disables it
  Duration deadline = Duration::seconds(15);
  // A Python rank's dump (capture_python_stack) is complete once the main thread's block is
  // followed by another, or the dump has not grown for python_settle; without a main-thread
  // block, once it has not grown for python_settle_no_main.
  Duration python_settle = Duration::millis(100);
  Duration python_settle_no_main = Duration::seconds(1);
  Duration python_poll = Duration::millis(10);
};

// Captures `pid`'s stacks on the reactor and calls `done(signature)` once. On failure
// the signature says why, starting with "capture failed: " (no debugger, timed out,
// ptrace refused, ...). The returned handle keeps nothing alive; it may be dropped.
std::shared_ptr<ChildRun> capture_stack(Reactor& r, pid_t pid, const StackCaptureOptions& options,
                                        std::function<void(const std::string& signature)> done);

// --- Python ranks --------------------------------------------------------------------------
// A Python rank (faultline.Job) that registered faulthandler on a signal, writing to the
// descriptor the agent gave it (FAULTLINE_STACK_FD), and said so in its `started` report
// (`stack_signal`), is captured by that signal: the C-level handler writes every thread's
// Python frames even while the main thread is blocked in a collective, in well under a second,
// where gdb spends seconds loading libtorch's symbols.

// The largest dump read; a bigger one is judged on its first kMaxPythonDump bytes.
inline constexpr std::size_t kMaxPythonDump = 1 << 20;

// A faulthandler dump (all threads) parsed: "Thread 0x...", "Current thread 0x..." or
// "Stack" headers ending in "(most recent call first):", each followed by its frames
// ('  File "PATH", line N in NAME', innermost first), "  ..." (cut at 100 frames) or
// "  <no Python frame>"; blank lines between blocks; "..." after the 100th thread.
struct PythonDump {
  struct Block {
    std::vector<std::string> functions;  // NAME of each frame, innermost first
  };
  std::vector<Block> blocks;
  // The main thread's block: the one whose outermost frame is "<module>" (the script, or the
  // module run by -m and the runpy frames under it), else -1.
  int main = -1;
  bool main_followed = false;  // another block begins after the main one: it is whole
  std::string error;           // not a faulthandler dump: why, naming the line
};
// Parses the whole lines of `text` (a last line without its newline is left out).
PythonDump parse_python_dump(const std::string& text);
// The main thread's signature in a dump, in the same form as gdb's (function names
// innermost first, joined by " < "; no paths or line numbers, so the same place gives the same
// string on every machine): the "<module>" block, else the last block (CPython lists the
// newest thread first, the main thread last). "" when there is none or it has no frame.
std::string python_signature(const PythonDump& dump);
std::string faulthandler_signature(const std::string& text);

// The signal a rank's `started` report names in stack_signal ("SIGUSR1" or "SIGUSR2": the
// only ones accepted, so that no announcement makes the agent send a signal that stops or
// kills), or 0.
int stack_signal_number(const std::string& name);
// Whether process `pid` catches signal `signo` (its SigCgt mask in /proc/PID/status).
bool catches_signal(pid_t pid, int signo, const std::string& proc_root = "/proc");

// Captures the Python stacks of `pid`, which dumps them to `dump_fd` (the agent's end of the
// rank's FAULTLINE_STACK_FD: a memfd) on `signo`: truncates it, sends the signal to the
// process alone, and reads the dump until it is complete (StackCaptureOptions) or the
// deadline, then calls `done(signature)` once. A stopped process (state T or t) runs no
// handler: it is not signalled and the answer is at once "[stopped] " + kStoppedNoPython.
// A process that does not catch `signo` is not signalled either: its stacks are taken with
// gdb (capture_stack), whose run is returned. Failures start with "capture failed: ".
inline constexpr const char* kStoppedNoPython =
    "no Python stack (a stopped process runs no signal handler)";
std::shared_ptr<ChildRun> capture_python_stack(Reactor& r, pid_t pid, int dump_fd, int signo,
                                               const StackCaptureOptions& options,
                                               std::function<void(const std::string&)> done);

}  // namespace faultline::live
