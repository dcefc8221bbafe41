// Signature normalisation on captured debugger output and Python (faulthandler) dumps
// (realistic samples, inline).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "realexec/agent/stack_capture.h"

namespace faultline::live {
namespace {

// gdb 13 on Debian 12, a two-threaded C program sleeping in sleep_forever().
constexpr const char* kGdbTwoThreads = R"([New LWP 5660]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
0x00007f4c761bd545 in __GI___clock_nanosleep (clock_id=clock_id@entry=0, flags=flags@entry=0, req=req@entry=0x7ffe0bea1de0, rem=rem@entry=0x7ffe0bea1de0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
48	../sysdeps/unix/sysv/linux/clock_nanosleep.c: No such file or directory.

Thread 2 (Thread 0x7f4c760ea6c0 (LWP 5660) "t"):
#0  0x00007f4c761c1df2 in __libc_pause () at ../sysdeps/unix/sysv/linux/pause.c:29
#1  0x00005648c8bdf16a in th (a=0x0) at t.c:3
#2  0x00007f4c761771f5 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442
#3  0x00007f4c761f78ec in clone3 () at ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81

Thread 1 (Thread 0x7f4c760eb740 (LWP 5658) "t"):
#0  0x00007f4c761bd545 in __GI___clock_nanosleep (clock_id=clock_id@entry=0, flags=flags@entry=0, req=req@entry=0x7ffe0bea1de0, rem=rem@entry=0x7ffe0bea1de0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00007f4c761c1e53 in __GI___nanosleep (req=req@entry=0x7ffe0bea1de0, rem=rem@entry=0x7ffe0bea1de0) at ../sysdeps/unix/sysv/linux/nanosleep.c:25
#2  0x00007f4c761c1d8a in __sleep (seconds=0) at ../sysdeps/posix/sleep.c:55
#3  0x00005648c8bdf17a in sleep_forever () at t.c:4
#4  0x00005648c8bdf1a6 in main () at t.c:5
[Inferior 1 (process 5658) detached]
)";

// A PyTorch rank stuck in NCCL, without debug info: C++ names with parameter types,
// templates, unknown frames and a library suffix.
constexpr const char* kGdbNccl = R"(
Thread 3 (Thread 0x7f00aa7fc640 (LWP 4102) "pt_nccl_watchdg"):
#0  0x00007f01c1a8f117 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f01c1a98b50 in pthread_cond_timedwait () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f01c19e2740 (LWP 4100) "python"):
#0  0x00007f0199a1c2d0 in ncclProxyProgress(void*) () from /usr/lib/libnccl.so.2
#1  0x00007f0199a0f1b3 in ncclGroupEndInternal() () from /usr/lib/libnccl.so.2
#2  0x00007f01a2b3c4d5 in c10d::ProcessGroupNCCL::allreduce(std::vector<at::Tensor, std::allocator<at::Tensor> >&, c10d::AllreduceOptions const&) () from /usr/lib/libtorch_cuda.so
#3  0x00007f01a2b3c4d5 in std::_Function_handler<void (int), main::{lambda(int)#1}>::_M_invoke(std::_Any_data const&, int&&) () from /x.so
#4  0x000055d5c0a1b2c3 in ?? ()
#5  0x00007f01b0000000 in at::Tensor::operator()(long) const () from /x.so
#6  0x00007f01b0000001 in foo [clone .constprop.0] (x=1) at foo.cc:10
#7  <signal handler called>
#8  0x000055d5c0a1b2c4 in _PyEval_EvalFrameDefault (tstate=0x1, frame=0x2, throwflag=0) at Python/ceval.c:5381
#9  0x000055d5c0a1b2c5 in main ()
)";

TEST(Stacks, MainThreadOfGdbOutput) {
  EXPECT_EQ(gdb_signature(kGdbTwoThreads, 5658),
            "__clock_nanosleep < __nanosleep < __sleep < sleep_forever < main");
  // Without a matching LWP, "Thread 1" is the main thread.
  EXPECT_EQ(gdb_signature(kGdbTwoThreads, 1), gdb_signature(kGdbTwoThreads, 5658));
  // The other thread when asked for its LWP.
  EXPECT_EQ(gdb_signature(kGdbTwoThreads, 5660), "__libc_pause < th < start_thread < clone3");
}

TEST(Stacks, CppNamesAreReducedToFunctionNames) {
  EXPECT_EQ(gdb_signature(kGdbNccl, 4100),
            "ncclProxyProgress < ncclGroupEndInternal < c10d::ProcessGroupNCCL::allreduce < "
            "std::_Function_handler<void (int), main::{lambda(int)#1}>::_M_invoke < "
            "at::Tensor::operator() < foo < <signal handler> < _PyEval_EvalFrameDefault < main");
}

TEST(Stacks, SameStackDifferentAddressesSameSignature) {
  std::string other = kGdbTwoThreads;
  for (char& c : other) {
    if (c == '7') c = '6';  // every address and line number changes
  }
  EXPECT_EQ(gdb_signature(other, 5658), gdb_signature(kGdbTwoThreads, 5658));
}

TEST(Stacks, FrameLines) {
  EXPECT_EQ(gdb_frame_function("#0  sleep_forever () at t.c:4"), "sleep_forever");
  EXPECT_EQ(gdb_frame_function("#12 0x0000 in ns::A<int>::operator<<(int) () from /l.so"),
            "ns::A<int>::operator<<");
  EXPECT_EQ(gdb_frame_function("#1  0x00007f in ?? ()"), "");
  EXPECT_EQ(gdb_frame_function("#1  0x00007f in fn"), "fn");
  EXPECT_EQ(gdb_frame_function("not a frame"), "");
  EXPECT_EQ(gdb_frame_function("#3  0x0000 in x::y (this=0x1, s=\" (at \") at a.cc:3"), "x::y");
}

TEST(Stacks, SingleThreadedBtWithoutHeaders) {
  EXPECT_EQ(gdb_signature("#0  0x1 in read () from libc\n#1  0x2 in main () at m.c:3\n", 99),
            "read < main");
  EXPECT_EQ(gdb_signature("ptrace: Operation not permitted.\nNo stack.\n", 99), "");
}

TEST(Stacks, EuStack) {
  const char* text = R"(PID 4100 - process
TID 4102:
#0  0x00007f01c1a8f117 __futex_abstimed_wait_common
TID 4100:
#0  0x00007f4c761bd545 __GI___clock_nanosleep
#1  0x00007f4c761c1e53 __GI___nanosleep
#2  0x00007f4c761c1d8a sleep
#3  0x00005648c8bdf17a
#4  0x00005648c8bdf1a6 main
)";
  EXPECT_EQ(eu_stack_signature(text, 4100), "__clock_nanosleep < __nanosleep < sleep < main");
}

