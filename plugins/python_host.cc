#include "plugins/python_host.h"

#include <pthread.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "policies/localization/localizers.h"

namespace faultline::plugins::python {

namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- forks

// Whether the forking thread held the interpreter: PyOS_BeforeFork ran and its pair must.
thread_local bool g_forking_with_python = false;

void before_fork() {
  g_forking_with_python = Py_IsInitialized() && PyGILState_Check();
  if (g_forking_with_python) PyOS_BeforeFork();
}
void after_fork_parent() {
  if (g_forking_with_python) PyOS_AfterFork_Parent();
}
void after_fork_child() {
  if (g_forking_with_python) PyOS_AfterFork_Child();
}

void install_fork_hooks() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
}

// ---------------------------------------------------------------- the deadline

// "faultline" or "faultline-live", for the one line the process ends with.
std::string program_name() {
  std::error_code ec;
  const std::string exe = fs::read_symlink("/proc/self/exe", ec).filename().string();
  return exe.rfind("faultline", 0) == 0 ? exe : "faultline";
}

// Whether SIGUSR2 raises TimeoutError in Python here (own_process): a call blocked in a
// system call (time.sleep, a socket) is woken by it, which the asynchronous exception alone
// would not do.
std::atomic<bool> g_deadline_signal{false};

// One per process (a fork starts its own: threads do not survive a fork, and the parent's
// mutex may have been held at the time). Arms for one call at a time; when the call outlasts
// its deadline, raises TimeoutError in the calling thread (at its next bytecode); when even
// that does not end it within the grace, the process exits 2 with the one line. Arming and
// disarming wake nothing (a module is called hundreds of times a replica): the thread looks
// every 100 ms, or at the deadline if that is sooner, so a deadline holds within 100 ms.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* current = nullptr;
    if (!current || current->pid_ != ::getpid()) current = new Watchdog();  // the old one leaks
    return *current;
  }
  void arm(double seconds, unsigned long thread, const Identity* who, const char* method) {
    std::lock_guard<std::mutex> l(mu_);
    ++call_;
    pthread_ = ::pthread_self();
    armed_ = true;
    fired_ = false;
    thread_ = thread;
    who_ = who;
    method_ = method;
    deadline_ = Clock::now() +
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // Ends the call; true when its deadline passed.
  bool disarm() {
    std::lock_guard<std::mutex> l(mu_);
    armed_ = false;
    return fired_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kLook = std::chrono::milliseconds(100);
  static constexpr auto kGrace = std::chrono::seconds(5);

  Watchdog() : pid_(::getpid()) {
    std::thread([this] { run(); }).detach();
  }
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      const auto now = Clock::now();
      if (armed_ && now >= deadline_) {
        if (interrupted_ != call_) {
          interrupted_ = call_;
          interrupt(l, call_);
        } else if (now >= deadline_ + kGrace) {
          std::fprintf(stderr,
                       "%s: policy module %s: %s() did not return within its deadline, nor "
                       "when interrupted (it caught the interruption): the process ends\n",
                       program_name().c_str(), who_->label.c_str(), method_);
          std::fflush(stderr);
          ::_exit(2);
        }
      }
      auto until = now + kLook;
      if (armed_ && deadline_ > now && deadline_ < until) until = deadline_;
      cv_.wait_until(l, until);
    }
  }
  // Raises TimeoutError in the calling thread, holding the interpreter (the call gives it up
  // between bytecodes; a call that returned meanwhile is left alone).
  void interrupt(std::unique_lock<std::mutex>& l, std::uint64_t call) {
    l.unlock();
    const PyGILState_STATE g = PyGILState_Ensure();
    l.lock();
    if (armed_ && call_ == call) {
      fired_ = true;
      PyThreadState_SetAsyncExc(thread_, PyExc_TimeoutError);
      if (g_deadline_signal) ::pthread_kill(pthread_, SIGUSR2);
    }
    l.unlock();
    PyGILState_Release(g);
    l.lock();
  }

  const pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_;  // never notified: the thread's timed sleep
  std::uint64_t call_ = 0;
  std::uint64_t interrupted_ = 0;
  bool armed_ = false;
  bool fired_ = false;
  unsigned long thread_ = 0;
  pthread_t pthread_{};
  const Identity* who_ = nullptr;
  const char* method_ = "";
  Clock::time_point deadline_;
};

// ---------------------------------------------------------------- the view

