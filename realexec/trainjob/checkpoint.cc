#include "realexec/trainjob/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "realexec/trainjob/rng.h"

namespace faultline::live::trainjob {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'F', 'L', 'T', 'J', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kFormatVersion = 1;
// magic, version, writer rank, step, seed, 4 shape ints, microbatches, param count.
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 4 * 4 + 4 + 8;

void put(std::string& s, const void* p, std::size_t n) { s.append(static_cast<const char*>(p), n); }
template <typename T>
void put_value(std::string& s, T v) {
  put(s, &v, sizeof v);
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  void get_doubles(std::vector<double>& out, std::size_t n) {
    out.resize(n);
    std::memcpy(out.data(), b_.data() + pos_, n * sizeof(double));
    pos_ += n * sizeof(double);
  }

 private:
  std::string_view b_;
  std::size_t pos_ = 0;
};

std::optional<Checkpoint> reject(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool is_temp_name(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

}  // namespace

std::string serialize_checkpoint(const Checkpoint& ckpt) {
  const auto& m = ckpt.meta;
  const auto& st = ckpt.state;
  const std::size_t n = st.weights.size();
  std::string s;
  s.reserve(kHeaderBytes + 2 * n * sizeof(double) + 8);
  put(s, kMagic, sizeof kMagic);
  put_value<std::uint32_t>(s, kFormatVersion);
  put_value<std::int32_t>(s, m.writer_rank);
  put_value<std::int64_t>(s, st.step);
  put_value<std::uint64_t>(s, m.seed);
  put_value<std::int32_t>(s, m.shape.input_dim);
  put_value<std::int32_t>(s, m.shape.hidden);
  put_value<std::int32_t>(s, m.shape.output_dim);
  put_value<std::int32_t>(s, m.shape.samples_per_microbatch);
  put_value<std::int32_t>(s, m.microbatches);
  put_value<std::uint64_t>(s, n);
  put(s, st.weights.data(), n * sizeof(double));
  put(s, st.momentum.data(), n * sizeof(double));
  Fnv1a h;
  h.update(s.data(), s.size());
  put_value<std::uint64_t>(s, h.value());
  return s;
}

std::optional<Checkpoint> parse_checkpoint(std::string_view bytes, std::string* why) {
  if (bytes.size() < kHeaderBytes + 8) return reject(why, "truncated header");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return reject(why, "bad magic");
  Reader r(bytes.substr(sizeof kMagic));
  if (r.get<std::uint32_t>() != kFormatVersion) return reject(why, "unknown format version");
  Checkpoint c;
  c.meta.writer_rank = r.get<std::int32_t>();
  c.state.step = r.get<std::int64_t>();
  c.meta.seed = r.get<std::uint64_t>();
  c.meta.shape.input_dim = r.get<std::int32_t>();
  c.meta.shape.hidden = r.get<std::int32_t>();
  c.meta.shape.output_dim = r.get<std::int32_t>();
  c.meta.shape.samples_per_microbatch = r.get<std::int32_t>();
  c.meta.microbatches = r.get<std::int32_t>();
  const auto n = r.get<std::uint64_t>();
  const auto& sh = c.meta.shape;
  if (sh.input_dim <= 0 || sh.hidden <= 0 || sh.output_dim <= 0 || sh.input_dim > (1 << 20) ||
      sh.hidden > (1 << 20) || sh.output_dim > (1 << 20) || n != sh.param_count()) {
    return reject(why, "inconsistent model shape");
  }
  if (c.state.step < 0) return reject(why, "negative step");
  if (bytes.size() != kHeaderBytes + 2 * n * sizeof(double) + 8) {
    return reject(why, bytes.size() < kHeaderBytes + 2 * n * sizeof(double) + 8 ? "truncated"
                                                                                : "trailing bytes");
  }
  Fnv1a h;
  h.update(bytes.data(), bytes.size() - 8);
  std::uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (stored != h.value()) return reject(why, "checksum mismatch");
  r.get_doubles(c.state.weights, n);
  r.get_doubles(c.state.momentum, n);
  return c;
}

bool compatible(const CheckpointMeta& a, const CheckpointMeta& b) {
  return a.seed == b.seed && a.microbatches == b.microbatches &&
         a.shape.input_dim == b.shape.input_dim && a.shape.hidden == b.shape.hidden &&
         a.shape.output_dim == b.shape.output_dim &&
         a.shape.samples_per_microbatch == b.shape.samples_per_microbatch;
}

std::string checkpoint_file_name(std::int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "step-%010lld.ckpt", static_cast<long long>(step));
  return buf;
}

std::optional<std::int64_t> step_of_file_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const auto digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

std::string own_checkpoint_dir(const std::string& root, int rank) {
  return root + "/rank" + std::to_string(rank);
}

std::string peer_checkpoint_dir(const std::string& root, int rank) {
  return root + "/peer/rank" + std::to_string(rank);
}

bool write_file_atomic(const std::string& path, std::string_view bytes, std::string* error) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) {
    *error = "cannot create " + target.parent_path().string() + ": " + ec.message();
    return false;
  }
  const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp." +
                                                   std::to_string(::getpid())))
                              .string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = "cannot write " + tmp + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    *error = "cannot fsync " + tmp + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  fsync_dir(target.has_parent_path() ? target.parent_path().string() : ".");
  return true;
}

