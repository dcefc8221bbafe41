// The agent's boundary with its host: everything the agent does to processes (start a rank,
// watch it exit, signal it, run a probe or replay to completion) and its dial to the
// controller go through one of these. The default is the real thing (proc.h, the reactor's
// pidfd watch, connect_tcp); the virtual fleet (realexec/fleet/fleet.cc) puts in a fake that runs
// no process at all and can cut a rack off the network, so that thousands of unchanged
// agents fit in one process.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>

#include "realexec/net/proc.h"
#include "realexec/net/reactor.h"
#include "realexec/net/wire.h"

namespace faultline::live {

class AgentHost {
 public:
  virtual ~AgentHost() = default;
  // A training rank, as spawn() in proc.h: the rank's report socket is spec.extra_fds[3].
  virtual bool spawn_rank(const SpawnSpec& spec, Spawned* out, std::string* err) {
    return spawn(spec, out, err);
  }
  // Calls `on_exit(wait_status)` once when the rank `pid` exits.
  virtual void watch_rank(Reactor& r, pid_t pid, std::function<void(int)> on_exit) {
    r.watch_child(pid, std::move(on_exit));
  }
  // SIGCONT then `sig` to the group (proc.h's signal_group).
  virtual void signal_group(pid_t pgid, int sig) { live::signal_group(pgid, sig); }
  // `sig` alone to the group (an injected kill or stop).
  virtual void kill_group(pid_t pgid, int sig) { ::kill(-pgid, sig); }
  // A child run to completion (probes, replays, stack capture, `ip`), as run_child().
  // May return null when there is nothing to cancel.
  virtual std::shared_ptr<ChildRun> run(Reactor& r, SpawnSpec spec, Duration deadline,
                                        std::function<void(const ChildResult&)> done) {
    return run_child(r, std::move(spec), deadline, std::move(done));
  }
  // Where a rank writes its Python stacks when signalled (FAULTLINE_STACK_FD, stack_capture.h's
  // capture_python_stack): a new memfd in append mode, owned by the caller, so that no path
  // of the job's can be swapped under the agent; -1 when there is none (the rank's stacks are
  // then read with gdb). The virtual fleet's ranks, which run no code, get none.
  virtual int stack_dump_fd(const std::string& name) {
    const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
    // Append: after the agent empties it, the rank's next dump starts at offset 0.
    if (fd >= 0 && ::fcntl(fd, F_SETFL, O_APPEND) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  // A connection to the controller, as connect_tcp() in wire.h.
  virtual int dial(const std::string& host, int port, std::string* err) {
    return connect_tcp(host, port, err);
  }
  // Each request the controller sends, by type, before the agent acts on it.
  virtual void on_request(const std::string& type) {}
};

}  // namespace faultline::live
