#include "policies/api/rng.h"

#include <gtest/gtest.h>

namespace faultline {
namespace {

// Streams are part of every result: pinned values guard the byte-identical promise
// against a refactor of the seeding (these are today's draws, not a property of xoshiro).
TEST(Rng, StreamsArePinned) {
  Rng r({20250913ull, 7ull, 0xF9ull, 42ull, 3ull, 0ull});
  EXPECT_EQ(r.next_u64(), 4308941952506245001ull);
  r.next_u64();
  EXPECT_EQ(r.next_u64(), 16123038206911315986ull);
  EXPECT_EQ(Rng(1).next_u64(), 6608835021153555200ull);
}

// A prefix absorbed once gives the same stream as all keys at once, whatever the split.
TEST(Rng, PrefixGivesTheSameStreamAsAllKeys) {
  for (std::uint64_t m = 0; m < 200; ++m) {
    Rng whole({20250913ull, 7ull, 0xF9ull, m, 3ull, m * m});
    Rng split(Rng::prefix({20250913ull, 7ull, 0xF9ull}), {m, 3ull, m * m});
    Rng early(Rng::prefix({20250913ull}), {7ull, 0xF9ull, m, 3ull, m * m});
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t w = whole.next_u64();
      ASSERT_EQ(split.next_u64(), w) << "machine " << m << " draw " << i;
      ASSERT_EQ(early.next_u64(), w) << "machine " << m << " draw " << i;
    }
  }
  // And the prefix matters: a different leading key is a different stream.
  EXPECT_NE(Rng(Rng::prefix({1}), {2}).next_u64(), Rng(Rng::prefix({2}), {2}).next_u64());
}

}  // namespace
}  // namespace faultline
