// Checkpoint files of faultline-trainjob: round trip, rejection of torn and corrupt files,
// retention that never removes the newest complete checkpoint.

#include "realexec/trainjob/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace faultline::live::trainjob {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "trainjob-ckpt-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CheckpointMeta small_meta() {
  CheckpointMeta m;
  m.seed = 7;
  m.shape.hidden = 8;
  m.microbatches = 4;
  return m;
}

// A state with distinctive, non-trivial bits in every element.
TrainState sample_state(const CheckpointMeta& m, std::int64_t step) {
  TrainState s = init_state(m.seed, m.shape);
  s.step = step;
  for (std::size_t i = 0; i < s.momentum.size(); ++i) s.momentum[i] = 1e-3 * i - 0.37 / (i + 1);
  s.weights[0] = -0.0;
  s.weights[1] = 5e-324;  // subnormal: must survive bit for bit
  return s;
}

void write_raw(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(TrainjobCheckpoint, RoundTripIsBitExact) {
  const auto meta = small_meta();
  const TrainState s = sample_state(meta, 42);
  const std::string bytes = serialize_checkpoint(Checkpoint{meta, s});
  std::string why;
  const auto back = parse_checkpoint(bytes, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->state.step, 42);
  EXPECT_TRUE(compatible(back->meta, meta));
  ASSERT_EQ(back->state.weights.size(), s.weights.size());
  EXPECT_EQ(0, std::memcmp(back->state.weights.data(), s.weights.data(),
                           s.weights.size() * sizeof(double)));
  EXPECT_EQ(0, std::memcmp(back->state.momentum.data(), s.momentum.data(),
                           s.momentum.size() * sizeof(double)));
  EXPECT_TRUE(std::signbit(back->state.weights[0]));
}

TEST(TrainjobCheckpoint, StoreWritesReadsAndListsNewestFirst) {
  TempDir dir;
  const auto meta = small_meta();
  CheckpointStore store(dir.path(), 2, meta);
  std::string error;
  for (std::int64_t step : {5, 10}) {
    ASSERT_TRUE(store.write_own(sample_state(meta, step), 3, &error)) << error;
  }
  const auto inv = store.inventory();
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0].step, 10);
  EXPECT_TRUE(inv[0].own);
  EXPECT_EQ(inv[0].path, own_checkpoint_dir(dir.path(), 2) + "/" + checkpoint_file_name(10));
  const auto bytes = read_whole_file(inv[0].path);
  ASSERT_TRUE(bytes);
  const auto ckpt = parse_checkpoint(*bytes);
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->state.weights, sample_state(meta, 10).weights);
  EXPECT_EQ(ckpt->meta.writer_rank, 2);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(own_checkpoint_dir(dir.path(), 2))) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST(TrainjobCheckpoint, PeerCopiesAreListedButNotOwn) {
  TempDir dir;
  const auto meta = small_meta();
  CheckpointStore rank3(dir.path(), 3, meta);
  const std::string bytes = serialize_checkpoint(Checkpoint{meta, sample_state(meta, 20)});
  std::string error;
  ASSERT_TRUE(rank3.write_peer(2, bytes, 3, &error)) << error;
  ASSERT_TRUE(fs::exists(peer_checkpoint_dir(dir.path(), 2) + "/" + checkpoint_file_name(20)));
  const auto inv = rank3.inventory();
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0].step, 20);
  EXPECT_FALSE(inv[0].own);
  // Garbage from a peer is refused instead of stored.
  EXPECT_FALSE(rank3.write_peer(2, bytes.substr(0, bytes.size() / 2), 3, &error));
}

TEST(TrainjobCheckpoint, TornAndCorruptFilesAreRejected) {
  const auto meta = small_meta();
  const std::string good = serialize_checkpoint(Checkpoint{meta, sample_state(meta, 10)});
  ASSERT_TRUE(parse_checkpoint(good));
  // Every truncation is rejected.
  for (std::size_t n = 0; n < good.size(); n += 7) {
    EXPECT_FALSE(parse_checkpoint(std::string_view(good).substr(0, n))) << "length " << n;
  }
  EXPECT_FALSE(parse_checkpoint(good + "x"));
  // Any single flipped bit is caught (header, payload or checksum).
  for (std::size_t pos : {std::size_t{0}, std::size_t{20}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    std::string why;
    EXPECT_FALSE(parse_checkpoint(bad, &why)) << "byte " << pos;
  }

  // On disk: a torn newest file and a corrupt one are skipped, the older good one is used.
  TempDir dir;
  CheckpointStore store(dir.path(), 0, meta);
  std::string error;
  ASSERT_TRUE(store.write_own(sample_state(meta, 10), 3, &error)) << error;
  const std::string own = own_checkpoint_dir(dir.path(), 0);
  const std::string at15 = serialize_checkpoint(Checkpoint{meta, sample_state(meta, 15)});
  write_raw(own + "/" + checkpoint_file_name(15), at15.substr(0, at15.size() - 9));
  std::string flipped = serialize_checkpoint(Checkpoint{meta, sample_state(meta, 20)});
  flipped[100] ^= 1;
  write_raw(own + "/" + checkpoint_file_name(20), flipped);
  // A good file under the wrong name (step 10's bytes named 25) is not trusted either.
  write_raw(own + "/" + checkpoint_file_name(25), *read_whole_file(own + "/step-0000000010.ckpt"));
  std::vector<std::string> rejected;
  const auto listed = list_checkpoints(own, &meta, &rejected);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].step, 10);
  EXPECT_EQ(rejected.size(), 3u);
  ASSERT_FALSE(store.inventory().empty());
  EXPECT_EQ(store.inventory()[0].step, 10);
}

