#pragma once

// The communication layer of the reference training job: a torchrun-style rendezvous over TCP,
// a ring of point-to-point connections, and a star of control connections to rank 0.
//
// Rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT; every rank listens on an ephemeral
// data port and registers (rank, world size, address, port) with rank 0, which answers with the
// whole table; then each rank connects to its successor and accepts its predecessor. The control
// connections to rank 0 stay open for the restore agreement and checkpoint transfers.
//
// The all-reduce of the job is deliberately NOT a reduce-scatter + all-gather: floating-point
// addition is not associative, so a ring all-reduce sums in an order that depends on the world
// size and would make a 4-rank run differ from its 1-rank replay. Instead the job does a
// deterministic all-reduce = ring ALL-GATHER of every micro-batch's gradient (W-1 ring steps,
// each forwarding one rank's block) followed by a local sum in micro-batch index order on every
// rank (model.h apply_step). It moves M gradient vectors instead of one, which is fine for a
// small reference model and buys bit-identical results for any world size dividing M.
//
// All I/O is blocking-with-deadline (poll on non-blocking sockets); sends and receives of one
// ring step progress together, so large blocks cannot deadlock on full socket buffers. IPv4.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::live::trainjob {

using Clock = std::chrono::steady_clock;
// When a blocking operation gives up; nullopt waits forever (a peer that hangs hangs us too, as
// in a real collective; a peer that dies closes its sockets and fails us).
using Deadline = std::optional<Clock::time_point>;

struct GroupConfig {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string host_addr;  // address to listen on and advertise; empty: derive it (see .cc)
  // Rank 0 believes a registration only when it carries this key and generation (the agent
  // gives every rank of a launch the same key, derived from the controller's token; strangers
  // on the network do not have it). Empty key / gen -1: not checked.
  std::string key;
  std::int64_t gen = -1;
};

struct CommStatus {
  bool ok = true;
  bool timed_out = false;
  std::string error;  // what failed, naming the peer rank and the stage
};

// Never returns: blocks the calling thread forever. Out of line and named so a stack capture
// of a rank hung by the "hang" fault shows where it is.
[[noreturn]] void hang_in_collective();

class Group {
 public:
  // Joins the group described by `config`, or returns nullptr with *status (timed_out and an
  // error starting "rendezvous timeout" when `deadline` passed first). World size 1 needs no
  // network.
  static std::unique_ptr<Group> rendezvous(const GroupConfig& config, Clock::time_point deadline,
                                           CommStatus* status);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Ring all-gather. `all` holds world_size blocks of `block_bytes`; block rank() is this
  // rank's input; on success every block holds its rank's input. Requires
  // all.size() == world_size * block_bytes.
  // With `shift_in` set, also performs shift(shift_out, shift_in) inside the same call, so
  // a peer checkpoint copy rides on the step's collective: every healthy rank then waits
  // in one place (all_gather) when a peer stalls, which is what stack aggregation needs.
  CommStatus all_gather(std::span<std::byte> all, std::size_t block_bytes, Deadline deadline,
                        std::string_view shift_out = {}, std::string* shift_in = nullptr);

  // Ring shift: sends `to_next` to rank+1 and receives what rank-1 sent (sizes may differ).
  CommStatus shift(std::string_view to_next, std::string* from_prev, Deadline deadline);

  // Control messages over the star: rank 0 may talk to any rank, the others only to rank 0.
  CommStatus send_to(int peer, std::string_view message, Deadline deadline);
  CommStatus recv_from(int peer, std::string* message, Deadline deadline);

  // The next all_gather calls hang_in_collective() instead of communicating.
  void arm_hang() { hang_armed_ = true; }

 private:
  Group(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int control_fd(int peer) const;

  int rank_;
  int world_size_;
  int next_fd_ = -1;
  int prev_fd_ = -1;
  std::vector<int> control_fds_;  // rank 0: indexed by peer rank; others: [0] is rank 0
  bool hang_armed_ = false;
};

}  // namespace faultline::live::trainjob
