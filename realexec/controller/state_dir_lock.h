// StateDirLock: one controller per state directory, for its whole life. A second one (a
// `--fresh` typed into the wrong terminal, a unit started twice) would otherwise delete or
// interleave the journal and the event log under the running one. flock is released by the
// kernel when the holder dies, however it dies, so a crashed controller never leaves it stale.
// The lock is on the directory itself: a lock file can be deleted and made anew (a second lock
// on a new inode then succeeds), the directory cannot while the state is in it.
// STATE_DIR/controller.lock only names the holder's pid.
#pragma once

#include <string>

namespace faultline::live {

class StateDirLock {
 public:
  StateDirLock() = default;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  ~StateDirLock() { release(); }

  // Takes the lock of `state_dir` or throws std::runtime_error (one line) naming the
  // controller that holds it (`fresh`: the run was asked to start afresh, which deletes
  // nothing while another runs).
  void take(const std::string& state_dir, bool fresh);
  // Releases the lock (nothing when none is held).
  void release();
  bool held() const { return dir_fd_ >= 0; }

 private:
  int dir_fd_ = -1;  // flock of the state directory itself
  int pid_fd_ = -1;  // STATE_DIR/controller.lock: the holder's pid
};

}  // namespace faultline::live
