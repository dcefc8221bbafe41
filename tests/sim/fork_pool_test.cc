// The fork pool: every item's bytes come back once, whatever the parallelism; reused
// children stop at a change of state; a failing child ends the pool with an error naming
// its item; ticks from children are counted.
#include "sim/fork_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

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
    ForkPoolOptions opt{jobs, [&](long long t) { ticks = t; }, {}};
    fork_pool(
        10, opt,
        [](std::size_t i, const std::function<void()>& tick) {
          for (std::size_t k = 0; k <= i; ++k) tick();
          // Large enough to need several reads from the pipe.
          return bytes_of(std::string(100000 + i, static_cast<char>('a' + i)));
        },
        [&](std::size_t i, std::vector<std::uint8_t> b) {
          EXPECT_TRUE(got.emplace(i, std::string(b.begin(), b.end())).second)
              << "item " << i << " twice";
        },
        [](std::size_t i) { return "item " + std::to_string(i); });
    ASSERT_EQ(got.size(), 10u) << jobs;
    for (const auto& [i, s] : got)
      EXPECT_EQ(s, std::string(100000 + i, static_cast<char>('a' + i)));
    EXPECT_EQ(ticks, 55) << "1 + 2 + ... + 10 ticks";
  }
}

// Reused children: a child takes item after item while it says its state is unchanged;
// one that says otherwise ends, and a fresh fork (of the parent, so its state is the
// parent's again) takes the remaining items. Every item still comes back once.
TEST(ForkPool, ReusedChildrenRunItemsUntilTheirStateChanges) {
  for (int jobs : {1, 2, 5}) {
    std::map<std::size_t, std::string> got;
    int items_here = 0;  // in a child: items this process ran (0 in every fresh fork)
    bool dirty = false;  // in a child: it ran item 7 or 13
    ForkPoolOptions opt{jobs, nullptr, [&] { return !dirty; }};
    fork_pool(
        20, opt,
        [&](std::size_t i, const std::function<void()>&) {
          ++items_here;
          dirty = i == 7 || i == 13;
          return bytes_of(std::to_string(::getpid()) + " " + std::to_string(items_here));
        },
        [&](std::size_t i, std::vector<std::uint8_t> b) {
          EXPECT_TRUE(got.emplace(i, std::string(b.begin(), b.end())).second)
              << "item " << i << " twice";
        },
        [](std::size_t i) { return "item " + std::to_string(i); });
    ASSERT_EQ(got.size(), 20u) << jobs;
    std::map<std::string, std::vector<std::size_t>> by_pid;
    for (const auto& [i, s] : got) by_pid[s.substr(0, s.find(' '))].push_back(i);
    // Few processes, each numbering its own items 1, 2, ...; none runs past item 7 or 13.
    EXPECT_LE(by_pid.size(), static_cast<std::size_t>(jobs) + 2) << jobs;
    for (const auto& [pid, items] : by_pid) {
      for (std::size_t k = 0; k < items.size(); ++k) {
        EXPECT_EQ(got[items[k]], pid + " " + std::to_string(k + 1)) << "process " << pid;
        if (items[k] == 7 || items[k] == 13) {
          EXPECT_EQ(k + 1, items.size()) << "ran more after a change";
        }
      }
    }
  }
}

TEST(ForkPool, AFailingChildEndsThePoolNamingItsItem) {
  try {
    fork_pool(
        6, ForkPoolOptions{2, nullptr, {}},
        [](std::size_t i, const std::function<void()>&) -> std::vector<std::uint8_t> {
          if (i == 4) throw std::runtime_error("boom");
          return {};
        },
        [](std::size_t, std::vector<std::uint8_t>) {},
        [](std::size_t i) { return "replica " + std::to_string(i); });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "replica 4: process failed (status 1024)");
  }
  EXPECT_THROW(
      fork_pool(
          1, ForkPoolOptions{1, nullptr, {}},
          [](std::size_t, const std::function<void()>&) -> std::vector<std::uint8_t> { ::abort(); },
          [](std::size_t, std::vector<std::uint8_t>) {}, [](std::size_t) { return "x"; }),
      std::runtime_error);
}

}  // namespace
}  // namespace faultline::sim