void bind_view(py::class_<ViewRef>& c) {
  c.def("slots", [](const ViewRef& v) { return v.get().slots(); })
      .def("gpus", [](const ViewRef& v) { return v.get().gpus(); })
      .def("machine_count", [](const ViewRef& v) { return v.get().machine_count(); })
      .def("pp_groups", [](const ViewRef& v) { return v.get().pp_groups(); })
      .def("racks", [](const ViewRef& v) { return v.get().racks(); })
      .def("empty_slot_count", [](const ViewRef& v) { return v.get().empty_slot_count(); })
      .def("machines_by_slot", [](const ViewRef& v) { return v.get().machines_by_slot(); })
      .def("placed_machines", [](const ViewRef& v) { return v.get().placed_machines(); })
      .def("standby", [](const ViewRef& v) { return v.get().standby(); })
      .def_property_readonly("spec", [](const ViewRef& v) {
        const ClusterSpec& s = v.get().spec();
        py::dict d;
        d["machines"] = s.machines, d["gpus_per_machine"] = s.gpus_per_machine;
        d["rack_size"] = s.rack_size, d["tp"] = s.tp, d["pp"] = s.pp, d["dp"] = s.dp;
        d["standby_machines"] = s.standby_machines, d["micro_batches"] = s.micro_batches;
        d["nvlink_domain"] = s.nvlink_domain;
        return d;
      });
}

SlotId checked_slot(const ClusterView& v, long long s) {
  if (s < 0 || s >= v.slots())
    throw py::index_error("slot " + std::to_string(s) + " outside [0, " +
                          std::to_string(v.slots()) + ")");
  return static_cast<SlotId>(s);
}
MachineId checked_machine(const ClusterView& v, long long m) {
  if (m < 0 || m >= v.machine_count())
    throw py::index_error("machine " + std::to_string(m) + " outside [0, " +
                          std::to_string(v.machine_count()) + ")");
  return static_cast<MachineId>(m);
}
int checked_index(long long i, int n, const char* what) {
  if (i < 0 || i >= n)
    throw py::index_error(std::string(what) + " " + std::to_string(i) + " outside [0, " +
                          std::to_string(n) + ")");
  return static_cast<int>(i);
}

void bind_view_lookups(py::class_<ViewRef>& c) {
  c.def("pp_group_slots",
        [](const ViewRef& v, long long g) {
          return v.get().pp_group_slots(checked_index(g, v.get().pp_groups(), "pp group"));
        })
      .def("dp_group_slots",
           [](const ViewRef& v, long long stage) {
             return v.get().dp_group_slots(checked_index(stage, v.get().spec().pp, "stage"));
           })
      .def("rack_slots",
           [](const ViewRef& v, long long r) {
             return v.get().rack_slots(checked_index(r, v.get().racks(), "rack"));
           })
      .def("tp_group",
           [](const ViewRef& v, long long s) { return v.get().tp_group(checked_slot(v.get(), s)); })
      .def("pp_group",
           [](const ViewRef& v, long long s) { return v.get().pp_group(checked_slot(v.get(), s)); })
      .def("dp_group",
           [](const ViewRef& v, long long s) { return v.get().dp_group(checked_slot(v.get(), s)); })
      .def("pp_group_index",
           [](const ViewRef& v, long long s) {
             return v.get().pp_group_index(checked_slot(v.get(), s));
           })
      .def("rack_of_slot",
           [](const ViewRef& v, long long s) {
             return v.get().rack_of_slot(checked_slot(v.get(), s));
           })
      .def("machine_in", [](const ViewRef& v,
                            long long s) { return v.get().machine_in(checked_slot(v.get(), s)); })
      .def("slot_of", [](const ViewRef& v,
                         long long m) { return v.get().slot_of(checked_machine(v.get(), m)); })
      .def("health", [](const ViewRef& v, long long m) {
        switch (v.get().health(checked_machine(v.get(), m))) {
          case Health::kHealthy:
            return "healthy";
          case Health::kSuspect:
            return "suspect";
          case Health::kEvicted:
            return "evicted";
        }
        return "?";
      });
  c.def("machines_of_groups", [](const ViewRef& v, const std::vector<std::vector<SlotId>>& groups) {
    for (const auto& slots : groups)
      for (SlotId s : slots) checked_slot(v.get(), s);
    return policies::machines_of_groups(v.get(), groups);
  });
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string add_package_paths() {
  std::error_code ec;
  const fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
  py::list path = py::module_::import("sys").attr("path");
  const std::string versioned = "python3." + std::to_string(PY_MINOR_VERSION);
  for (const fs::path& p : {bin / ".." / "python", bin / ".." / "lib" / versioned / "dist-packages",
                            bin / ".." / "lib" / "python3" / "dist-packages"})
    if (fs::is_regular_file(p / "faultline" / "policy.py"))
      path.append(fs::weakly_canonical(p).string());
  try {
    py::module_::import("faultline.policy");
  } catch (py::error_already_set& e) {
    return std::string(
               "cannot import faultline.policy (the faultline Python package, beside the "
               "program or on PYTHONPATH): ") +
           e.what();
  }
  return "";
}

}  // namespace