TEST(Stacks, LongStacksAreCut) {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += "#" + std::to_string(i) + "  0x1 in f" + std::to_string(i) + " () at a.c:1\n";
  }
  std::string sig = gdb_signature(text, 1);
  EXPECT_EQ(sig.substr(0, 10), "f0 < f1 < ");
  EXPECT_EQ(sig.substr(sig.size() - 6), " < ...");
}

// A faultline.Job rank of examples/pytorch/ddp_gloo.py hung by the `hang` directive, as
// Python 3.11's faulthandler writes it on SIGUSR2 (all threads; the main thread last).
constexpr const char* kPyHung = R"(Thread 0x00007f3b2d7fe6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/work/python/faultline/watch.py", line 5 in watcher
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Current thread 0x00007f3b3a1e1040 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/work/python/faultline/job.py", line 297 in _fire
  File "/work/python/faultline/job.py", line 146 in begin_step
  File "/work/examples/pytorch/ddp_gloo.py", line 77 in main
  File "/work/examples/pytorch/ddp_gloo.py", line 95 in <module>
)";

// Its peer, blocked in DDP's gradient all-reduce inside backward (no Python frame runs the
// collective), signalled on another machine, another install path, another line numbering.
constexpr const char* kPyPeer = R"(Current thread 0x00007f00aa7fc640 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/autograd/graph.py", line 744 in _engine_run_backward
  File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 267 in backward
  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 525 in backward
  File "/srv/job/examples/pytorch/ddp_gloo.py", line 83 in main
  File "/srv/job/examples/pytorch/ddp_gloo.py", line 96 in <module>
)";

TEST(PythonStacks, MainThreadOfAFaulthandlerDump) {
  EXPECT_EQ(faulthandler_signature(kPyHung), "wait < wait < _fire < begin_step < main < <module>");
  EXPECT_EQ(faulthandler_signature(kPyPeer),
            "_engine_run_backward < backward < backward < main < <module>");
  const PythonDump d = parse_python_dump(kPyHung);
  EXPECT_EQ(d.error, "");
  ASSERT_EQ(d.blocks.size(), 2u);
  EXPECT_EQ(d.main, 1);
  EXPECT_FALSE(d.main_followed);  // last: complete only once the dump stops growing
}

TEST(PythonStacks, SamePlaceSameStringWhateverThePathsLinesAndThreadOrder) {
  std::string other = kPyHung;
  for (char& c : other) {
    if (c == '7') c = '6';  // thread ids and line numbers
  }
  EXPECT_EQ(faulthandler_signature(other), faulthandler_signature(kPyHung));
  // The main thread first and not the current one (the signal landed on a gloo thread).
  const std::string main_first = "Thread" + std::string(kPyPeer).substr(14) +
                                 "\nCurrent thread 0x1 (most recent call first):\n"
                                 "  <no Python frame>\n";
  EXPECT_EQ(main_first.rfind("Thread 0x00007f00aa7fc640 (most", 0), 0u);
  const PythonDump d = parse_python_dump(main_first);
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.main, 0);
  EXPECT_TRUE(d.main_followed);  // whole: another block began after it
  EXPECT_EQ(python_signature(d), faulthandler_signature(kPyPeer));
}

