// The TCP group of faultline-trainjob, with ranks as threads of one process on loopback.

#include "realexec/trainjob/collective.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "realexec/trainjob/rng.h"
#include "tests/support/free_port.h"

namespace faultline::live::trainjob {
namespace {

using faultline::testing::free_port;

// Runs body(rank, group) on `w` threads after a rendezvous; returns each rank's rendezvous
// status.
std::vector<CommStatus> run_ranks(int w, const std::function<void(int, Group&)>& body,
                                  double timeout_s = 10, int only_rank = -1) {
  const int port = free_port();
  std::vector<CommStatus> status(w);
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    if (only_rank >= 0 && r != only_rank) continue;
    threads.emplace_back([&, r] {
      GroupConfig cfg;
      cfg.rank = r;
      cfg.world_size = w;
      cfg.master_addr = "127.0.0.1";
      cfg.master_port = port;
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(timeout_s));
      auto g = Group::rendezvous(cfg, deadline, &status[r]);
      if (g) body(r, *g);
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

TEST(TrainjobCollective, AllGatherDeliversEveryBlockBitExactly) {
  for (int w : {2, 3, 4}) {
    std::vector<int> ok(w, 0);
    const std::size_t words = 100000;  // larger than socket buffers: exercises full duplex
    const auto st = run_ranks(w, [&](int r, Group& g) {
      std::vector<std::uint64_t> buf(words * w, 0);
      for (std::size_t i = 0; i < words; ++i) buf[r * words + i] = counter_hash(r, i);
      const auto s = g.all_gather(std::as_writable_bytes(std::span<std::uint64_t>(buf)), words * 8,
                                  Clock::now() + std::chrono::seconds(10));
      if (!s.ok) return;
      bool good = true;
      for (int b = 0; b < w; ++b) {
        for (std::size_t i = 0; i < words; ++i)
          good = good && buf[b * words + i] == counter_hash(b, i);
      }
      ok[r] = good;
    });
    for (int r = 0; r < w; ++r) {
      EXPECT_TRUE(st[r].ok) << st[r].error;
      EXPECT_TRUE(ok[r]) << "world " << w << " rank " << r;
    }
  }
}

TEST(TrainjobCollective, ShiftAndControlMessages) {
  const int w = 3;
  std::vector<std::string> from_prev(w), from_root(w);
  std::string at_root;
  run_ranks(w, [&](int r, Group& g) {
    const auto d = Clock::now() + std::chrono::seconds(10);
    ASSERT_TRUE(g.shift(std::string(r + 1, static_cast<char>('a' + r)), &from_prev[r], d).ok);
    if (r == 0) {
      for (int p = 1; p < w; ++p) {
        std::string m;
        ASSERT_TRUE(g.recv_from(p, &m, d).ok);
        at_root += m;
        ASSERT_TRUE(g.send_to(p, "to " + std::to_string(p), d).ok);
      }
    } else {
      ASSERT_TRUE(g.send_to(0, std::to_string(r), d).ok);
      ASSERT_TRUE(g.recv_from(0, &from_root[r], d).ok);
      EXPECT_FALSE(g.send_to(2 - (r - 1), "x", d).ok);  // only rank 0 is reachable
    }
  });
  EXPECT_EQ(from_prev[0], "ccc");
  EXPECT_EQ(from_prev[1], "a");
  EXPECT_EQ(from_prev[2], "bb");
  EXPECT_EQ(at_root, "12");
  EXPECT_EQ(from_root[1], "to 1");
  EXPECT_EQ(from_root[2], "to 2");
}

TEST(TrainjobCollective, RendezvousTimesOutNamingTheMissingRanks) {
  const auto t0 = Clock::now();
  const auto st = run_ranks(
      3, [](int, Group&) {}, 0.5, /*only_rank=*/0);
  EXPECT_FALSE(st[0].ok);
  EXPECT_TRUE(st[0].timed_out);
  EXPECT_EQ(st[0].error.rfind("rendezvous timeout", 0), 0u) << st[0].error;
  EXPECT_NE(st[0].error.find("[1,2]"), std::string::npos) << st[0].error;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  const auto st1 = run_ranks(
      3, [](int, Group&) {}, 0.5, /*only_rank=*/1);
  EXPECT_TRUE(st1[1].timed_out);
  EXPECT_EQ(st1[1].error.rfind("rendezvous timeout", 0), 0u) << st1[1].error;
}

TEST(TrainjobCollective, APeerThatDiesFailsTheCollective) {
  std::vector<CommStatus> result(2);
  run_ranks(2, [&](int r, Group& g) {
    std::vector<std::byte> buf(16);
    if (r == 1) return;  // leaves: its sockets close
    result[r] = g.all_gather(buf, 8, Clock::now() + std::chrono::seconds(5));
  });
  EXPECT_FALSE(result[0].ok);
  EXPECT_FALSE(result[0].timed_out);
  EXPECT_NE(result[0].error.find("rank 1"), std::string::npos) << result[0].error;
}

}  // namespace
}  // namespace faultline::live::trainjob
