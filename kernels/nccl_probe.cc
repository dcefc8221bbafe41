// The nccl probe: all-reduce, all-gather and all-to-all bus bandwidth among local GPUs (one
// process driving all of them) or across machines (one GPU per process, the unique id exchanged
// through a rendezvous, rendezvous.h). Communicators are non-blocking and every wait polls against
// the soft deadline, so a missing rank or a hung collective ends in ncclCommAbort and a
// deadline_exceeded verdict that names the stage, instead of a hang. Results are verified.

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/cuda_probes.h"
#include "kernels/cuda_util.h"
#include "kernels/device_kernels.h"
#include "kernels/patterns.h"
#include "kernels/rendezvous.h"

namespace faultline::kernels {
namespace {

struct Rank {
  int device = 0;
  int global_rank = 0;
  ncclComm_t comm = nullptr;
  std::unique_ptr<Stream> stream;
  DeviceBuffer<std::byte> send;
  DeviceBuffer<std::byte> recv;
  DeviceBuffer<MemoryErrorLog> log;
  DeviceBuffer<double> scratch;
  std::unique_ptr<Event> start;
  std::unique_ptr<Event> stop;
};

enum class Wait { kDone, kFailed, kDeadline };

std::string nccl_error(ncclResult_t r, ncclComm_t comm) {
  std::string s =
      std::string(ncclGetErrorString(r)) + " (" + std::to_string(static_cast<int>(r)) + ")";
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') s += ": " + std::string(last);
  }
  return s;
}

class Session {
 public:
  Session(std::vector<Rank>& ranks, const ProbeContext& context)
      : ranks_(ranks), context_(context) {}

