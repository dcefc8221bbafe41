#include "realexec/trainjob/trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "realexec/trainjob/checkpoint.h"
#include "realexec/trainjob/collective.h"
#include "realexec/trainjob/faults.h"
#include "realexec/trainjob/model.h"
#include "realexec/trainjob/report.h"
#include "realexec/trainjob/rng.h"

namespace faultline::live::trainjob {
namespace {

constexpr int kKeepCheckpoints = 3;
constexpr double kExplodedGradRatio = 1000;
constexpr std::string_view kBadVersionSignature = "TypeError: bad code version";
constexpr std::int64_t kBadVersionCrashStep = 3;
constexpr std::string_view kCrashAtSignature =
    "CUDA error: an illegal memory access was encountered";

// A fatal error of the rank: unwinds to run_job, which reports it and exits 1.
struct Fatal {
  std::string signature;
};

[[noreturn]] void fatal(std::string signature) { throw Fatal{std::move(signature)}; }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

class Job {
 public:
  explicit Job(const Options& o)
      : opt_(o),
        reporter_(o.mode == Mode::kTrain ? o.report_fd : -1),
        faults_(o.fault_file, o.local_rank, o.local_world_size),
        shape_(make_shape(o)),
        task_(o.seed, shape_) {
    meta_.seed = o.seed;
    meta_.shape = shape_;
    meta_.microbatches = o.microbatches;
    meta_.writer_rank = o.rank;
    if (!o.ckpt_dir.empty() && o.mode != Mode::kProbeBitwise) {
      store_ = std::make_unique<CheckpointStore>(o.ckpt_dir, o.rank, meta_);
    }
  }

  Reporter& reporter() { return reporter_; }

  int train();
  int replay();
  int probe_bitwise();
  int probe_allgather();

 private:
  static ModelShape make_shape(const Options& o) {
    ModelShape s;
    s.hidden = o.hidden;
    return s;
  }

  void join_group(Clock::time_point deadline);
  void restore(bool write_back);
  // The step every rank restores, agreed over the group: rank 0 collects every rank's held
  // steps, picks the newest one anybody holds and relays it from its lowest holder to every
  // rank lacking it (lead_restore); the others send theirs and follow (follow_restore).
  // `received`: the checkpoint relayed to this rank, when it lacks the step.
  std::int64_t lead_restore(const std::vector<CheckpointStore::Held>& inventory,
                            const std::set<std::int64_t>& mine, const Deadline& deadline,
                            std::string* received);
  std::int64_t follow_restore(const std::vector<CheckpointStore::Held>& inventory,
                              const std::set<std::int64_t>& mine, const Deadline& deadline,
                              std::string* received);
  void fire_one_shot_faults();
  // Tells the agent this process took `d` (a "fault" report with its id), once per id.
  void acknowledge(const FaultDirective& d);
  StepOutcome run_step();
  void compute_local(std::int64_t step, int first, int last, std::span<double> out);
  void checkpoint_if_due(const StepOutcome& out);
  void flush_peer_copy();
  void store_peer_copy(const std::string& from_prev);
  Deadline collective_deadline() const {
    if (opt_.collective_timeout_s <= 0) return std::nullopt;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(opt_.collective_timeout_s));
  }
  Clock::time_point rendezvous_deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(opt_.rendezvous_s));
  }

  Options opt_;
  Reporter reporter_;
  FaultFile faults_;
  ModelShape shape_;
  Task task_;
  CheckpointMeta meta_;
  std::unique_ptr<CheckpointStore> store_;  // null without FAULTLINE_CKPT_DIR
  std::unique_ptr<Group> group_;
  TrainState state_;
  std::string restored_from_ = "init";
  std::int64_t checkpoint_step_ = -1;
  double grad_norm_mean_ = 0;        // running mean of healthy steps' gradient norms
  std::string peer_copy_;            // newest own checkpoint, not yet sent to rank+1
  bool peer_copy_pending_ = false;   // same on every rank: checkpoint decisions are shared
  std::int64_t computed_steps_ = 0;  // by this process, for "sdc after=N"
  bool nan_armed_ = false;
  std::set<std::string> acknowledged_;  // ids of the fault directives this process took
  bool warned_nonfinite_ = false;
  std::vector<double> gathered_;
};

