// Unit tests of the transfer memo (sim/network.h).
#include "sim/network.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>

namespace faultline {
namespace {

// The memo's open-addressing table against std::map: every key found with its first
// duration, through growth, with keys whose h1 agree in their low bits (one probe chain)
// and keys that differ only in h2; an empty batch's key is never kept.
TEST(DurationMemo, FindsEveryKeyAsAMapDoesThroughGrowthAndCollisions) {
  sim::DurationMemo memo;
  std::map<sim::BatchKey, std::int64_t> want;
  std::uint64_t x = 99;
  auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < 20000; ++i) {
    sim::BatchKey k{1 + next() % 5, next(), next()};
    if (i % 4 == 1) k.h1 = static_cast<std::uint64_t>(i) << 32;  // same low bits: one chain
    if (i % 4 == 2)
      k = {k.n, static_cast<std::uint64_t>(i - 1) << 32, k.h2};  // the previous one's h1
    const std::int64_t d = static_cast<std::int64_t>(next() % 1000000);
    memo.insert(k, d);
    want.emplace(k, d);
    if (i % 97 == 0) memo.insert(k, d + 1);  // a second insert keeps the first
  }
  ASSERT_EQ(memo.size(), want.size());
  for (const auto& [k, d] : want) {
    const std::int64_t* got = memo.find(k);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(*got, d);
    const sim::BatchKey other{k.n, k.h1, k.h2 ^ 1};
    EXPECT_EQ(memo.find(other) != nullptr, want.count(other) > 0);
  }
  memo.insert({0, 5, 5}, 7);
  EXPECT_EQ(memo.find({0, 5, 5}), nullptr);
  EXPECT_EQ(memo.size(), want.size());
}

}  // namespace
}  // namespace faultline
