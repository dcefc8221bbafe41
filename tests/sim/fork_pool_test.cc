// The fork pool: every item's bytes come back once, whatever the parallelism; a failing
// child ends the pool with an error naming its item; ticks from children are counted.
#include "sim/fork_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

namespace faultline::sim {
namespace {

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST(ForkPool, EveryItemComesBackOnceAtAnyParallelism) {
  for (int jobs : {1, 3, 16}) {
    std::map<std::size_t, std::string> got;
    long long ticks = 0;
    ForkPoolOptions opt{jobs, [&](long long t) { ticks = t; }};
    fork_pool(
        10, opt,
        [](std::size_t i, const std::function<void()>& tick) {
          for (std::size_t k = 0; k <= i; ++k) tick();
          // Large enough to need several reads from the pipe.
          return bytes_of(std::string(100000 + i, static_cast<char>('a' + i)));
        },
        [&](std::size_t i, std::vector<std::uint8_t> b) {
          EXPECT_TRUE(got.emplace(i, std::string(b.begin(), b.end())).second) << "item " << i << " twice";
        },
        [](std::size_t i) { return "item " + std::to_string(i); });
    ASSERT_EQ(got.size(), 10u) << jobs;
    for (const auto& [i, s] : got) EXPECT_EQ(s, std::string(100000 + i, static_cast<char>('a' + i)));
    EXPECT_EQ(ticks, 55) << "1 + 2 + ... + 10 ticks";
  }
}

TEST(ForkPool, AFailingChildEndsThePoolNamingItsItem) {
  try {
    fork_pool(
        6, ForkPoolOptions{2, nullptr},
        [](std::size_t i, const std::function<void()>&) -> std::vector<std::uint8_t> {
          if (i == 4) throw std::runtime_error("boom");
          return {};
        },
        [](std::size_t, std::vector<std::uint8_t>) {}, [](std::size_t i) { return "replica " + std::to_string(i); });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "replica 4: process failed (status 1024)");
  }
  EXPECT_THROW(fork_pool(
                   1, ForkPoolOptions{1, nullptr},
                   [](std::size_t, const std::function<void()>&) -> std::vector<std::uint8_t> { ::abort(); },
                   [](std::size_t, std::vector<std::uint8_t>) {}, [](std::size_t) { return "x"; }),
               std::runtime_error);
}

}  // namespace
}  // namespace faultline::sim