void Job::join_group(Clock::time_point deadline) {
  GroupConfig cfg;
  cfg.rank = opt_.rank;
  cfg.world_size = opt_.world_size;
  cfg.master_addr = opt_.master_addr;
  cfg.master_port = opt_.master_port;
  cfg.host_addr = opt_.host_addr;
  cfg.key = opt_.rendezvous_key;
  cfg.gen = opt_.gen;
  CommStatus st;
  group_ = Group::rendezvous(cfg, deadline, &st);
  if (!group_) fatal(st.error);
}

// The bytes of this rank's copy of `step`, or "" when it holds none that reads.
std::string read_held(const std::vector<CheckpointStore::Held>& inventory, std::int64_t step) {
  for (const auto& h : inventory) {
    if (h.step == step) {
      if (auto b = read_whole_file(h.path)) return *b;
    }
  }
  return {};
}

void check_restore(const CommStatus& st) {
  if (!st.ok) fatal("restore: " + st.error);
}

std::int64_t Job::lead_restore(const std::vector<CheckpointStore::Held>& inventory,
                               const std::set<std::int64_t>& mine, const Deadline& deadline,
                               std::string* received) {
  const int w = opt_.world_size;
  std::vector<std::set<std::int64_t>> held(w);
  held[0] = mine;
  for (int r = 1; r < w; ++r) {
    std::string msg;
    check_restore(group_->recv_from(r, &msg, deadline));
    const auto j = nlohmann::json::parse(msg, nullptr, false);
    if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array()) {
      fatal("restore: malformed inventory from rank " + std::to_string(r));
    }
    for (const auto& s : j["steps"]) held[r].insert(s.get<std::int64_t>());
  }
  std::int64_t step = -1;
  for (const auto& h : held) {
    if (!h.empty()) step = std::max(step, *h.rbegin());
  }
  int holder = -1;
  std::vector<int> lacking;
  for (int r = 0; r < w && step >= 0; ++r) {
    if (held[r].count(step)) {
      if (holder < 0) holder = r;
    } else {
      lacking.push_back(r);
    }
  }
  for (int r = 1; r < w; ++r) {
    const bool lacks = std::find(lacking.begin(), lacking.end(), r) != lacking.end();
    const nlohmann::json decision{
        {"step", step}, {"upload", r == holder && !lacking.empty()}, {"receive", lacks}};
    check_restore(group_->send_to(r, decision.dump(), deadline));
  }
  if (!lacking.empty()) {
    std::string bytes;
    if (holder == 0) {
      bytes = read_held(inventory, step);
    } else {
      check_restore(group_->recv_from(holder, &bytes, deadline));
    }
    for (int r : lacking) {
      if (r == 0) {
        *received = bytes;
      } else {
        check_restore(group_->send_to(r, bytes, deadline));
      }
    }
  }
  return step;
}

std::int64_t Job::follow_restore(const std::vector<CheckpointStore::Held>& inventory,
                                 const std::set<std::int64_t>& mine, const Deadline& deadline,
                                 std::string* received) {
  check_restore(group_->send_to(0, nlohmann::json{{"steps", mine}}.dump(), deadline));
  std::string msg;
  check_restore(group_->recv_from(0, &msg, deadline));
  const auto j = nlohmann::json::parse(msg, nullptr, false);
  if (!j.is_object() || !j.contains("step") || !j.contains("upload") || !j.contains("receive")) {
    fatal("restore: malformed decision from rank 0");
  }
  const std::int64_t step = j["step"].get<std::int64_t>();
  if (j["upload"].get<bool>())
    check_restore(group_->send_to(0, read_held(inventory, step), deadline));
  if (j["receive"].get<bool>()) check_restore(group_->recv_from(0, received, deadline));
  return step;
}

