#pragma once

// How NCCL ranks on different machines agree on a communicator: rank 0 creates the NCCL unique id
// (an opaque 128-byte blob) and every other rank must receive it before ncclCommInitRank. Live mode
// hands each probe process a rendezvous it controls:
//   file:/shared/path  rank 0 writes the blob to a temporary name and renames it into place (so a
//                      reader never sees half a file); the others poll until it appears. The path
//                      must be fresh for each run: a file left by an earlier run would be read.
//   tcp:host:port      rank 0 listens on port (on host's address, or all addresses when host is
//                      not local) and serves the blob to nranks-1 connections; the others connect,
//                      retrying until rank 0 is up. Unauthenticated: use it on a trusted network.
// Everything happens under a deadline, so a missing rank becomes a "timed out" outcome naming the
// stage rather than a hang. No CUDA or NCCL here; the unit tests run it with threads.

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "kernels/probe_options.h"

namespace faultline::kernels {

// The size of the blob a multi-machine nccl probe exchanges: NCCL_UNIQUE_ID_BYTES (nccl.h), kept
// here so that the CPU-only path (probe_main.cc) exchanges a blob of the same size without NCCL.
inline constexpr std::size_t kNcclUniqueIdBytes = 128;

struct RendezvousOutcome {
  bool ok = false;
  bool timed_out = false;
  std::string error;  // what went wrong, naming the rendezvous and the stage
};

// Rank 0 publishes `blob`; every other rank fills `blob` with what rank 0 published. `nranks` is
// checked on both sides (a mismatch is an error, not a wait). Rank 0 over TCP returns once every
// other rank has been served.
RendezvousOutcome exchange_blob(const RendezvousSpec& spec, int rank, int nranks,
                                std::span<std::byte> blob,
                                std::chrono::steady_clock::time_point deadline);

}  // namespace faultline::kernels
