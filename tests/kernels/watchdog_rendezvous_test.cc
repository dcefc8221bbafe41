#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "kernels/rendezvous.h"
#include "kernels/watchdog.h"
#include "tests/support/free_port.h"

namespace faultline::kernels {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Watchdog, CollectsOutputAndStatus) {
  const auto r = run_in_child(
      [](int fd) {
        write_all(fd, "first\nsecond\n");
        return 7;
      },
      10);
  EXPECT_EQ(r.kind, ChildResult::Kind::kExited);
  EXPECT_EQ(r.exit_status, 7);
  EXPECT_EQ(r.output, "first\nsecond\n");
  EXPECT_EQ(last_complete_line(r.output), "second");
}

TEST(Watchdog, KillsAHungChildAtTheDeadline) {
  const auto start = Clock::now();
  const auto r = run_in_child(
      [](int fd) {
        write_all(fd, "{\"partial\":1}\n");
        for (;;) ::pause();
        return 0;
      },
      0.3);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.kind, ChildResult::Kind::kDeadline);
  EXPECT_EQ(last_complete_line(r.output), "{\"partial\":1}");
  EXPECT_GE(elapsed, 0.3);
  EXPECT_LT(elapsed, 5.0);
}

TEST(Watchdog, ReportsACrash) {
  const auto r = run_in_child(
      [](int) {
        ::raise(SIGSEGV);
        return 0;
      },
      10);
  EXPECT_EQ(r.kind, ChildResult::Kind::kSignaled);
  EXPECT_EQ(r.signal, SIGSEGV);
}

TEST(Watchdog, AnEscapingExceptionIsAFailureStatus) {
  const auto r = run_in_child([](int) -> int { throw std::runtime_error("boom"); }, 10);
  EXPECT_EQ(r.kind, ChildResult::Kind::kExited);
  EXPECT_EQ(r.exit_status, 125);
}

TEST(Watchdog, LastCompleteLine) {
  EXPECT_EQ(last_complete_line(""), "");
  EXPECT_EQ(last_complete_line("no newline"), "");
  EXPECT_EQ(last_complete_line("one\n"), "one");
  EXPECT_EQ(last_complete_line("one\ntwo\nthr"), "two");
  EXPECT_EQ(last_complete_line("\n"), "");
}

using Blob = std::array<std::byte, 128>;

Blob make_blob(int salt) {
  Blob b;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>((i * 31 + salt) & 0xFF);
  return b;
}

// Ranks 1..n-1 start first, rank 0 a little later; all must end with rank 0's blob.
void exchange_among(const RendezvousSpec& spec, int nranks) {
  const Blob published = make_blob(3);
  std::vector<Blob> received(nranks);
  std::vector<RendezvousOutcome> outcomes(nranks);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::vector<std::thread> threads;
  for (int rank = nranks - 1; rank >= 0; --rank) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    threads.emplace_back([&, rank] {
      received[rank] = rank == 0 ? published : Blob{};
      outcomes[rank] = exchange_blob(spec, rank, nranks, received[rank], deadline);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < nranks; ++rank) {
    EXPECT_TRUE(outcomes[rank].ok) << "rank " << rank << ": " << outcomes[rank].error;
    EXPECT_EQ(received[rank], published) << "rank " << rank;
  }
}

std::string temp_path(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/faultline_" + name + "_" + std::to_string(::getpid());
  std::remove(path.c_str());
  return path;
}

using faultline::testing::free_port;

TEST(Rendezvous, FileSharesTheUniqueId) {
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kFile;
  spec.path = temp_path("rendezvous");
  exchange_among(spec, 4);
}

TEST(Rendezvous, TcpSharesTheUniqueId) {
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kTcp;
  spec.host = "127.0.0.1";
  spec.port = free_port();
  exchange_among(spec, 4);
}

TEST(Rendezvous, SingleRankNeedsNobody) {
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kTcp;
  spec.host = "127.0.0.1";
  spec.port = free_port();
  Blob b = make_blob(1);
  EXPECT_TRUE(exchange_blob(spec, 0, 1, b, Clock::now() + std::chrono::seconds(1)).ok);
}

TEST(Rendezvous, MissingRankZeroTimesOut) {
  RendezvousSpec file;
  file.kind = RendezvousSpec::Kind::kFile;
  file.path = temp_path("never_written");
  Blob b{};
  const auto start = Clock::now();
  auto r = exchange_blob(file, 1, 2, b, start + std::chrono::milliseconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.error.find("rank 0"), std::string::npos);

  RendezvousSpec tcp;
  tcp.kind = RendezvousSpec::Kind::kTcp;
  tcp.host = "127.0.0.1";
  tcp.port = free_port();
  r = exchange_blob(tcp, 1, 2, b, Clock::now() + std::chrono::milliseconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

TEST(Rendezvous, RankZeroWaitsForEveryRankUntilTheDeadline) {
  RendezvousSpec tcp;
  tcp.kind = RendezvousSpec::Kind::kTcp;
  tcp.host = "127.0.0.1";
  tcp.port = free_port();
  Blob b = make_blob(2);
  const auto r = exchange_blob(tcp, 0, 3, b, Clock::now() + std::chrono::milliseconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.error.find("0 of 2"), std::string::npos) << r.error;
}

TEST(Rendezvous, StaleFileForAnotherRunIsAnError) {
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kFile;
  spec.path = temp_path("stale");
  Blob b = make_blob(4);
  ASSERT_TRUE(exchange_blob(spec, 0, 8, b, Clock::now() + std::chrono::seconds(1)).ok);
  Blob other{};
  const auto r = exchange_blob(spec, 1, 2, other, Clock::now() + std::chrono::seconds(1));
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.error.find("8 ranks"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace faultline::kernels