TEST(TrainjobCheckpoint, IncompatibleCheckpointsAreNotOffered) {
  TempDir dir;
  auto meta = small_meta();
  CheckpointStore writer(dir.path(), 0, meta);
  std::string error;
  ASSERT_TRUE(writer.write_own(sample_state(meta, 10), 3, &error));
  auto other_seed = meta;
  other_seed.seed = 8;
  EXPECT_TRUE(CheckpointStore(dir.path(), 0, other_seed).inventory().empty());
  auto other_mb = meta;
  other_mb.microbatches = 8;
  EXPECT_TRUE(CheckpointStore(dir.path(), 0, other_mb).inventory().empty());
  EXPECT_EQ(CheckpointStore(dir.path(), 1, meta).inventory().size(), 1u);
}

TEST(TrainjobCheckpoint, RetentionKeepsNewestThreeComplete) {
  TempDir dir;
  const auto meta = small_meta();
  CheckpointStore store(dir.path(), 0, meta);
  std::string error;
  for (std::int64_t step = 1; step <= 5; ++step) {
    ASSERT_TRUE(store.write_own(sample_state(meta, step), 3, &error)) << error;
  }
  const std::string own = own_checkpoint_dir(dir.path(), 0);
  std::vector<std::int64_t> steps;
  for (const auto& c : list_checkpoints(own)) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{5, 4, 3}));
}

TEST(TrainjobCheckpoint, RetentionNeverDeletesTheNewestComplete) {
  TempDir dir;
  const auto meta = small_meta();
  const std::string own = own_checkpoint_dir(dir.path(), 0);
  for (std::int64_t step : {3, 4}) {
    write_raw(own + "/" + checkpoint_file_name(step),
              serialize_checkpoint(Checkpoint{meta, sample_state(meta, step)}));
  }
  // Newer files that are not complete: a torn one (crash mid-write of a non-atomic copy), and
  // temporary files of a dead writer.
  const std::string at5 = serialize_checkpoint(Checkpoint{meta, sample_state(meta, 5)});
  write_raw(own + "/" + checkpoint_file_name(5), at5.substr(0, 64));
  write_raw(own + "/.step-0000000006.ckpt.tmp.999999", at5);
  const std::string corrupt_old = own + "/" + checkpoint_file_name(2);
  write_raw(corrupt_old, "garbage");

  const auto removed = prune_checkpoints(own, 1);
  EXPECT_TRUE(fs::exists(own + "/" + checkpoint_file_name(4)));  // newest complete
  EXPECT_FALSE(fs::exists(own + "/" + checkpoint_file_name(3)));
  EXPECT_FALSE(fs::exists(corrupt_old));
  EXPECT_FALSE(fs::exists(own + "/.step-0000000006.ckpt.tmp.999999"));
  EXPECT_EQ(removed.size(), 3u);
  // keep = 0 is treated as 1: the only restore point survives.
  prune_checkpoints(own, 0);
  EXPECT_TRUE(fs::exists(own + "/" + checkpoint_file_name(4)));

  // A directory holding only broken files loses nothing (nothing newer is complete).
  TempDir broken;
  const std::string b = own_checkpoint_dir(broken.path(), 0);
  write_raw(b + "/" + checkpoint_file_name(1), "torn");
  EXPECT_TRUE(prune_checkpoints(b, 3).empty());
  EXPECT_TRUE(fs::exists(b + "/" + checkpoint_file_name(1)));
}

TEST(TrainjobCheckpoint, FileNames) {
  EXPECT_EQ(checkpoint_file_name(10), "step-0000000010.ckpt");
  EXPECT_EQ(step_of_file_name("step-0000000010.ckpt"), 10);
  EXPECT_FALSE(step_of_file_name(".step-0000000010.ckpt.tmp.12"));
  EXPECT_FALSE(step_of_file_name("step-12a.ckpt"));
  EXPECT_FALSE(step_of_file_name("step-.ckpt"));
}

}  // namespace
}  // namespace faultline::live::trainjob
