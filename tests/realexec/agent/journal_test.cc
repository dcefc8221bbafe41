// The controller's journal on a disk that really fills (issue 15): a failed save keeps the
// previous journal whole, leaves no temporary file behind, is reported in health() and
// works again at the next save once there is room.
#include "realexec/journal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/full_disk.h"

namespace faultline::live {
namespace {

// The journal's directory on a disk the test fills (tests/support/full_disk.h).
class FullDiskJournal : public ::testing::Test {
 protected:
  void fill() { disk_.fill(8, false); }
  void free_space() { disk_.free_space(); }
  std::string slurp(const std::string& path) const {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  faultline::testing::FullDiskDir disk_{"faultline-journal"};
  const std::string dir_ = disk_.path();
  const bool mounted_ = disk_.mounted();
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
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"))
      << "no partial temporary file is left to hold space";
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
