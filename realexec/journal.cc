#include "realexec/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace faultline::live {

namespace {
using nlohmann::json;

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

bool Journal::load(std::string* err) {
  std::ifstream in(path_);
  if (!in) {
    resumed_ = false;
    return true;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const json j = json::parse(ss.str());
    JournalState s;
    s.origin_ns = j.at("origin_ns").get<std::int64_t>();
    s.gen = j.at("gen").get<std::int64_t>();
    s.version = j.at("version").get<std::string>();
    s.good_version = j.at("good_version").get<std::string>();
    s.running = j.at("running").get<bool>();
    s.slots = j.at("slots").get<std::vector<MachineId>>();
    s.standby = j.at("standby").get<std::vector<MachineId>>();
    s.evicted = j.at("evicted").get<std::vector<MachineId>>();
    s.ckpt_every = j.at("ckpt_every").get<int>();
    s.first_step = j.at("first_step").get<std::int64_t>();
    s.last_step = j.at("last_step").get<std::int64_t>();
    s.next_action = j.at("next_action").get<std::uint64_t>();
    s.step_times = j.at("step_times").get<std::vector<double>>();
    // Added with the repair pipeline; absent in older journals.
    if (j.contains("strikes"))
      for (const auto& pr : j.at("strikes")) s.strikes[pr.at(0).get<MachineId>()] = pr.at(1).get<int>();
    if (j.contains("retired")) s.retired = j.at("retired").get<std::vector<MachineId>>();
    if (j.contains("ended_verdict")) s.ended_verdict = j.at("ended_verdict").get<std::string>();
    state_ = std::move(s);
  } catch (const std::exception& e) {
    *err = path_ + ": (journal): expected a faultline controller journal (" + e.what() + ")";
    return false;
  }
  resumed_ = true;
  return true;
}

bool Journal::save(std::string* err) {
  json j;
  j["origin_ns"] = state_.origin_ns;
  j["gen"] = state_.gen;
  j["version"] = state_.version;
  j["good_version"] = state_.good_version;
  j["running"] = state_.running;
  j["slots"] = state_.slots;
  j["standby"] = state_.standby;
  j["evicted"] = state_.evicted;
  j["ckpt_every"] = state_.ckpt_every;
  j["first_step"] = state_.first_step;
  j["last_step"] = state_.last_step;
  j["next_action"] = state_.next_action;
  j["step_times"] = state_.step_times;
  j["strikes"] = json::array();
  for (const auto& [m, n] : state_.strikes) j["strikes"].push_back({m, n});
  j["retired"] = state_.retired;
  j["ended_verdict"] = state_.ended_verdict;
  const std::string tmp = path_ + ".tmp";
  // The previous journal is replaced only by a whole, synced new one: a failure anywhere
  // before the rename leaves it as it was, and the partial temporary file is removed
  // (on a full disk it holds space the retry will need).
  auto fail = [&](const std::string& file, int e) {
    ::unlink(tmp.c_str());
    *err = file + ": " + std::strerror(e);
    health_.failed(*err);
    health_.pending = 1;
    return false;
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(tmp, errno);
  int e = 0;
  errno = 0;
  if (!write_all(fd, j.dump() + "\n") || ::fsync(fd) != 0) e = errno ? errno : EIO;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) return fail(tmp, e);
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return fail(path_, errno);
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  if (health_.failing) {
    health_.failing = false;
    health_.written_late = 1;
  }
  health_.pending = 0;
  return true;
}

}  // namespace faultline::live