TEST(PythonStacks, RunpyMainAndDumpsWithoutAModuleFrame) {
  // python -m pkg.train: runpy's frames under the module's.
  EXPECT_EQ(faulthandler_signature("Current thread 0x1 (most recent call first):\n"
                                   "  File \"/t/train.py\", line 9 in step\n"
                                   "  File \"/t/train.py\", line 12 in <module>\n"
                                   "  File \"<frozen runpy>\", line 88 in _run_code\n"
                                   "  File \"<frozen runpy>\", line 198 in _run_module_as_main\n"),
            "step < <module> < _run_code < _run_module_as_main");
  // No "<module>" frame anywhere (an embedded interpreter): the last block, CPython's oldest
  // thread.
  const PythonDump d = parse_python_dump(
      "Thread 0x2 (most recent call first):\n  File \"a.py\", line 1 in worker\n\n"
      "Thread 0x1 (most recent call first):\n  File \"b.py\", line 2 in serve\n");
  EXPECT_EQ(d.main, -1);
  EXPECT_EQ(python_signature(d), "serve");
  // A main thread without Python frames, and frames cut at 100 ("  ..."), and a name cut.
  EXPECT_EQ(faulthandler_signature("Stack (most recent call first):\n  <no Python frame>\n"), "");
  std::string deep = "Current thread 0x1 (most recent call first):\n";
  for (int i = 0; i < 100; ++i)
    deep += "  File \"r.py\", line " + std::to_string(i) + " in f" + std::to_string(i) + "\n";
  deep += "  ...\n";
  const std::string sig = faulthandler_signature(deep);
  EXPECT_EQ(sig.substr(0, 10), "f0 < f1 < ");
  EXPECT_EQ(sig.substr(sig.size() - 6), " < ...");
  EXPECT_EQ(faulthandler_signature("Stack (most recent call first):\n  File \"x\", line ??? in "
                                   "???\n  File \"x\", line 3 in " +
                                   std::string(1000, 'n') + "\n"),
            "??? < " + std::string(200, 'n'));
}

TEST(PythonStacks, ATruncatedDumpIsJudgedOnItsWholeLines) {
  const std::string whole = kPyHung;
  // Cut inside the main thread's last frame: no main thread yet, the cut line left out.
  const std::string cut = whole.substr(0, whole.size() - 12);
  const PythonDump d = parse_python_dump(cut);
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.main, -1);
  ASSERT_EQ(d.blocks.size(), 2u);
  EXPECT_EQ(d.blocks[1].functions.back(), "main");
  EXPECT_TRUE(parse_python_dump("").blocks.empty());
  EXPECT_TRUE(parse_python_dump("Thread 0x1 (most rec").blocks.empty());
}

TEST(PythonStacks, WhatIsNotAFaulthandlerDumpIsRefusedNamingTheLine) {
  EXPECT_EQ(parse_python_dump("garbage\n").error, "line 1 is not faulthandler's (\"garbage\")");
  EXPECT_EQ(
      parse_python_dump(std::string("\0\0\0\0Thread 0x1 (most recent call first):\n", 41)).error,
      "line 1 is not faulthandler's (\"????Thread 0x1 (most recent call first):\")");
  EXPECT_EQ(parse_python_dump("  File \"a.py\", line 1 in f\n").error,
            "line 1: a frame before any thread header");
  const std::string hostile = std::string(kPyHung) + "{\"type\": \"x\"}\n";
  EXPECT_EQ(parse_python_dump(hostile).error,
            "line 16 is not faulthandler's (\"{\"type\": \"x\"}\")");
  // Names that are not printable ASCII become '?' (a signature goes out as JSON).
  EXPECT_EQ(faulthandler_signature("Stack (most recent call first):\n  File \"a\", line 1 in "
                                   "f\xc3\xa9\x01\n"),
            "f???");
}

TEST(PythonStacks, OnlyTheUserSignalsAreAnnounceable) {
  EXPECT_EQ(stack_signal_number("SIGUSR1"), SIGUSR1);
  EXPECT_EQ(stack_signal_number("SIGUSR2"), SIGUSR2);
  for (const char* s : {"SIGKILL", "SIGSTOP", "SIGTERM", "SIGSEGV", "10", "", "sigusr1"})
    EXPECT_EQ(stack_signal_number(s), 0) << s;
}

void ignore_signal(int) {}

TEST(PythonStacks, CaughtSignalsOfThisProcess) {
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = ignore_signal;
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  EXPECT_TRUE(catches_signal(::getpid(), SIGUSR1));
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_FALSE(catches_signal(::getpid(), SIGUSR1));
  EXPECT_FALSE(catches_signal(999999999, SIGUSR1));
}

TEST(Stacks, ProcessStateOfThisProcess) {
  auto st = process_state(::getpid());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, 'R');
  EXPECT_FALSE(process_state(999999999).has_value());
}

}  // namespace
}  // namespace faultline::live
