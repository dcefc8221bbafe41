// fork + execve with redirections prepared in the parent, and the reactor-driven
// run-to-completion wrapper used for probes, gdb and `ip`.
#include "realexec/net/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace faultline::live {
namespace {

// What the child reports through the close-on-exec error pipe.
struct ChildFailure {
  int stage;  // 0 exec, 1 chdir, 2 redirect
  int err;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void append_tail(std::string* buf, const char* data, std::size_t n, std::size_t max) {
  buf->append(data, n);
  if (max > 0 && buf->size() > 2 * max) buf->erase(0, buf->size() - max);
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  // sbin directories last: `ip` lives there and a service's PATH may lack them.
  dirs += ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      if (is_executable(candidate)) return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::vector<std::string> make_env(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : overrides) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// The standard streams a spawned process gets: child fd -> parent fd to dup there, and
// the parent fds opened for it (closed once the child has them).
struct Redirections {
  std::map<int, int> plan;
  std::vector<int> opened;
  void cleanup() {
    for (int& fd : opened) close_fd(fd);
    opened.clear();
  }
  // Prepares child fd `target`; a pipe's read end goes to *read_end. False with *err set.
  bool add(int target, const Redirect& r, int* read_end, std::string* err) {
    auto fail = [&](const std::string& what) {
      if (err) *err = what;
      return false;
    };
    switch (r.kind) {
      case Redirect::Kind::kInherit:
        return true;
      case Redirect::Kind::kDevNull: {
        int fd = ::open("/dev/null", (target == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (fd < 0) return fail(std::string("cannot open /dev/null: ") + std::strerror(errno));
        opened.push_back(fd);
        plan[target] = fd;
        return true;
      }
      case Redirect::Kind::kFile: {
        int fd = ::open(r.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) return fail("cannot open " + r.path + ": " + std::strerror(errno));
        opened.push_back(fd);
        plan[target] = fd;
        return true;
      }
      case Redirect::Kind::kPipe: {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
        if (target == 0) {
          opened.push_back(p[0]);
          plan[target] = p[0];
          ::close(p[1]);  // stdin from a pipe nobody writes: EOF at once
          return true;
        }
        opened.push_back(p[1]);
        plan[target] = p[1];
        set_nonblocking(p[0]);
        *read_end = p[0];
        return true;
      }
    }
    return true;
  }
};

// The child's side of spawn, between fork and exec: only async-signal-safe calls. `plan`
// maps each child fd to the parent fd it becomes; on failure the stage and errno go up
// `status_fd` (close-on-exec: an exec that succeeds closes it) and the child exits 127.
[[noreturn]] void exec_child(const SpawnSpec& spec, const std::string& program,
                             const std::map<int, int>& plan, int max_target, char* const* argv,
                             char* const* envp, int status_fd, pid_t parent) {
  // Child: only async-signal-safe calls from here on.
  auto die = [&](int stage) {
    ChildFailure f{stage, errno};
    ssize_t w = ::write(status_fd, &f, sizeof f);
    (void)w;
    ::_exit(127);
  };
  if (spec.die_with_agent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
  }
  if (spec.new_process_group) ::setpgid(0, 0);
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Move every source above the targets first so no dup2 clobbers a later source.
  int tmp[64];
  int n = 0;
  int targets[64];
  for (const auto& [child_fd, parent_fd] : plan) {
    if (n == 64) break;
    int t = ::fcntl(parent_fd, F_DUPFD_CLOEXEC, max_target + 1);
    if (t < 0) die(2);
    tmp[n] = t;
    targets[n] = child_fd;
    ++n;
  }
  for (int i = 0; i < n; ++i) {
    if (::dup2(tmp[i], targets[i]) < 0) die(2);
  }
  // Descriptors the agent inherited without close-on-exec stay out of the child.
  ::close_range(static_cast<unsigned>(max_target) + 1, ~0U, CLOSE_RANGE_CLOEXEC);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) die(1);
  ::execve(program.c_str(), argv, envp);
  die(0);
  ::_exit(127);  // not reached: die() exits
}

bool spawn(const SpawnSpec& spec, Spawned* out, std::string* err) {
  auto fail = [&](const std::string& what) {
    if (err) *err = what;
    return false;
  };
  if (spec.argv.empty()) return fail("cannot execute: empty argv");
  const std::string program = find_program(spec.argv[0]);
  if (program.empty()) {
    return fail("cannot execute " + spec.argv[0] + ": not found or not executable");
  }

  Redirections red;
  int unused = -1;
  int out_read = -1;
  int err_read = -1;
  if (!red.add(0, spec.stdin_from, &unused, err) || !red.add(1, spec.stdout_to, &out_read, err) ||
      !red.add(2, spec.stderr_to, &err_read, err)) {
    red.cleanup();
    close_fd(out_read);
    close_fd(err_read);
    return false;
  }
  std::map<int, int>& plan = red.plan;
  for (const auto& [child_fd, parent_fd] : spec.extra_fds) plan[child_fd] = parent_fd;

  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int max_target = 2;
  for (const auto& [child_fd, parent_fd] : plan) max_target = std::max(max_target, child_fd);

  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    red.cleanup();
    close_fd(out_read);
    close_fd(err_read);
    return fail(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    red.cleanup();
    close_fd(out_read);
    close_fd(err_read);
    ::close(status_pipe[0]);
    ::close(status_pipe[1]);
    return fail(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    exec_child(spec, program, red.plan, max_target, argv.data(), envp.data(), status_pipe[1],
               parent);
  }
  // Parent.
  ::close(status_pipe[1]);
  red.cleanup();
  ChildFailure f{};
  ssize_t got;
  do {
    got = ::read(status_pipe[0], &f, sizeof f);
  } while (got < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof f)) {
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    close_fd(out_read);
    close_fd(err_read);
    const char* stage = f.stage == 0 ? "" : f.stage == 1 ? " (chdir)" : " (redirect)";
    std::string what = "cannot execute " + spec.argv[0] + stage + ": " + std::strerror(f.err);
    if (f.stage == 1)
      what = "cannot execute " + spec.argv[0] + ": chdir " + spec.cwd + ": " + std::strerror(f.err);
    return fail(what);
  }
  if (spec.new_process_group) ::setpgid(pid, pid);  // no race with a signal sent right away
  out->pid = pid;
  out->stdout_fd = out_read;
  out->stderr_fd = err_read;
  return true;
}

void signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return;
  ::kill(-pgid, SIGCONT);
  ::kill(-pgid, sig);
}

std::string signal_name(int signo) {
  switch (signo) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGCHLD:
      return "SIGCHLD";
    case SIGCONT:
      return "SIGCONT";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "SIG" + std::to_string(signo);
  }
}

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return "exit code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    int s = WTERMSIG(st);
    return "killed by signal " + std::to_string(s) + " (" + signal_name(s) + ")";
  }
  return "wait status " + std::to_string(st);
}