void Job::restore(bool write_back) {
  const auto inventory = store_ ? store_->inventory() : std::vector<CheckpointStore::Held>{};
  std::set<std::int64_t> mine;
  for (const auto& h : inventory) mine.insert(h.step);
  const int w = opt_.world_size;
  const Deadline deadline = rendezvous_deadline();
  std::int64_t step = mine.empty() ? -1 : *mine.rbegin();
  std::string received;
  if (w > 1 && opt_.rank == 0) {
    step = lead_restore(inventory, mine, deadline, &received);
  } else if (w > 1) {
    step = follow_restore(inventory, mine, deadline, &received);
  }

  if (step < 0) {
    state_ = init_state(opt_.seed, shape_);
    restored_from_ = "init";
    checkpoint_step_ = -1;
    return;
  }
  std::optional<Checkpoint> ckpt;
  std::string why = "no holder";
  bool own = false;
  if (mine.count(step)) {
    for (const auto& h : inventory) {
      if (h.step != step) continue;
      if (const auto bytes = read_whole_file(h.path)) ckpt = parse_checkpoint(*bytes, &why);
      if (ckpt) {
        own = h.own;
        break;
      }
    }
    restored_from_ = own ? "local" : "peer";
  } else {
    ckpt = parse_checkpoint(received, &why);
    restored_from_ = "peer";
  }
  if (!ckpt || ckpt->state.step != step || !compatible(ckpt->meta, meta_)) {
    fatal("restore: checkpoint of step " + std::to_string(step) +
          " unusable: " + (ckpt ? std::string("step or shape mismatch") : why));
  }
  state_ = std::move(ckpt->state);
  checkpoint_step_ = step;
  if (write_back && !own && store_) {
    // Make the restore point local, so the next restart of this rank needs nobody.
    std::string error;
    if (!store_->adopt_as_own(serialize_checkpoint(Checkpoint{meta_, state_}), kKeepCheckpoints,
                              &error)) {
      std::fprintf(stderr, "faultline-trainjob: rank %d: cannot store restored checkpoint: %s\n",
                   opt_.rank, error.c_str());
    }
  }
}

void Job::acknowledge(const FaultDirective& d) {
  if (!d.id.empty() && acknowledged_.insert(d.id).second)
    reporter_.fault(opt_.rank, d.id, fault_kind_name(d.kind));
}

// Every directive taken is acknowledged before it acts: one-shot ones once consumed, the
// persistent ones (slow, sdc: they act in compute_local) the first time this process sees them.
void Job::fire_one_shot_faults() {
  faults_.poll();
  const auto active = faults_.active();  // copy: consume() invalidates it
  for (FaultKind kind : {FaultKind::kSlow, FaultKind::kSdc}) {
    if (const FaultDirective* d = faults_.persistent(kind)) acknowledge(*d);
  }
  for (const auto& d : active) {
    if (!d.one_shot() || !faults_.consume(d)) continue;
    acknowledge(d);
    switch (d.kind) {
      case FaultKind::kCrash:
        fatal(d.signature);
      case FaultKind::kHang:
        group_->arm_hang();
        break;
      case FaultKind::kNan:
        nan_armed_ = true;
        break;
      default:
        break;
    }
  }
}

void Job::compute_local(std::int64_t step, int first, int last, std::span<double> out) {
  const auto t0 = Clock::now();
  const std::size_t stride = shape_.contribution_size();
  for (int mb = first; mb < last; ++mb) {
    task_.microbatch_contribution(state_.weights, step, mb,
                                  out.subspan((mb - first) * stride, stride));
  }
  if (nan_armed_ || step == opt_.bad_batch_at) {
    std::fill(out.begin(), out.end(), std::numeric_limits<double>::quiet_NaN());
    nan_armed_ = false;
  }
  if (const auto after = faults_.sdc_after(); after && computed_steps_ >= *after) {
    corrupt_gradient(out.subspan(0, shape_.param_count()), step);
  }
  if (const auto factor = faults_.slow_factor(); factor && *factor > 1) {
    // The step would take max(compute, --step-ms); the slow machine takes factor times that.
    const double compute_s = seconds_since(t0);
    slow_compute(*factor * std::max(compute_s, opt_.step_ms / 1000.0) - compute_s);
  }
  ++computed_steps_;
}