  // Polls communicator states (and, with `streams`, the streams) until nothing is in progress.
  Wait wait(bool streams) {
    for (;;) {
      bool busy = false;
      for (Rank& r : ranks_) {
        if (r.comm == nullptr) continue;
        ncclResult_t state = ncclSuccess;
        const ncclResult_t q = ncclCommGetAsyncError(r.comm, &state);
        if (q != ncclSuccess) state = q;
        if (state == ncclInProgress) {
          busy = true;
        } else if (state != ncclSuccess) {
          error_ = "rank " + std::to_string(r.global_rank) + ": " + nccl_error(state, r.comm);
          return Wait::kFailed;
        }
        if (streams) {
          cudaSetDevice(r.device);
          const cudaError_t e = cudaStreamQuery(r.stream->get());
          if (e == cudaErrorNotReady) {
            busy = true;
          } else if (e != cudaSuccess) {
            error_ = "rank " + std::to_string(r.global_rank) + ": " + cudaGetErrorName(e) + ": " +
                     cudaGetErrorString(e);
            return Wait::kFailed;
          }
        }
      }
      if (!busy) return Wait::kDone;
      if (context_.past_soft_deadline()) return Wait::kDeadline;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // Treats an NCCL call's immediate result: success or in-progress continue, anything else fails.
  bool accept(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return true;
    error_ = std::string(what) + ": " + nccl_error(r, nullptr);
    return false;
  }

  void abort_all() {
    for (Rank& r : ranks_) {
      if (r.comm != nullptr) {
        cudaSetDevice(r.device);
        ncclCommAbort(r.comm);
        r.comm = nullptr;
      }
    }
  }

  const std::string& error() const { return error_; }

 private:
  std::vector<Rank>& ranks_;
  const ProbeContext& context_;
  std::string error_;
};

struct Layout {
  std::uint64_t count = 0;  // elements per call argument (per peer for gather/all-to-all)
  double size_bytes = 0;    // the operation's size as nccl-tests counts it
};

Layout layout_for(Collective c, std::uint64_t bytes, int nranks) {
  const std::uint64_t words = bytes / 4;
  Layout l;
  if (c == Collective::kAllReduce) {
    l.count = words;
    l.size_bytes = collective_size_bytes(c, static_cast<double>(words) * 4);
  } else {
    // A multiple of 4 words keeps every per-rank chunk 16-byte aligned for the vector kernels.
    l.count = words / static_cast<std::uint64_t>(nranks) / 4 * 4;
    l.size_bytes = collective_size_bytes(c, static_cast<double>(l.count) * nranks * 4);
  }
  return l;
}

std::uint64_t gather_key(std::uint64_t key, int source) {
  return stream_key(key, static_cast<std::uint64_t>(source));
}
std::uint64_t all_to_all_key(std::uint64_t key, int source, int destination) {
  return stream_key(stream_key(key, static_cast<std::uint64_t>(source)),
                    static_cast<std::uint64_t>(destination));
}

void fill_inputs(Collective c, Rank& r, const Layout& l, std::uint64_t key, int nranks) {
  const cudaStream_t s = r.stream->get();
  auto* send = reinterpret_cast<std::uint32_t*>(r.send.get());
  switch (c) {
    case Collective::kAllReduce:
      launch_fill_allreduce_input(reinterpret_cast<float*>(send), l.count, key, r.global_rank, s);
      break;
    case Collective::kAllGather: {
      PatternSpec spec;
      spec.kind = PatternKind::kRandom;
      spec.key = gather_key(key, r.global_rank);
      launch_fill_pattern(send, l.count, spec, s);
      break;
    }
    case Collective::kAllToAll:
      for (int p = 0; p < nranks; ++p) {
        PatternSpec spec;
        spec.kind = PatternKind::kRandom;
        spec.key = all_to_all_key(key, r.global_rank, p);
        launch_fill_pattern(send + static_cast<std::size_t>(p) * l.count, l.count, spec, s);
      }
      break;
  }
}

void verify_outputs(Collective c, Rank& r, const Layout& l, std::uint64_t key, int nranks) {
  const cudaStream_t s = r.stream->get();
  auto* recv = reinterpret_cast<std::uint32_t*>(r.recv.get());
  switch (c) {
    case Collective::kAllReduce:
      launch_verify_allreduce_output(reinterpret_cast<const float*>(recv), l.count, key, nranks,
                                     r.log.get(), s);
      break;
    case Collective::kAllGather:
    case Collective::kAllToAll:
      for (int source = 0; source < nranks; ++source) {
        PatternSpec spec;
        spec.kind = PatternKind::kRandom;
        spec.key = c == Collective::kAllGather ? gather_key(key, source)
                                               : all_to_all_key(key, source, r.global_rank);
        launch_verify_pattern(recv + static_cast<std::size_t>(source) * l.count, l.count, spec,
                              r.log.get(), s);
      }
      break;
  }
}

ncclResult_t issue(Collective c, Rank& r, const Layout& l, int nranks) {
  const cudaStream_t s = r.stream->get();
  switch (c) {
    case Collective::kAllReduce:
      return ncclAllReduce(r.send.get(), r.recv.get(), l.count, ncclFloat, ncclSum, r.comm, s);
    case Collective::kAllGather:
      return ncclAllGather(r.send.get(), r.recv.get(), l.count, ncclUint32, r.comm, s);
    case Collective::kAllToAll: {
      ncclResult_t result = ncclGroupStart();
      for (int p = 0; p < nranks && (result == ncclSuccess || result == ncclInProgress); ++p) {
        const std::size_t offset = static_cast<std::size_t>(p) * l.count * 4;
        result = ncclSend(r.send.get() + offset, l.count, ncclUint32, p, r.comm, s);
        if (result == ncclSuccess || result == ncclInProgress) {
          result = ncclRecv(r.recv.get() + offset, l.count, ncclUint32, p, r.comm, s);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return result == ncclSuccess ? end : result;
    }
  }
  return ncclInvalidArgument;
}

// One run of the NCCL probe: the local ranks (every visible GPU in local mode, one in
// rendezvous mode), their communicators, and what the timed collectives measured. Each
// step returns false when it has written the verdict and the report is final.
class NcclRun {
 public:
  NcclRun(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report)
      : options_(options),
        o_(options.nccl),
        context_(context),
        report_(report),
        local_(!o_.rendezvous.has_value()),
        bitflip_(options.common.inject == Injection::kBitflip),
        throttle_(options.common.inject == Injection::kThrottle) {}

  // The ranks this process drives, and whether the sizes suit them.
  bool plan_ranks(int visible) {
    const bool local = local_;
    if (local) {
      nranks_ = o_.gpus > 0 ? o_.gpus : visible;
      if (nranks_ > visible) {
        report_.verdict = Verdict::kUsageError;
        report_.notes.push_back("--gpus " + std::to_string(o_.gpus) + " but only " +
                                std::to_string(visible) + " GPU(s) are visible");
        return false;
      }
      report_.metrics["nccl_ranks"] = nranks_;
      report_.metrics["nccl_local_mode"] = 1;
      if (nranks_ < 2) {
        report_.verdict = Verdict::kSkip;
        report_.notes.push_back(
            "local mode with one GPU: no bus to measure (skip); use "
            "--rendezvous to test across machines");
        return false;
      }
      for (int d = 0; d < nranks_; ++d) {
        ranks_.emplace_back();
        ranks_.back().device = d;
        ranks_.back().global_rank = d;
      }
    } else {
      nranks_ = o_.nranks;
      report_.metrics["nccl_ranks"] = nranks_;
      report_.metrics["nccl_local_mode"] = 0;
      report_.metrics["nccl_rank"] = o_.rank;
      ranks_.emplace_back();
      ranks_.back().device = options_.common.device;
      ranks_.back().global_rank = o_.rank;
    }
    for (Collective c : o_.collectives) {
      if (c != Collective::kAllReduce && o_.bytes / 4 / static_cast<std::uint64_t>(nranks_) < 4) {
        report_.verdict = Verdict::kUsageError;
        report_.notes.push_back("--bytes " + std::to_string(o_.bytes) + " is too small for " +
                                std::to_string(nranks_) + " ranks");
        return false;
      }
    }
    return true;
  }
  // The unique id: created by rank 0 (or by this process in local mode) and shared.
  bool share_id() {
    const bool local = local_;
    ncclUniqueId& id = id_;
    std::memset(&id, 0, sizeof id);
    static_assert(sizeof id.internal == kNcclUniqueIdBytes);
    if (local || o_.rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw GpuError("ncclGetUniqueId: " + nccl_error(r, nullptr), -1);
    }
    if (!local) {
      auto blob = std::as_writable_bytes(std::span<char>(id.internal, sizeof id.internal));
      const RendezvousOutcome outcome =
          exchange_blob(*o_.rendezvous, o_.rank, nranks_, blob, context_.soft_deadline);
      report_.metrics["rendezvous_ok"] = outcome.ok ? 1 : 0;
      if (!outcome.ok) {
        report_.details["rendezvous"] = outcome.timed_out ? "timed_out" : "failed";
        report_.verdict = outcome.timed_out ? Verdict::kDeadlineExceeded : Verdict::kFail;
        report_.notes.push_back("stage 'rendezvous': " + outcome.error);
        return false;
      }
      report_.details["rendezvous"] = "ok";
    }
    return true;
  }
  // Buffers, streams and events on every local rank.
  void allocate() {
    for (Rank& r : ranks_) {
      FAULTLINE_CUDA(cudaSetDevice(r.device));
      r.stream = std::make_unique<Stream>();
      r.send = device_alloc<std::byte>(o_.bytes, "cudaMalloc(nccl send)");
      r.recv = device_alloc<std::byte>(o_.bytes, "cudaMalloc(nccl recv)");
      r.log = device_alloc<MemoryErrorLog>(1, "cudaMalloc(nccl log)");
      r.scratch = device_alloc<double>(1, "cudaMalloc(nccl scratch)");
      r.start = std::make_unique<Event>();
      r.stop = std::make_unique<Event>();
      FAULTLINE_CUDA(cudaMemsetAsync(r.log.get(), 0, sizeof(MemoryErrorLog), r.stream->get()));
    }
  }
  // The communicators, initialised together (one group in local mode).
  bool init_communicators() {
    const ncclUniqueId& id = id_;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    {
      const bool grouped = ranks_.size() > 1;
      bool ok = !grouped || session_.accept(ncclGroupStart(), "ncclGroupStart");
      for (Rank& r : ranks_) {
        FAULTLINE_CUDA(cudaSetDevice(r.device));
        ok = ok &&
             session_.accept(ncclCommInitRankConfig(&r.comm, nranks_, id, r.global_rank, &config),
                             "ncclCommInitRankConfig");
      }
      if (grouped) ok = session_.accept(ncclGroupEnd(), "ncclGroupEnd") && ok;
      const Wait w = ok ? session_.wait(false) : Wait::kFailed;
      if (w != Wait::kDone) {
        give_up(w, "communicator init");
        return false;
      }
    }

    return true;
  }
  // Warm-up, timed iterations (the slowest rank's time, agreed across machines), the
  // bandwidths, then verification of every rank's output (with a flipped bit injected on
  // request).
  bool measure(Collective c) {
    const std::string name(collective_name(c));
    const Layout l = layout_for(c, o_.bytes, nranks_);
    const std::uint64_t key = stream_key(options_.common.seed, 0x7CC0 + static_cast<int>(c));
    for (Rank& r : ranks_) {
      FAULTLINE_CUDA(cudaSetDevice(r.device));
      fill_inputs(c, r, l, key, nranks_);
    }
    for (int i = 0; i < o_.warmup; ++i) {
      if (!enqueue(c, l)) {
        give_up(context_.past_soft_deadline() ? Wait::kDeadline : Wait::kFailed, name + " warm-up");
        return false;
      }
    }
    Wait w = session_.wait(true);
    if (w != Wait::kDone) {
      give_up(w, name + " warm-up");
      return false;
    }
    for (Rank& r : ranks_) {
      FAULTLINE_CUDA(cudaSetDevice(r.device));
      r.start->record(r.stream->get());
    }
    for (int i = 0; i < o_.iterations; ++i) {
      if (throttle_) {
        FAULTLINE_CUDA(cudaSetDevice(ranks_[0].device));
        launch_sleep(2000.0, ranks_[0].stream->get());
      }
      if (!enqueue(c, l)) {
        give_up(context_.past_soft_deadline() ? Wait::kDeadline : Wait::kFailed,
                name + " (timed iterations)");
        return false;
      }
    }
    for (Rank& r : ranks_) {
      FAULTLINE_CUDA(cudaSetDevice(r.device));
      r.stop->record(r.stream->get());
    }
    w = session_.wait(true);
    if (w != Wait::kDone) {
      give_up(w, name + " (timed iterations)");
      return false;
    }
    double max_ms = 0;
    for (Rank& r : ranks_) max_ms = std::max(max_ms, elapsed_ms(*r.start, *r.stop));
    if (!local_) {
      // The slowest rank sets the pace; agree on its time like nccl-tests does.
      Rank& r = ranks_[0];
      FAULTLINE_CUDA(cudaMemcpy(r.scratch.get(), &max_ms, sizeof max_ms, cudaMemcpyHostToDevice));
      if (!session_.accept(ncclAllReduce(r.scratch.get(), r.scratch.get(), 1, ncclDouble, ncclMax,
                                         r.comm, r.stream->get()),
                           "ncclAllReduce(time)") ||
          (w = session_.wait(true)) != Wait::kDone) {
        give_up(w == Wait::kDone ? Wait::kFailed : w, name + " (time agreement)");
        return false;
      }
      FAULTLINE_CUDA(cudaMemcpy(&max_ms, r.scratch.get(), sizeof max_ms, cudaMemcpyDeviceToHost));
    }
    const double seconds = max_ms / 1e3 / o_.iterations;
    report_.metrics["nccl_" + name + "_time_us"] = seconds * 1e6;
    report_.metrics["nccl_" + name + "_size_bytes"] = l.size_bytes;
    report_.metrics["nccl_" + name + "_algbw_gbps"] =
        algorithm_bandwidth_gbps(l.size_bytes, seconds);
    report_.metrics["nccl_" + name + "_busbw_gbps"] =
        bus_bandwidth_gbps(c, l.size_bytes, seconds, nranks_);

    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      FAULTLINE_CUDA(cudaSetDevice(r.device));
      const bool inject = bitflip_ && i == 0;
      if (inject) {
        launch_flip_word_bit(reinterpret_cast<std::uint32_t*>(r.recv.get()), l.count / 2, 11,
                             r.stream->get());
        ++injected_;
      }
      verify_outputs(c, r, l, key, nranks_);
      FAULTLINE_CUDA(cudaGetLastError());
      r.stream->synchronize("nccl verification");
      MemoryErrorLog log{};
      FAULTLINE_CUDA(cudaMemcpy(&log, r.log.get(), sizeof log, cudaMemcpyDeviceToHost));
      FAULTLINE_CUDA(cudaMemset(r.log.get(), 0, sizeof(MemoryErrorLog)));
      errors_ += log.bit_errors;
      if (inject && log.bit_errors > 0) ++detected_;
    }
    report_.metrics["nccl_data_errors"] = static_cast<double>(errors_);
    if (context_.publish) context_.publish(report_);
    return true;
  }
  void finish() {
    session_.abort_all();  // local teardown only: never waits for peers
    report_.metrics["nccl_bytes"] = static_cast<double>(o_.bytes);
    report_.metrics["nccl_data_errors_"] = static_cast<double>(errors_);
    if (bitflip_) {
      report_.metrics["injected_faults"] = static_cast<double>(injected_);
      report_.metrics["detected_injected_faults"] = static_cast<double>(detected_);
    }
    if (throttle_) {
      report_.notes.push_back(
          "throttle injected: a 2 ms sleep precedes each timed collective on "
          "the first local rank");
    }
  }

 private:
  void give_up(Wait w, const std::string& stage) {
    if (w == Wait::kDeadline) {
      report_.verdict = Verdict::kDeadlineExceeded;
      report_.notes.push_back("NCCL did not finish stage '" + stage +
                              "' before the deadline: communicators aborted (a rank missing or "
                              "hung, or a link down?)");
    } else {
      report_.verdict = Verdict::kFail;
      report_.notes.push_back("NCCL failed in stage '" + stage + "': " + session_.error());
    }
    session_.abort_all();
  }
  // Enqueues one collective on every local rank (as one group in local mode).
  bool enqueue(Collective c, const Layout& l) {
    const bool grouped = ranks_.size() > 1;
    bool ok = !grouped || session_.accept(ncclGroupStart(), "ncclGroupStart");
    for (Rank& r : ranks_) {
      if (!grouped) FAULTLINE_CUDA(cudaSetDevice(r.device));
      ok = ok && session_.accept(issue(c, r, l, nranks_), "collective");
    }
    if (grouped) ok = session_.accept(ncclGroupEnd(), "ncclGroupEnd") && ok;
    return ok && session_.wait(false) == Wait::kDone;
  }

  const ProbeOptions& options_;
  const NcclOptions& o_;
  const ProbeContext& context_;
  ProbeReport& report_;
  const bool local_, bitflip_, throttle_;
  int nranks_ = 0;
  std::vector<Rank> ranks_;
  Session session_{ranks_, context_};
  ncclUniqueId id_;
  std::uint64_t errors_ = 0;
  std::int64_t injected_ = 0;
  std::int64_t detected_ = 0;
};

}  // namespace

void run_nccl_probe(const ProbeOptions& options, const ProbeContext& context, ProbeReport& report) {
  int visible = 0;
  FAULTLINE_CUDA(cudaGetDeviceCount(&visible));
  int version = 0;
  ncclGetVersion(&version);
  report.details["nccl_version"] = version;
  NcclRun run(options, context, report);
  if (!run.plan_ranks(visible) || !run.share_id()) return;
  run.allocate();
  if (!run.init_communicators()) return;
  for (Collective c : options.nccl.collectives)
    if (!run.measure(c)) return;
  run.finish();
}

}  // namespace faultline::kernels
