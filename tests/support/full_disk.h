#pragma once

// A directory whose disk can be filled and freed on demand, for tests of what a writer does
// when the disk is full: a 64 KiB tmpfs filled by a filler file when running as root (and
// allowed to mount), else a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) so writes past
// a few bytes fail with EFBIG as they would with ENOSPC.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace faultline::testing {

class FullDiskDir {
 public:
  // Creates the directory /tmp/PREFIX-XXXXXX (and mounts it, when allowed).
  explicit FullDiskDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl;
      return;
    }
    dir_ = tmpl;
    mounted_ = ::geteuid() == 0 && ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") == 0;
    if (!mounted_) {
      old_xfsz_ = std::signal(SIGXFSZ, SIG_IGN);
      EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit_), 0);
    }
  }
  ~FullDiskDir() {
    free_space();
    if (mounted_)
      ::umount2(dir_.c_str(), MNT_DETACH);
    else
      std::signal(SIGXFSZ, old_xfsz_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  FullDiskDir(const FullDiskDir&) = delete;
  FullDiskDir& operator=(const FullDiskDir&) = delete;

  const std::string& path() const { return dir_; }
  bool mounted() const { return mounted_; }

  // Fills the disk: the tmpfs to its last page, and with `to_the_byte` to its last byte
  // (smaller writes after the pages); or, without the mount, limits files to
  // `max_file_bytes`.
  void fill(std::uintmax_t max_file_bytes, bool to_the_byte) {
    if (mounted_) {
      const int fd =
          ::open((dir_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0);
      const std::string block(4096, 'x');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      if (to_the_byte)
        for (std::size_t n = 512; n > 0; n /= 2)
          while (::write(fd, block.data(), n) > 0) {
          }
      ::close(fd);
    } else {
      rlimit l = old_limit_;
      l.rlim_cur = static_cast<rlim_t>(max_file_bytes);
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &l), 0);
    }
  }
  void free_space() {
    if (mounted_)
      std::filesystem::remove(dir_ + "/filler");
    else
      ::setrlimit(RLIMIT_FSIZE, &old_limit_);
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  rlimit old_limit_{};
  void (*old_xfsz_)(int) = SIG_DFL;
};

}  // namespace faultline::testing
