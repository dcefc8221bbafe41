// The fault-control file of faultline-trainjob: parsing, targeting and one-shot consumption.

#include "realexec/trainjob/faults.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace faultline::live::trainjob {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TrainjobFaults, ParsesEveryDirective) {
  const auto p = parse_fault_text(
      "# comment\n"
      "\n"
      "crash RuntimeError: CUDA error: an illegal memory access was encountered\n"
      "local_rank=2 hang\n"
      "local_rank=all nan\n"
      "local_rank=1,3 slow 2.5\n"
      "  sdc after=3  \n"
      "sdc\n");
  ASSERT_TRUE(p.errors.empty()) << p.errors[0];
  ASSERT_EQ(p.directives.size(), 6u);
  const auto& crash = p.directives[0];
  EXPECT_EQ(crash.kind, FaultKind::kCrash);
  EXPECT_EQ(crash.signature, "RuntimeError: CUDA error: an illegal memory access was encountered");
  EXPECT_TRUE(crash.applies_to(0));
  EXPECT_FALSE(crash.applies_to(1));  // no prefix: local rank 0 only
  EXPECT_TRUE(crash.one_shot());
  EXPECT_EQ(p.directives[1].kind, FaultKind::kHang);
  EXPECT_TRUE(p.directives[1].applies_to(2));
  EXPECT_FALSE(p.directives[1].applies_to(0));
  EXPECT_EQ(p.directives[2].kind, FaultKind::kNan);
  EXPECT_TRUE(p.directives[2].applies_to(7));
  EXPECT_EQ(p.directives[3].kind, FaultKind::kSlow);
  EXPECT_DOUBLE_EQ(p.directives[3].factor, 2.5);
  EXPECT_TRUE(p.directives[3].applies_to(3));
  EXPECT_FALSE(p.directives[3].applies_to(2));
  EXPECT_FALSE(p.directives[3].one_shot());
  EXPECT_EQ(p.directives[4].kind, FaultKind::kSdc);
  EXPECT_EQ(p.directives[4].after_steps, 3);
  EXPECT_EQ(p.directives[4].line, "sdc after=3");
  EXPECT_EQ(p.directives[5].after_steps, 0);
}

TEST(TrainjobFaults, MalformedLinesAreReportedWithTheirNumber) {
  const auto p =
      parse_fault_text("explode\nslow\nslow -1\nsdc after=x\nhang now\nlocal_rank=a nan\nnan\n");
  EXPECT_EQ(p.directives.size(), 1u);
  ASSERT_EQ(p.errors.size(), 6u);
  EXPECT_NE(p.errors[0].find("line 1"), std::string::npos);
  EXPECT_NE(p.errors[0].find("explode"), std::string::npos);
  EXPECT_NE(p.errors[5].find("line 6"), std::string::npos);
}

TEST(TrainjobFaults, ConsumeRemovesOnlyTheFiredLine) {
  const std::string text = "slow 2\ncrash boom\nlocal_rank=1 crash boom\ncrash boom\n";
  const auto once = consume_in_text(text, "crash boom", 0, 0);
  ASSERT_TRUE(once);
  EXPECT_EQ(*once, "slow 2\nlocal_rank=1 crash boom\ncrash boom\n");
  const auto twice = consume_in_text(*once, "crash boom", 0, 0);
  ASSERT_TRUE(twice);
  EXPECT_EQ(*twice, "slow 2\nlocal_rank=1 crash boom\n");
  EXPECT_FALSE(consume_in_text(*twice, "crash boom", 0, 0));  // rank 1's is not ours
  EXPECT_EQ(*consume_in_text(*twice, "local_rank=1 crash boom", 1, 0), "slow 2\n");
}

TEST(TrainjobFaults, ConsumeForAllRemovesOnlyThisRank) {
  // With LOCAL_WORLD_SIZE known each rank fires once.
  auto t = consume_in_text("local_rank=all nan\n", "local_rank=all nan", 1, 3);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "local_rank=0,2 nan\n");
  t = consume_in_text(*t, "local_rank=0,2 nan", 2, 3);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "local_rank=0 nan\n");
  t = consume_in_text(*t, "local_rank=0 nan", 0, 3);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "");
  // Unknown local world size: the first rank consumes the whole line.
  t = consume_in_text("local_rank=all hang\n", "local_rank=all hang", 4, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "");
}

// The agent's id= prefix names the directive the job acknowledges (issue 52); a rewritten
// multi-rank line keeps it.
TEST(TrainjobFaults, TheAgentsIdPrefixNamesTheDirective) {
  const auto parsed =
      parse_fault_text("id=9f3a-01 local_rank=1,3 crash CUDA error\nid=a.b_c slow 2\nnan\n");
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors[0];
  ASSERT_EQ(parsed.directives.size(), 3u);
  EXPECT_EQ(parsed.directives[0].id, "9f3a-01");
  EXPECT_EQ(parsed.directives[0].signature, "CUDA error");
  EXPECT_EQ(parsed.directives[0].local_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(parsed.directives[1].id, "a.b_c");
  EXPECT_EQ(parsed.directives[2].id, "");
  EXPECT_STREQ(fault_kind_name(parsed.directives[1].kind), "slow");
  const auto bad =
      parse_fault_text("id= nan\nid=a/b nan\nid=x\nid=" + std::string(65, 'x') + " nan\n");
  EXPECT_EQ(bad.directives.size(), 0u);
  EXPECT_EQ(bad.errors.size(), 4u);
  const auto t = consume_in_text("id=f00 local_rank=all nan\n", "id=f00 local_rank=all nan", 1, 3);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "id=f00 local_rank=0,2 nan\n");
}

TEST(TrainjobFaults, FileConsumptionIsAtomicAndOneShot) {
  std::string tmpl = (fs::temp_directory_path() / "trainjob-faults-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  const std::string path = dir + "/faults";
  FaultFile absent(path, 0, 0);
  absent.poll();
  EXPECT_TRUE(absent.active().empty());

  std::ofstream(path) << "sdc after=2\ncrash Segmentation fault\nlocal_rank=1 slow 3\n";
  FaultFile rank0(path, 0, 2);
  FaultFile rank0_again(path, 0, 2);  // e.g. a restarted incarnation racing the first
  rank0.poll();
  rank0_again.poll();
  ASSERT_EQ(rank0.active().size(), 2u);
  EXPECT_EQ(rank0.sdc_after(), 2);
  EXPECT_FALSE(rank0.slow_factor());
  const FaultDirective crash = rank0.active()[1];
  ASSERT_EQ(crash.kind, FaultKind::kCrash);
  EXPECT_TRUE(rank0.consume(crash));
  EXPECT_FALSE(rank0_again.consume(crash));  // gone: must not fire twice
  EXPECT_EQ(slurp(path), "sdc after=2\nlocal_rank=1 slow 3\n");
  rank0.poll();
  ASSERT_EQ(rank0.active().size(), 1u);  // the persistent directive stays
  EXPECT_EQ(rank0.active()[0].kind, FaultKind::kSdc);

  FaultFile rank1(path, 1, 2);
  rank1.poll();
  EXPECT_EQ(rank1.slow_factor(), 3.0);
  EXPECT_FALSE(rank1.sdc_after());

  // Rewrites in place are noticed at the next poll.
  std::ofstream(path) << "sdc after=5\n";
  rank0.poll();
  EXPECT_EQ(rank0.sdc_after(), 5);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace faultline::live::trainjob
