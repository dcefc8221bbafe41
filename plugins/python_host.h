// The interpreter side of Python policy modules (python_modules.h), for python_modules.cc:
// starting the embedded interpreter, calling a module's method under its deadline, the
// one-line failure, and the ClusterView a module is handed.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "policies/api/cluster_view.h"

// Hidden, as pybind11's own types are: nothing here is for plugins.
#pragma GCC visibility push(hidden)
namespace faultline::plugins::python {

namespace py = pybind11;

// Starts the embedded interpreter unless this process has one (then nothing), with the
// faultline package found beside the program (<bin>/../python, <bin>/../lib/python3/
// dist-packages) and module forks kept consistent (PyOS_BeforeFork and after, around every
// fork of a thread that holds the interpreter). Returns "" or why it could not.
std::string ensure_interpreter();

// This process is faultline's own (the embedded interpreter's, or a child the extension
// module forked): a call blocked in a system call is woken at its deadline (SIGUSR2 raises
// TimeoutError in the main thread). Requires the interpreter.
void own_process();

// faultline.policy, imported (and its ClusterView type bound, once per process).
py::module_ policy_module();

// A module's failure: the one line (without the module's name) of what went wrong.
struct Failure {
  std::string what;  // "answer() raised ValueError: ... (file.py:12)"
};

// Which module a call is for, in messages: "localization/my-localizer (my.py)".
struct Identity {
  std::string label;
  double deadline_s = 10;
};

// Calls `method` on `obj` with `args` under the deadline. Returns the answer, or throws
// Failure (an exception in the module, the deadline passed: the watchdog thread raised
// TimeoutError in it).
py::object call(const Identity& who, const py::object& obj, const char* method,
                const py::tuple& args);
// A failure of `method`, described from the Python exception being handled.
Failure failure_of(const char* method, py::error_already_set& e);

// The stack's ClusterView as the module sees it, valid during one call: its methods raise
// once the call returned (Scoped resets it).
struct ViewRef {
  const ClusterView* view = nullptr;
  const ClusterView& get() const;
};
class ScopedView {
 public:
  explicit ScopedView(const ClusterView& v);
  ~ScopedView();
  ScopedView(const ScopedView&) = delete;
  ScopedView& operator=(const ScopedView&) = delete;
  const py::object& object() const { return obj_; }

 private:
  py::object obj_;
};

}  // namespace faultline::plugins::python
#pragma GCC visibility pop
