// Internals shared by the agent's source files (agent.cc: connection, dispatch and host
// inspection; agent_ranks.cc: the training ranks; agent_probes.cc: stop-time probes,
// stack capture and replays; agent_inject.cc: fault injection). Not part of the agent's
// interface.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "realexec/agent/agent.h"
#include "realexec/net/messages.h"

namespace faultline::live::agent_detail {

using nlohmann::json;

// The field reader and limits are live mode's one codec (realexec/net/messages.h).
using live::bad;
using live::BadMessage;
using live::kMaxReportLine;
using live::kMaxReq;
using live::kMaxSignature;
using live::need_hex_blob;
using live::need_host;
using live::need_int;
using live::need_string;
using live::opt_bool;
using live::opt_int;
using live::opt_string;
using live::printable;

constexpr std::size_t kMaxStderrLine = 4096;
constexpr std::int64_t kMaxDeadlineMs = 3600 * 1000;
constexpr int kMaxLocalRanks = 1024;
constexpr std::size_t kMaxDirective = 200;
// How long an injected directive waits for the job's acknowledgement when the request does not
// say (the controller sends deadline_ms), and how many confirmed ids and cancelled requests the
// agent remembers.
constexpr std::int64_t kDefaultAckDeadlineMs = 10000;
constexpr std::size_t kRememberedFaults = 256;
constexpr std::size_t kMaxChildren = 64;  // probes, replays, debuggers, `ip` at once
// Step reports a rank may send the controller: a burst, then this many a second (a job
// reporting faster has its steps coalesced to the newest; the controller needs progress and
// step times, not every step of a 70k-steps-a-second loop).
constexpr double kStepReportBurst = 200;
constexpr double kStepReportsPerS = 100;
// Unsent output to the controller above which droppable messages (reports, alerts) are
// dropped and counted: back-pressure never grows the queue to the point where the
// connection itself is dropped (wire.h, kMaxQueuedBytes).
constexpr std::size_t kDropAboveBytes = 4 << 20;

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline std::string trim(const std::string& s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Whether a stderr line reads like the reason a rank failed.
inline bool looks_like_error(const std::string& line) {
  static const char* const kWords[] = {"error",
                                       "exception",
                                       "fatal",
                                       "abort",
                                       "panic",
                                       "terminate called",
                                       "segmentation fault",
                                       "assert",
                                       "failed",
                                       "traceback",
                                       "timed out",
                                       "timeout",
                                       "killed",
                                       "core dumped"};
  const std::string low = lower(line);
  for (const char* w : kWords) {
    if (low.find(w) != std::string::npos) return true;
  }
  return false;
}

inline std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// The last line of `text` that parses as a JSON object, or null.
inline json last_json_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = text.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    std::string line = trim(text.substr(start, end - start));
    if (!line.empty() && line[0] == '{') {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_object()) return j;
    }
    if (start == 0) break;
    end = start - 1;
  }
  return nullptr;
}

inline std::string last_line(const std::string& text) {
  std::string last;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::string line =
        trim(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (!line.empty()) last = line;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (last.size() > kMaxSignature) last.resize(kMaxSignature);
  return last;
}

inline void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace faultline::live::agent_detail

namespace faultline::live {

struct Agent::Rank {
  int rank = 0;
  int local_rank = 0;
  std::int64_t gen = 0;
  pid_t pid = -1;
  int report_fd = -1;  // our end of the socketpair (fd 3 in the rank)
  int stderr_fd = -1;  // read end of the rank's stderr pipe
  int log_fd = -1;     // logs/rank<r>.gen<g>.log, where stderr is copied
  // Our end of the rank's FAULTLINE_STACK_FD (fd 4 in the rank; -1: none), and the signal its
  // `started` report said it dumps its Python stacks on (0: none said; captured with gdb).
  int stack_fd = -1;
  int stack_signal = 0;
  std::string report_buf;
  bool report_skipping = false;  // inside an over-long report line
  int bad_reports = 0;
  std::string stderr_buf;
  std::string error_line;       // last stderr line that looked like an error
  std::string fatal_signature;  // from a `fatal` report
  bool killed_by_agent = false;
  // In place (recovery=flash): it reported "holding" (a peer died; it keeps its process and
  // state and waits for a re-form directive), until the directive is written.
  bool holding = false;
  // From its `started` report: the fault-file kinds it takes and acknowledges (nullopt until
  // it said; an empty set when its report named none).
  std::optional<std::set<std::string>> takes_faults;
  // Step reports beyond a token bucket (kStepReportBurst, kStepReportsPerS) are coalesced:
  // the newest waits in pending_step and goes out at the next refill, the ones it replaced
  // are counted. Every other report goes at once, after the pending step.
  double step_tokens = 0;
  Instant tokens_at{};
  std::optional<nlohmann::json> pending_step;
  std::uint64_t coalesced = 0;
  std::uint64_t flush_timer = 0;
};

struct Agent::RelayedProbe {
  std::int64_t req = 0;
  std::uint64_t epoch = 0;  // the connection of the request: blobs go to it only
  std::int64_t rank = 0;
  std::string path;  // the probe's rendezvous file, fresh for this run
  bool running = true;
  bool published = false;   // rank 0: its blob went to the controller (or cannot)
  bool received = false;    // other ranks: the controller's relay was written
  std::uint64_t timer = 0;  // rank 0: polling for the file
};

struct Agent::PendingFault {
  std::string id;
  std::string kind;  // crash, hang, nan, slow, sdc
  std::string line;  // the directive as written to the fault file
  int local_rank = 0;
  std::int64_t req = 0;
  std::uint64_t epoch = 0;  // the connection of the request: the reply goes to it only
  Instant started;
  Duration deadline;
  std::uint64_t timer = 0;
};

struct Agent::PendingKill {
  std::int64_t req = 0;
  std::uint64_t epoch = 0;
  Instant started;
  std::uint64_t timer = 0;
  bool shutdown = false;
};

}  // namespace faultline::live
