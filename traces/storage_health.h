// How writing a file stands after failures (a full disk, an I/O error): what the live
// event log's writer (eventlog/event_log.h) and the live controller's journal
// (realexec/controller/journal.h) report, and what `faultline live status` shows as "storage".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace faultline::traces {

// An outage begins at the first failed write and ends when everything that waited has
// been written (for the journal: at the next save that works).
struct StorageHealth {
  bool failing = false;             // an outage is under way
  std::uint64_t outages = 0;        // outages begun so far (the current one included)
  std::int64_t since_unix_ms = 0;   // wall clock of the current (or last) outage's first failure
  std::string last_error;           // "PATH: strerror text" of the latest failure
  std::uint64_t failed_writes = 0;  // failed attempts, all outages (a retried record counts again)
  std::size_t pending = 0;          // records waiting in the backlog
  std::uint64_t lost = 0;           // records dropped because the backlog was full, all outages
  std::uint64_t written_late = 0;   // current (or last) outage: records written from the backlog
  std::uint64_t outage_lost = 0;    // current (or last) outage: records dropped

  // A failed attempt ("PATH: strerror text"); the first of an outage begins it.
  void failed(std::string error) {
    ++failed_writes;
    last_error = std::move(error);
    if (failing) return;
    failing = true;
    ++outages;
    since_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    written_late = 0;
    outage_lost = 0;
  }
};

}  // namespace faultline::traces