StepOutcome Job::run_step() {
  const int m = opt_.microbatches;
  const auto [first, last] = microbatch_range(group_->rank(), group_->world_size(), m);
  const std::size_t stride = shape_.contribution_size();
  gathered_.assign(static_cast<std::size_t>(m) * stride, 0.0);
  std::span<double> mine(gathered_.data() + first * stride, (last - first) * stride);
  compute_local(state_.step + 1, first, last, mine);
  // The previous checkpoint's peer copy travels inside this step's collective.
  std::string from_prev;
  const bool shift = peer_copy_pending_ && group_->world_size() > 1;
  const auto st =
      group_->all_gather(std::as_writable_bytes(std::span<double>(gathered_)), mine.size_bytes(),
                         collective_deadline(), peer_copy_, shift ? &from_prev : nullptr);
  if (!st.ok) fatal("collective: " + st.error);
  if (shift) store_peer_copy(from_prev);
  peer_copy_pending_ = false;
  peer_copy_.clear();
  return apply_step(gathered_, m, state_);
}

void Job::checkpoint_if_due(const StepOutcome& out) {
  // A step whose gradient exploded (non-finite, or a norm 1,000x the running mean: the
  // mark of silent corruption) is not saved, so recovery restores a state from before
  // the corruption instead of the corrupted one. The decision uses the global gradient
  // norm, identical on every rank.
  const bool exploded =
      !std::isfinite(out.grad_norm) ||
      (grad_norm_mean_ > 0 && out.grad_norm > kExplodedGradRatio * grad_norm_mean_);
  if (!exploded)
    grad_norm_mean_ =
        grad_norm_mean_ == 0 ? out.grad_norm : 0.9 * grad_norm_mean_ + 0.1 * out.grad_norm;
  if (state_.step % opt_.ckpt_every != 0) return;
  if (exploded || !all_finite(state_.weights) || !all_finite(state_.momentum)) {
    // Same decision on every rank (identical state), so the peer exchange stays in lockstep.
    if (!warned_nonfinite_) {
      std::fprintf(stderr,
                   "faultline-trainjob: rank %d: state not finite or gradient exploded, skipping "
                   "checkpoints\n",
                   opt_.rank);
      warned_nonfinite_ = true;
    }
    return;
  }
  std::string bytes;
  if (store_) {
    std::string error;
    auto written = store_->write_own(state_, kKeepCheckpoints, &error);
    if (!written) fatal("checkpoint write failed: " + error);
    bytes = std::move(*written);
    checkpoint_step_ = state_.step;
    reporter_.checkpoint(opt_.rank, state_.step);
  }
  // The copy for the next rank goes out with the next step's all-gather (an
  // asynchronous backup, as in-memory checkpointing does), or at the end of the run.
  peer_copy_ = std::move(bytes);
  peer_copy_pending_ = true;
}

void Job::flush_peer_copy() {
  if (!peer_copy_pending_ || group_->world_size() == 1) return;
  std::string from_prev;
  const auto st = group_->shift(peer_copy_, &from_prev, collective_deadline());
  if (!st.ok) fatal("collective: peer checkpoint: " + st.error);
  store_peer_copy(from_prev);
  peer_copy_pending_ = false;
  peer_copy_.clear();
}

void Job::store_peer_copy(const std::string& from_prev) {
  const int prev = (opt_.rank + opt_.world_size - 1) % opt_.world_size;
  std::string error;
  if (store_ && !from_prev.empty() &&
      !store_->write_peer(prev, from_prev, kKeepCheckpoints, &error)) {
    std::fprintf(stderr, "faultline-trainjob: rank %d: peer copy not stored: %s\n", opt_.rank,
                 error.c_str());
  }
}

