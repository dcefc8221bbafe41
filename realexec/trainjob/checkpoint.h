#pragma once

// Checkpoints of the reference training job: the file format, atomic writes and the on-disk
// layout of one machine's checkpoint directory.
//
// A checkpoint is one self-describing file: a header (format, writer rank, step, seed, model
// shape, micro-batches), the weights and momentum as raw little-endian doubles, and a trailing
// FNV-1a checksum over everything before it. A file is complete only once it has been written
// to a temporary name, fsynced and renamed into place; a file that is short, has the wrong magic
// or a bad checksum (torn by a crash, or corrupted on disk) is never used.
//
// Layout under FAULTLINE_CKPT_DIR (shared by the ranks of one machine):
//   rank<R>/step-<step>.ckpt        rank R's own checkpoints
//   peer/rank<R>/step-<step>.ckpt   copies of rank R's checkpoints that rank R sent to the next
//                                   rank in the ring, which lives on this machine
// Data parallelism keeps every rank's state identical, so any complete checkpoint of a step is
// a valid restore point for every rank and for any world size.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "realexec/trainjob/model.h"

namespace faultline::live::trainjob {

// The job parameters a checkpoint must match to be resumed by this run.
struct CheckpointMeta {
  std::uint64_t seed = 1;
  ModelShape shape;
  int microbatches = 8;
  int writer_rank = 0;  // informational only: not part of compatibility
};

struct Checkpoint {
  CheckpointMeta meta;
  TrainState state;
};

// The file bytes of `ckpt` (header, state, checksum).
std::string serialize_checkpoint(const Checkpoint& ckpt);

// Parses and verifies `bytes`; nullopt with a reason in *why (when non-null) if the bytes are
// short, long, of another format, inconsistent with their shape, or fail the checksum.
std::optional<Checkpoint> parse_checkpoint(std::string_view bytes, std::string* why = nullptr);

// True when a checkpoint written under `a` can resume a run configured as `b`.
bool compatible(const CheckpointMeta& a, const CheckpointMeta& b);

// "step-0000000010.ckpt"; and the step encoded in such a name (nullopt for any other name,
// temporary files included).
std::string checkpoint_file_name(std::int64_t step);
std::optional<std::int64_t> step_of_file_name(std::string_view name);

std::string own_checkpoint_dir(const std::string& root, int rank);
std::string peer_checkpoint_dir(const std::string& root, int rank);

// Writes `bytes` to `path` atomically and durably: temporary file in the same directory, fsync,
// rename, fsync of the directory. Creates missing directories. False with *error on failure
// (the temporary file is removed; an existing file at `path` is left untouched).
bool write_file_atomic(const std::string& path, std::string_view bytes, std::string* error);

// The whole content of `path`, or nullopt when it cannot be read.
std::optional<std::string> read_whole_file(const std::string& path);

struct StoredCheckpoint {
  std::int64_t step = 0;
  std::string path;
};

// The complete, verified checkpoints in one directory (one rank's own or peer directory),
// newest first. With `expect`, checkpoints incompatible with it are left out. Files that fail
// verification are skipped (and named in *rejected when non-null).
std::vector<StoredCheckpoint> list_checkpoints(const std::string& dir,
                                               const CheckpointMeta* expect = nullptr,
                                               std::vector<std::string>* rejected = nullptr);

// Retention for one directory: keeps the newest `keep` complete checkpoints and removes older
// complete ones, corrupt files older than the newest complete one, and temporary files left by
// dead writers. The newest complete checkpoint is never removed, so a crash between writing and
// pruning cannot leave the directory without a restore point. Returns the removed paths.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep);

// One rank's view of its machine's checkpoint directory.
class CheckpointStore {
 public:
  CheckpointStore(std::string root, int rank, CheckpointMeta meta);

  struct Held {
    std::int64_t step = 0;
    std::string path;
    bool own = false;  // in this rank's own directory (restored_from "local")
  };
  // Every compatible complete checkpoint under the root (this rank's, other local ranks', peer
  // copies), newest step first and, within a step, this rank's own file first.
  std::vector<Held> inventory() const;

  // Writes this rank's checkpoint of `state` and prunes to the newest `keep`. Returns the bytes
  // written (to send to the peer), or nullopt with *error.
  std::optional<std::string> write_own(const TrainState& state, int keep, std::string* error);
  // Stores bytes received from rank `from_rank` as its peer copy (verified first) and prunes.
  bool write_peer(int from_rank, std::string_view bytes, int keep, std::string* error);
  // Stores verified bytes (e.g. received at restore) as this rank's own checkpoint.
  bool adopt_as_own(std::string_view bytes, int keep, std::string* error);

  const CheckpointMeta& meta() const { return meta_; }

 private:
  std::string root_;
  int rank_;
  CheckpointMeta meta_;
};

}  // namespace faultline::live::trainjob