int ChildResult::exit_code() const {
  if (!started || !WIFEXITED(wait_status)) return -1;
  return WEXITSTATUS(wait_status);
}

std::shared_ptr<ChildRun> run_child(Reactor& r, SpawnSpec spec, Duration deadline,
                                    std::function<void(const ChildResult&)> done,
                                    std::size_t max_output) {
  std::shared_ptr<ChildRun> run(new ChildRun(r));
  run->done_ = std::move(done);
  run->max_output_ = max_output;
  run->started_ = r.now();
  if (spec.stdout_to.kind == Redirect::Kind::kInherit) spec.stdout_to = Redirect::pipe();
  if (spec.stderr_to.kind == Redirect::Kind::kInherit) spec.stderr_to = Redirect::pipe();
  Spawned sp;
  std::string err;
  if (!spawn(spec, &sp, &err)) {
    run->result_.started = false;
    run->result_.spawn_error = err;
    r.defer([run] {
      if (run->done_) run->done_(run->result_);
      run->done_ = nullptr;
    });
    return run;
  }
  run->self_ = run;
  run->result_.started = true;
  run->pid_ = sp.pid;
  run->out_fd_ = sp.stdout_fd;
  run->err_fd_ = sp.stderr_fd;
  ChildRun* raw = run.get();
  if (raw->out_fd_ >= 0) {
    r.add_fd(raw->out_fd_, EPOLLIN,
             [raw](std::uint32_t) { raw->on_pipe(&raw->out_fd_, &raw->result_.out); });
  }
  if (raw->err_fd_ >= 0) {
    r.add_fd(raw->err_fd_, EPOLLIN,
             [raw](std::uint32_t) { raw->on_pipe(&raw->err_fd_, &raw->result_.err); });
  }
  const bool group = spec.new_process_group;
  if (!deadline.is_infinite()) {
    raw->deadline_timer_ = r.add_timer(deadline, [raw, group] {
      raw->deadline_timer_ = 0;
      raw->result_.timed_out = true;
      if (group) {
        signal_group(raw->pid_, SIGKILL);
      } else {
        ::kill(raw->pid_, SIGKILL);
      }
    });
  }
  r.watch_child(sp.pid, [raw](int status) {
    raw->result_.wait_status = status;
    raw->drain_and_finish();
  });
  return run;
}

void ChildRun::cancel() {
  if (pid_ > 0 && self_) signal_group(pid_, SIGKILL);
}

void ChildRun::on_pipe(int* fd, std::string* buf) {
  char chunk[16384];
  while (*fd >= 0) {
    ssize_t n = ::read(*fd, chunk, sizeof chunk);
    if (n > 0) {
      append_tail(buf, chunk, static_cast<std::size_t>(n), max_output_);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    r_.remove_fd(*fd);  // EOF or error
    close_fd(*fd);
  }
}

void ChildRun::drain_and_finish() {
  if (deadline_timer_ != 0) r_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  // The child is gone; whatever it wrote is in the pipes. A grandchild still holding
  // them open must not delay the result, so read what is there and stop.
  for (int* fd : {&out_fd_, &err_fd_}) {
    std::string* buf = fd == &out_fd_ ? &result_.out : &result_.err;
    on_pipe(fd, buf);
    if (*fd >= 0) {
      r_.remove_fd(*fd);
      close_fd(*fd);
    }
  }
  if (max_output_ > 0) {
    for (std::string* b : {&result_.out, &result_.err}) {
      if (b->size() > max_output_) b->erase(0, b->size() - max_output_);
    }
  }
  result_.elapsed = r_.now() - started_;
  auto keep = self_;  // done_ may drop the caller's handle
  self_.reset();
  pid_ = -1;
  if (done_) {
    auto cb = std::move(done_);
    done_ = nullptr;
    cb(result_);
  }
}

}  // namespace faultline::live