std::optional<std::string> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<StoredCheckpoint> list_checkpoints(const std::string& dir, const CheckpointMeta* expect,
                                               std::vector<std::string>* rejected) {
  std::vector<StoredCheckpoint> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto step = step_of_file_name(name);
    if (!step) continue;
    const auto bytes = read_whole_file(it->path().string());
    std::string why = "unreadable";
    std::optional<Checkpoint> ckpt;
    if (bytes) ckpt = parse_checkpoint(*bytes, &why);
    if (ckpt && ckpt->state.step != *step) {
      ckpt.reset();
      why = "step in file does not match its name";
    }
    if (!ckpt) {
      if (rejected) rejected->push_back(it->path().string() + ": " + why);
      continue;
    }
    if (expect && !compatible(ckpt->meta, *expect)) continue;
    out.push_back(StoredCheckpoint{*step, it->path().string()});
  }
  std::sort(out.begin(), out.end(),
            [](const StoredCheckpoint& a, const StoredCheckpoint& b) { return a.step > b.step; });
  return out;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep) {
  std::vector<std::string> removed;
  const auto complete = list_checkpoints(dir);
  if (complete.empty()) return removed;  // nothing complete: keep everything (no restore point)
  const std::int64_t newest = complete.front().step;
  std::set<std::string> kept;
  for (std::size_t i = 0; i < complete.size(); ++i) {
    if (static_cast<int>(i) < std::max(keep, 1)) kept.insert(complete[i].path);
  }
  std::error_code ec;
  std::vector<fs::path> victims;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string path = it->path().string();
    if (is_temp_name(name)) {
      // A temporary file of a live writer belongs to this rank's own process: only stale ones
      // (another pid) are removed.
      if (name.substr(name.rfind('.') + 1) != std::to_string(::getpid())) victims.push_back(path);
      continue;
    }
    const auto step = step_of_file_name(name);
    if (!step || kept.count(path)) continue;
    // Complete but beyond the retention window, or corrupt and older than the newest complete.
    if (*step <= newest) victims.push_back(path);
  }
  for (const auto& v : victims) {
    if (fs::remove(v, ec)) removed.push_back(v.string());
  }
  if (!removed.empty()) fsync_dir(dir);
  return removed;
}

CheckpointStore::CheckpointStore(std::string root, int rank, CheckpointMeta meta)
    : root_(std::move(root)), rank_(rank), meta_(meta) {
  meta_.writer_rank = rank;
}

std::vector<CheckpointStore::Held> CheckpointStore::inventory() const {
  std::vector<Held> out;
  const std::string own = own_checkpoint_dir(root_, rank_);
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const std::string& parent : {root_, root_ + "/peer"}) {
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.starts_with("rank") && it->is_directory(ec)) dirs.push_back(it->path().string());
    }
  }
  for (const auto& d : dirs) {
    const bool is_own = fs::equivalent(d, own, ec);
    for (const auto& c : list_checkpoints(d, &meta_)) out.push_back(Held{c.step, c.path, is_own});
  }
  std::sort(out.begin(), out.end(), [](const Held& a, const Held& b) {
    if (a.step != b.step) return a.step > b.step;
    if (a.own != b.own) return a.own;
    return a.path < b.path;
  });
  return out;
}

std::optional<std::string> CheckpointStore::write_own(const TrainState& state, int keep,
                                                      std::string* error) {
  std::string bytes = serialize_checkpoint(Checkpoint{meta_, state});
  const std::string dir = own_checkpoint_dir(root_, rank_);
  if (!write_file_atomic(dir + "/" + checkpoint_file_name(state.step), bytes, error)) {
    return std::nullopt;
  }
  prune_checkpoints(dir, keep);
  return bytes;
}

bool CheckpointStore::write_peer(int from_rank, std::string_view bytes, int keep,
                                 std::string* error) {
  std::string why;
  const auto ckpt = parse_checkpoint(bytes, &why);
  if (!ckpt) {
    *error = "peer checkpoint from rank " + std::to_string(from_rank) + " rejected: " + why;
    return false;
  }
  const std::string dir = peer_checkpoint_dir(root_, from_rank);
  if (!write_file_atomic(dir + "/" + checkpoint_file_name(ckpt->state.step), bytes, error)) {
    return false;
  }
  prune_checkpoints(dir, keep);
  return true;
}

bool CheckpointStore::adopt_as_own(std::string_view bytes, int keep, std::string* error) {
  std::string why;
  auto ckpt = parse_checkpoint(bytes, &why);
  if (!ckpt) {
    *error = "checkpoint rejected: " + why;
    return false;
  }
  ckpt->meta.writer_rank = rank_;
  return write_own(ckpt->state, keep, error).has_value();
}

}  // namespace faultline::live::trainjob