std::string ensure_interpreter() {
  install_fork_hooks();
  if (Py_IsInitialized()) return "";
  try {
    py::initialize_interpreter(false, 0, nullptr, false);
    // Line-buffered: a module's prints are not lost in a forked replica's buffer.
    py::module_::import("sys").attr("stdout").attr("reconfigure")(py::arg("line_buffering") = true);
    const std::string err = add_package_paths();
    if (!err.empty()) return err;
    policy_module().attr("_embedded") = true;
    own_process();
  } catch (const std::exception& e) {
    return std::string("cannot start the Python interpreter: ") + e.what();
  }
  return "";
}

void own_process() {
  install_fork_hooks();
  py::gil_scoped_acquire gil;
  py::module_ threading = py::module_::import("threading");
  if (!threading.attr("current_thread")().is(threading.attr("main_thread")())) return;
  py::module_::import("signal").attr("signal")(SIGUSR2, policy_module().attr("_deadline_passed"));
  g_deadline_signal = true;
}

py::module_ policy_module() {
  py::module_ m = py::module_::import("faultline.policy");
  if (!py::hasattr(m, "ClusterView")) {
    py::class_<ViewRef> c(m, "ClusterView",
                          "The cluster as the stack sees it (valid during one call)");
    bind_view(c);
    bind_view_lookups(c);
  }
  return m;
}

const ClusterView& ViewRef::get() const {
  if (!view) throw py::value_error("a ClusterView is valid only during the call that got it");
  return *view;
}

ScopedView::ScopedView(const ClusterView& v) : obj_(py::cast(ViewRef{&v})) {}
ScopedView::~ScopedView() { obj_.cast<ViewRef&>().view = nullptr; }

namespace {
// After a call whose deadline passed: the interruptions the watchdog sent and the call did
// not take (it returned first) are dropped, so that they do not land in the next call.
void drop_interruptions() {
  PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), nullptr);
  if (g_deadline_signal && PyErr_CheckSignals() != 0) PyErr_Clear();
}
}  // namespace

py::object call(const Identity& who, const py::object& obj, const char* method,
                const py::tuple& args) {
  Watchdog& dog = Watchdog::get();
  dog.arm(who.deadline_s, PyThread_get_thread_ident(), &who, method);
  try {
    // "__init__": `obj` is the class, called to build the module.
    py::object r = std::string_view(method) == "__init__" ? obj(*args) : obj.attr(method)(*args);
    if (!dog.disarm()) return r;
    drop_interruptions();  // it caught the interruption and answered anyway: still late
    throw Failure{std::string(method) + "() did not return within its deadline_s (" +
                  seconds(who.deadline_s) + " s)"};
  } catch (py::error_already_set& e) {
    const bool late = dog.disarm();
    Failure f = failure_of(method, e);
    if (late) {
      e.restore();  // drop_interruptions() needs no exception set
      PyErr_Clear();
      drop_interruptions();
      f.what = std::string(method) + "() did not return within its deadline_s (" +
               seconds(who.deadline_s) + " s)";
    }
    throw f;
  }
}

Failure failure_of(const char* method, py::error_already_set& e) {
  std::string at;
  try {
    py::object tb = py::module_::import("traceback").attr("extract_tb")(e.trace());
    if (py::len(tb) > 0) {
      py::object last = tb[py::int_(-1)];
      at = " (" + fs::path(last.attr("filename").cast<std::string>()).filename().string() + ":" +
           std::to_string(last.attr("lineno").cast<int>()) + ")";
    }
  } catch (...) {
  }
  std::string msg = py::str(e.value());
  const std::string type = py::str(e.type().attr("__name__"));
  return {std::string(method) + "() raised " + type + (msg.empty() ? "" : ": " + msg) + at};
}

}  // namespace faultline::plugins::python
