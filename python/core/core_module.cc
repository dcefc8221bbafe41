// faultline._core: the simulator as a Python extension module (the faultline package's
// sim.py and policy.py call it; docs/python.md).
//
// command() runs a `faultline` command line in a forked child of this process: the
// simulator builds a SimGrid engine per process and replica 0 runs in the process that
// starts a run, so each command gets a process of its own, with the Python modules
// registered here (the child inherits them) and this process's interpreter. The child's
// stdout and stderr are captured; the command's exit code comes back with them.
#include <fcntl.h>
#include <poll.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/pareto.h"
#include "analysis/tune.h"
#include "cli/commands.h"
#include "cli/flag_table.h"
#include "cli/progress_bar.h"
#include "plugins/loader.h"
#include "plugins/python_host.h"
#include "plugins/python_modules.h"

namespace py = pybind11;

namespace {

// The commands a Python process may run: those that neither replace the process (live,
// agent, probe exec their programs) nor need programs beside this one (report, sweep --mpi).
bool allowed(const std::vector<std::string>& args, std::string* why) {
  static const std::set<std::string> ok = {"sim", "policies", "version", "analyze", "trace"};
  if (args.empty() || !ok.count(args[0])) {
    *why = "faultline " + (args.empty() ? std::string() : args[0]) +
           ": not available from Python (run the faultline program); available: sim, policies, "
           "version, analyze, trace";
    return false;
  }
  bool mpi = false;
  std::vector<std::string> rest = args;
  faultline::cli::FlagTable("faultline sim sweep", "faultline sim sweep ... --mpi")
      .toggle("--mpi", "run under mpirun", &mpi)
      .extract(&rest);
  if (mpi)
    *why = "faultline sim sweep --mpi: not available from Python (run the faultline program)";
  return !mpi;
}

std::string read_all(int fd) {
  std::string out;
  ::lseek(fd, 0, SEEK_SET);
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// The child: stdout and stderr into the memory files, the command, its exit code. `sink`:
// the write end of the progress pipe (-1: none).
[[noreturn]] void run_child(const std::vector<std::string>& args, int out, int err, int sink) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(out, 1);
  ::dup2(err, 2);
  faultline::cli::progress_sink_fd() = sink;
  int rc = 1;
  try {
    faultline::plugins::python::own_process();
    rc = faultline::cli::dispatch(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: %s\n", e.what());
  }
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(rc);
}

// The progress pipe's complete lines "DONE TOTAL POINTS_DONE POINTS_TOTAL" read so far,
// each handed to `progress` (with the interpreter held); a partial line waits in `buf`.
void drain_progress(
    int fd, std::string& buf,
    const std::function<void(long long, long long, long long, long long)>& progress) {
  char chunk[4096];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof chunk)) > 0) buf.append(chunk, static_cast<std::size_t>(n));
  std::size_t nl;
  while ((nl = buf.find('\n')) != std::string::npos) {
    long long d = 0, t = 0, pd = 0, pt = 0;
    if (std::sscanf(buf.substr(0, nl).c_str(), "%lld %lld %lld %lld", &d, &t, &pd, &pt) == 4)
      progress(d, t, pd, pt);
    buf.erase(0, nl + 1);
  }
}

