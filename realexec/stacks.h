// Stack capture of a live process and its reduction to a comparable signature.
//
// Stop-time diagnosis groups ranks by where their main thread is: ranks stuck in the
// same collective share a signature, the odd one out is the suspect. A signature is the
// main thread's function names innermost first, joined by " < ", with addresses,
// arguments, source locations and unknown ("??") frames removed, so the same place in
// the code gives the same string on every machine and run. "[stopped] " is prefixed
// when the process was stopped (state T or t) before the debugger attached.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "realexec/proc.h"
#include "realexec/reactor.h"

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
};

// Captures `pid`'s stacks on the reactor and calls `done(signature)` once. On failure
// the signature says why, starting with "capture failed: " (no debugger, timed out,
// ptrace refused, ...). The returned handle keeps nothing alive; it may be dropped.
std::shared_ptr<ChildRun> capture_stack(Reactor& r, pid_t pid, const StackCaptureOptions& options,
                                        std::function<void(const std::string& signature)> done);

}  // namespace faultline::live
