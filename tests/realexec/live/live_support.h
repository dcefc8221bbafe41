// What the live-mode end-to-end tests and the protocol fuzzer share: starting real
// processes, reading files, framing a message, and generating hostile messages.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace faultline::live_test {

using nlohmann::json;

// Starts `argv` in a process group of its own, stdin from /dev/null, stdout and stderr
// appended to `out_path`. Returns its pid, or -1.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, &at, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  return rc == 0 ? pid : -1;
}

// Runs `argv` to its end; its exit status (128 + N after signal N), -1 when it cannot start.
inline int run_wait(const std::vector<std::string>& argv, const std::string& out_path) {
  const pid_t pid = spawn(argv, out_path);
  if (pid < 0) return -1;
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A shell command, its output discarded; its exit status.
inline int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One frame of the wire protocol (realexec/net/wire.h): a 4-byte big-endian length, the body.
inline std::string frame(const std::string& body, std::uint32_t claimed_length) {
  std::string f(4, '\0');
  f[0] = static_cast<char>(claimed_length >> 24), f[1] = static_cast<char>(claimed_length >> 16);
  f[2] = static_cast<char>(claimed_length >> 8), f[3] = static_cast<char>(claimed_length);
  return f + body;
}
inline std::string frame(const std::string& body) {
  return frame(body, static_cast<std::uint32_t>(body.size()));
}

// A valid message with fields retyped, dropped or added (in the message, or in its nested
// "report" object): the shapes that crashed live mode in the operator's review and their
// neighbours.
inline json mutated(const json& seed, std::mt19937_64& rng) {
  static const char* keys[] = {
      "type",       "req",   "gen",     "rank",        "report",     "code",        "signal",
      "signature",  "kind",  "detail",  "ok",          "hash",       "by_rank",     "timed_out",
      "machine",    "fault", "version", "urgent",      "proto",      "role",        "token",
      "name",       "ranks", "step",    "loss",        "loss_nan",   "step_time_s", "nonce",
      "proof",      "kinds", "test",    "deadline_ms", "world_size", "master_addr", "master_port",
      "local_rank", "steps", "pid",     "probe_req",   "blob",       "rendezvous"};
  static const json values[] = {nullptr,
                                5,
                                -1,
                                0,
                                1.5,
                                1e308,
                                -0.0,
                                "x",
                                "NaN",
                                "",
                                "step",
                                "exit",
                                "report",
                                json::array(),
                                json{{"a", 1}},
                                true,
                                false,
                                std::string(3000, 'y'),
                                9007199254740993ull,
                                -9223372036854775807ll,
                                json::array({1, "2"}),
                                std::string("\xc3\x28\xff", 3),
                                "../../etc/passwd",
                                "a;rm -rf /",
                                std::string(64, 'a')};
  json m = seed;
  for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) {
    json& t = m.contains("report") && m["report"].is_object() && (rng() & 1) ? m["report"] : m;
    if (!t.is_object()) break;
    const char* k = keys[rng() % (sizeof keys / sizeof *keys)];
    if (rng() % 4 == 0)
      t.erase(k);
    else
      t[k] = values[rng() % (sizeof values / sizeof *values)];
  }
  return m;
}

}  // namespace faultline::live_test