int Job::train() {
  join_group(rendezvous_deadline());
  restore(/*write_back=*/true);
  // The kinds it takes: none without a fault file (the agent then refuses every directive at
  // once instead of waiting for an acknowledgement that cannot come).
  reporter_.started(opt_.rank, state_.step, restored_from_, opt_.version,
                    opt_.fault_file.empty()
                        ? std::vector<std::string>{}
                        : std::vector<std::string>{"crash", "hang", "nan", "slow", "sdc"});
  int loss_fd = -1;
  if (opt_.rank == 0 && !opt_.loss_log.empty()) {
    loss_fd = ::open(opt_.loss_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (loss_fd < 0) fatal("cannot open loss log " + opt_.loss_log + ": " + std::strerror(errno));
  }
  const bool bad_version = opt_.version.find("bad") != std::string::npos;
  while (opt_.steps == 0 || state_.step < opt_.steps) {
    const std::int64_t step = state_.step + 1;
    fire_one_shot_faults();
    if (bad_version && step == kBadVersionCrashStep) fatal(std::string(kBadVersionSignature));
    if (step == opt_.crash_at && opt_.rank == opt_.world_size - 1)
      fatal(std::string(kCrashAtSignature));
    const auto t0 = Clock::now();
    const StepOutcome out = run_step();
    if (loss_fd >= 0) {
      char line[64];
      const int n =
          std::snprintf(line, sizeof line, "%lld %.17g\n", static_cast<long long>(step), out.loss);
      if (::write(loss_fd, line, static_cast<std::size_t>(n)) != n) {
        fatal("cannot write loss log " + opt_.loss_log);
      }
    }
    // Checkpoint before pacing: a rank frozen while it paces has finished every collective
    // of its step, so all healthy ranks end up waiting in the same one (the next
    // all-gather) and stack aggregation sees the frozen rank alone as the outlier.
    checkpoint_if_due(out);
    pace_step(t0 + std::chrono::milliseconds(opt_.step_ms));
    reporter_.step(opt_.rank, step, out.loss, out.grad_norm, seconds_since(t0), checkpoint_step_);
  }
  flush_peer_copy();
  if (loss_fd >= 0) ::close(loss_fd);
  return 0;
}

int Job::replay() {
  join_group(rendezvous_deadline());
  restore(/*write_back=*/false);
  const std::int64_t from = state_.step;
  for (std::int64_t k = 0; k < opt_.steps; ++k) {
    faults_.poll();
    run_step();
  }
  if (opt_.rank == 0) {
    const nlohmann::json j{{"replay", true},
                           {"from_step", from},
                           {"steps", opt_.steps},
                           {"world_size", opt_.world_size},
                           {"hash", state_hash(state_)}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

int Job::probe_bitwise() {
  CommStatus st;
  GroupConfig solo;
  group_ = Group::rendezvous(solo, Clock::now(), &st);
  state_ = init_state(opt_.seed, shape_);
  for (std::int64_t k = 0; k < opt_.steps; ++k) {
    faults_.poll();
    run_step();
  }
  const nlohmann::json j{{"probe", "bitwise"}, {"hash", state_hash(state_)}, {"steps", opt_.steps}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int Job::probe_allgather() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(opt_.deadline_ms);
  auto result = [&](bool ok, double gbps, const std::string& error, double seconds = 0) {
    nlohmann::json j{
        {"probe", "allgather"}, {"ok", ok}, {"rank", opt_.rank}, {"world_size", opt_.world_size}};
    if (ok) j["gbps"] = gbps;
    if (ok) j["seconds"] = seconds;  // one timed all-gather, on average
    if (!ok) j["error"] = error;
    std::printf("%s\n", j.dump().c_str());
    return ok ? 0 : 1;
  };
  GroupConfig cfg;
  cfg.rank = opt_.rank;
  cfg.world_size = opt_.world_size;
  cfg.master_addr = opt_.master_addr;
  cfg.master_port = opt_.master_port;
  cfg.host_addr = opt_.host_addr;
  cfg.key = opt_.rendezvous_key;
  cfg.gen = opt_.gen;
  CommStatus st;
  group_ = Group::rendezvous(cfg, deadline, &st);
  if (!group_) return result(false, 0, st.error);
  const int w = opt_.world_size;
  const std::size_t words = static_cast<std::size_t>(opt_.probe_mib) << 17;  // 8-byte words
  std::vector<std::uint64_t> buf(words * w);
  constexpr int kIterations = 4;  // the first one warms up and is not timed
  double timed_s = 0;
  for (int it = 0; it < kIterations; ++it) {
    std::fill(buf.begin(), buf.end(), 0);
    for (std::size_t i = 0; i < words; ++i) {
      buf[opt_.rank * words + i] = counter_hash(opt_.rank, it, i);
    }
    const auto t0 = Clock::now();
    st = group_->all_gather(std::as_writable_bytes(std::span<std::uint64_t>(buf)),
                            words * sizeof(std::uint64_t), deadline);
    if (it > 0) timed_s += seconds_since(t0);
    if (!st.ok) return result(false, 0, st.error);
    for (int r = 0; r < w; ++r) {
      for (std::size_t i = 0; i < words; ++i) {
        if (buf[r * words + i] != counter_hash(r, it, i)) {
          return result(false, 0,
                        "mismatch in the block of rank " + std::to_string(r) + " at byte " +
                            std::to_string(i * 8) + ", iteration " + std::to_string(it));
        }
      }
    }
  }
  const double bits = 8.0 * words * sizeof(std::uint64_t) * (w - 1) * (kIterations - 1);
  return result(true, timed_s > 0 ? bits / timed_s / 1e9 : 0, "", timed_s / (kIterations - 1));
}

}  // namespace

std::pair<int, int> microbatch_range(int rank, int world_size, int microbatches) {
  const int per = microbatches / world_size;
  return {rank * per, (rank + 1) * per};
}

void corrupt_gradient(std::span<double> gradient, std::int64_t step) {
  if (gradient.empty()) return;
  const std::size_t n = gradient.size();
  std::size_t idx = splitmix64(static_cast<std::uint64_t>(step) ^ 0x5DC5DC5DCull) % n;
  for (std::size_t k = 0; k < n && !std::isnormal(gradient[idx]); ++k) idx = (idx + 1) % n;
  // The top exponent bit: |x| < 2 becomes astronomically large, the corruption that
  // makes a training run diverge (ByteRobust catches SDC by NaN or a loss jump).
  auto bits = std::bit_cast<std::uint64_t>(gradient[idx]);
  bits ^= std::uint64_t{1} << 62;
  gradient[idx] = std::bit_cast<double>(bits);
}

__attribute__((noinline)) void pace_step(std::chrono::steady_clock::time_point until) {
  std::this_thread::sleep_until(until);
}

__attribute__((noinline)) void slow_compute(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

int run_job(const Options& options) {
  Job job(options);
  try {
    switch (options.mode) {
      case Mode::kTrain:
        return job.train();
      case Mode::kReplay:
        return job.replay();
      case Mode::kProbeBitwise:
        return job.probe_bitwise();
      case Mode::kProbeAllgather:
        return job.probe_allgather();
    }
  } catch (const Fatal& f) {
    job.reporter().fatal(options.rank, f.signature);
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", f.signature.c_str());
    std::fflush(stderr);
    return 1;
  }
  return 1;
}

int trainjob_main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead agent or peer shows up as EPIPE, handled where it occurs
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto parsed = parse_options(args, [](const char* name) { return std::getenv(name); });
  if (!parsed.options) {
    std::fputs((parsed.message + (parsed.message.ends_with('\n') ? "" : "\n")).c_str(),
               parsed.exit_code == 0 ? stdout : stderr);
    return parsed.exit_code;
  }
  return run_job(*parsed.options);
}

}  // namespace faultline::live::trainjob