// Waits for the child without holding the interpreter; Ctrl-C (a pending KeyboardInterrupt)
// kills it and raises. With a progress pipe (`fd` >= 0), wakes for its lines and hands them to
// `progress` meanwhile; an exception `progress` raises kills the child too.
int wait_child(
    pid_t pid, int fd = -1,
    const std::function<void(long long, long long, long long, long long)>& progress = {}) {
  int status = 0;
  std::string buf;
  for (;;) {
    pid_t r;
    {
      py::gil_scoped_release release;
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        (void)::poll(&p, 1, 200);
        r = ::waitpid(pid, &status, WNOHANG);
      } else {
        r = ::waitpid(pid, &status, 0);
      }
    }
    if (fd >= 0) {
      try {
        drain_progress(fd, buf, progress);
      } catch (...) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        throw;
      }
    }
    if (r == pid) break;
    if (r < 0 && errno != EINTR)
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (PyErr_CheckSignals() != 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw py::error_already_set();
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::tuple<int, std::string, std::string> command(
    const std::vector<std::string>& args,
    const std::function<void(long long, long long, long long, long long)>& progress) {
  std::string why;
  if (!allowed(args, &why)) return {2, "", "faultline: " + why + "\n"};
  const int out = ::memfd_create("faultline-stdout", MFD_CLOEXEC);
  const int err = ::memfd_create("faultline-stderr", MFD_CLOEXEC);
  if (out < 0 || err < 0)
    throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  int pipe_fds[2] = {-1, -1};
  if (progress && ::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    run_child(args, out, err, pipe_fds[1]);
  }
  if (pipe_fds[1] >= 0) {
    ::close(pipe_fds[1]);
    ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  }
  int rc;
  try {
    rc = wait_child(pid, pipe_fds[0], progress);
  } catch (...) {
    ::close(out), ::close(err);
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    throw;
  }
  if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
  std::tuple<int, std::string, std::string> result{rc, read_all(out), read_all(err)};
  ::close(out), ::close(err);
  return result;
}

// Candidates as analysis::Evaluated: per_replica[c][k] is objective k's value on every
// replica for candidate c (x: the candidate's index, so the caller's order breaks ties).
std::vector<faultline::analysis::Evaluated> evaluated(
    const std::vector<std::vector<std::vector<double>>>& per_replica) {
  std::vector<faultline::analysis::Evaluated> cs;
  for (std::size_t c = 0; c < per_replica.size(); ++c) {
    faultline::analysis::Evaluated e;
    e.x = {static_cast<double>(c)};
    e.per_replica = per_replica[c];
    cs.push_back(std::move(e));
  }
  return cs;
}

// The objectives of `sim tune` as analysis::Objective, checked against the candidates.
std::vector<faultline::analysis::Objective> objectives(
    const std::vector<std::vector<std::vector<double>>>& per_replica,
    const std::vector<bool>& maximize) {
  std::vector<faultline::analysis::Objective> objs;
  for (bool m : maximize) objs.push_back({"", m});
  for (const auto& c : per_replica) {
    if (c.size() != objs.size())
      throw py::value_error("pareto_front: every candidate needs one list per objective");
    for (const auto& xs : c)
      if (xs.size() != per_replica[0][0].size())
        throw py::value_error("pareto_front: every list needs one value per replica");
  }
  return objs;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "faultline's simulator in this process (faultline.simulate, faultline.register)";
  // Python stays consistent across the forks below (PyOS_BeforeFork and after).
  faultline::plugins::python::ensure_interpreter();
  m.def("command", &command, py::arg("args"), py::arg("progress") = py::none(),
        "Runs `faultline ARGS` in a forked child; returns (exit code, stdout, stderr). "
        "progress(done, total, points_done, points_total), if given, is called as the "
        "command's progress bar moves (replicas, and a sweep's points)");
  // The Pareto arithmetic of `sim tune` (analysis/pareto.h), for faultline.tune.
  m.def(
      "pareto_front",
      [](const std::vector<std::vector<std::vector<double>>>& per_replica,
         const std::vector<bool>& maximize) {
        const auto objs = objectives(per_replica, maximize);
        return faultline::analysis::pareto_front(evaluated(per_replica), objs);
      },
      py::arg("per_replica"), py::arg("maximize"),
      "The Pareto front of candidates (per_replica[c][k]: objective k on every replica), best "
      "first by the first objective, as sim tune computes it; of candidates with equal means "
      "the first in the given order");
  m.def(
      "indistinguishable",
      [](const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
        if (a.size() != b.size())
          throw py::value_error("indistinguishable: as many objectives in both");
        for (std::size_t k = 0; k < a.size(); ++k)
          if (a[k].size() != b[k].size())
            throw py::value_error("indistinguishable: as many replicas in both");
        faultline::analysis::Evaluated ea, eb;
        ea.per_replica = a;
        eb.per_replica = b;
        return faultline::analysis::indistinguishable(ea, eb);
      },
      py::arg("a"), py::arg("b"),
      "Whether the paired differences a - b (a[k]: objective k on every replica) have a 95% "
      "CI holding 0 on every objective, as sim tune's indistinguishable_from");
  m.def(
      "mean_ci95",
      [](const std::vector<double>& xs) {
        const auto m = faultline::analysis::mean_ci95(xs);
        return std::tuple<double, double, double>(m.mean, m.lo, m.hi);
      },
      py::arg("xs"), "(mean, lo, hi): the mean and its 95% CI (Student's t), as sim tune's");
  m.def(
      "load_plugin",
      [](const std::string& path) -> std::optional<std::string> {
        return faultline::plugins::load_plugin(path);
      },
      py::arg("path"), "Loads a plugin (FILE.py, or a shared object); returns the refusal or None");
  m.def(
      "register_module",
      [](py::handle cls, const std::string& where) -> std::optional<std::string> {
        return faultline::plugins::python::register_class(cls.ptr(), where, nullptr);
      },
      py::arg("cls"), py::arg("where") = "faultline.register",
      "Registers a policy-module class; returns the refusal or None");
}
