// NoteWindow: notes said one by one up to a number a minute, the rest summed up at its end.
#include "realexec/controller/note_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace faultline::live {
namespace {

TEST(NoteWindow, SaysTheFirstOfAMinuteAndSumsUpTheRest) {
  Reactor r;
  NoteWindow w(3);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> summaries;
  auto summary = [&](std::uint64_t unsaid, std::uint64_t total) {
    summaries.emplace_back(unsaid, total);
  };
  std::vector<bool> said;
  for (int i = 0; i < 5; ++i) said.push_back(w.admit(r, summary));
  EXPECT_EQ(said, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(w.total(), 5u);
  EXPECT_TRUE(summaries.empty());
  w.end_minute();
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0], std::make_pair(std::uint64_t{2}, std::uint64_t{5}));
  // A new minute: its allowance again, the total carried on.
  EXPECT_TRUE(w.admit(r, summary));
  EXPECT_EQ(w.total(), 6u);
}

TEST(NoteWindow, AMinuteWithNothingLeftOutSaysNothingAtItsEnd) {
  Reactor r;
  NoteWindow w(2);
  int summaries = 0;
  EXPECT_TRUE(w.admit(r, [&](std::uint64_t, std::uint64_t) { ++summaries; }));
  w.end_minute();
  EXPECT_EQ(summaries, 0);
}

}  // namespace
}  // namespace faultline::live
