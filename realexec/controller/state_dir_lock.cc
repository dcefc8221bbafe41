#include "realexec/controller/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace faultline::live {

namespace {

// The pid STATE_DIR/controller.lock names (empty when it names none).
std::string holder_pid(const std::string& path) {
  std::string holder;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) holder.assign(buf, static_cast<std::size_t>(n));
    ::close(fd);
  }
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  if (holder.find_first_not_of("0123456789") != std::string::npos) holder.clear();
  return holder;
}

}  // namespace

void StateDirLock::take(const std::string& state_dir, bool fresh) {
  const std::string path = state_dir + "/controller.lock";
  dir_fd_ = ::open(state_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0)
    throw std::runtime_error(state_dir +
                             ": cannot open the state directory: " + std::strerror(errno));
  if (::flock(dir_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(dir_fd_);
    dir_fd_ = -1;
    if (e != EWOULDBLOCK)
      throw std::runtime_error(state_dir +
                               ": cannot lock the state directory: " + std::strerror(e));
    const std::string holder = holder_pid(path);
    throw std::runtime_error(
        state_dir + ": in use by the controller with pid " +
        (holder.empty() ? std::string("(unknown)") : holder) + " (" + path + ")" +
        (fresh ? "; --fresh deletes nothing while it runs: stop it first" : "; stop it first"));
  }
  pid_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (pid_fd_ < 0 || ::ftruncate(pid_fd_, 0) != 0 ||
      ::pwrite(pid_fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid beside it; a second controller then names no pid.
  }
}

void StateDirLock::release() {
  if (pid_fd_ >= 0) ::close(pid_fd_);
  pid_fd_ = -1;
  if (dir_fd_ >= 0) ::close(dir_fd_);  // releases the state directory
  dir_fd_ = -1;
}

}  // namespace faultline::live
