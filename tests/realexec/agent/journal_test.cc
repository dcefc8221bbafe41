// The controller's journal on a disk that really fills (issue 15): a failed save keeps the
// previous journal whole, leaves no temporary file behind, is reported in health() and
// works again at the next save once there is room.
#include "realexec/journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace faultline::live {
namespace {

// A 64 KiB tmpfs filled by a filler file when running as root (and allowed to mount),
// else a file-size limit of a few bytes (RLIMIT_FSIZE, SIGXFSZ ignored).
class FullDiskJournal : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-journal-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    mounted_ = ::geteuid() == 0 && ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") == 0;
    if (!mounted_) {
      old_xfsz_ = std::signal(SIGXFSZ, SIG_IGN);
      ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit_), 0);
    }
  }
  void TearDown() override {
    free_space();
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    else std::signal(SIGXFSZ, old_xfsz_);
    std::filesystem::remove_all(dir_);
  }
  void fill() {
    if (mounted_) {
      const int fd = ::open((dir_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0);
      const std::string block(4096, 'x');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      ::close(fd);
    } else {
      rlimit l = old_limit_;
      l.rlim_cur = 8;
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &l), 0);
    }
  }
  void free_space() {
    if (mounted_) std::filesystem::remove(dir_ + "/filler");
    else ::setrlimit(RLIMIT_FSIZE, &old_limit_);
  }
  std::string slurp(const std::string& path) const {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::string dir_;
  bool mounted_ = false;
  rlimit old_limit_{};
  void (*old_xfsz_)(int) = SIG_DFL;
};

TEST_F(FullDiskJournal, AFailedSaveKeepsThePreviousJournalWholeAndTheNextSaveWorksOnceThereIsRoom) {
  const std::string path = dir_ + "/journal.json";
  Journal j(path);
  j.state().gen = 1;
  j.state().version = "v1";
  std::string err;
  ASSERT_TRUE(j.save(&err)) << err;
  const std::string first = slurp(path);
  EXPECT_FALSE(j.health().failing);

  fill();
  j.state().gen = 2;
  EXPECT_FALSE(j.save(&err));
  EXPECT_EQ(err, path + ".tmp: " + std::strerror(mounted_ ? ENOSPC : EFBIG));
  EXPECT_EQ(slurp(path), first) << "the previous journal stays, whole";
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "no partial temporary file is left to hold space";
  EXPECT_TRUE(j.health().failing);
  EXPECT_EQ(j.health().outages, 1u);
  EXPECT_EQ(j.health().pending, 1u);
  EXPECT_EQ(j.health().last_error, err);
  EXPECT_FALSE(j.retry());
  EXPECT_EQ(j.health().failed_writes, 2u);
  EXPECT_EQ(j.health().outages, 1u) << "one outage, however many saves fail in it";

  free_space();
  EXPECT_TRUE(j.retry());
  EXPECT_FALSE(j.health().failing);
  EXPECT_EQ(j.health().pending, 0u);
  Journal back(path);
  ASSERT_TRUE(back.load(&err)) << err;
  EXPECT_EQ(back.state().gen, 2);
}

}  // namespace
}  // namespace faultline::live
