// StorageWatch: the controller's storage seen from its event loop. Every half second (and once
// more at exit) the event log's backlog is written and a failed journal save retried; an
// outage of either is reported on stderr, one line when it begins and one when it ends (the
// event log keeps the end too, where it has its gap); and STATE_DIR/outage says, across a
// crash, that event-log records wait in memory for a failing disk (OutageMarker).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "eventlog/event_log.h"
#include "realexec/controller/journal.h"

namespace faultline::live {

class StorageWatch {
 public:
  explicit StorageWatch(std::string marker_path) : marker_(std::move(marker_path)) {}

  OutageMarker& marker() { return marker_; }
  // Records wait in memory for the event log (the newest of run time `t_s`, `log` their
  // writer's health): the marker says so; none waiting: it is cleared.
  void mark_outage(const traces::StorageHealth& log, double t_s);
  // Writes what waits (the event log's backlog, a failed journal save) and reports an outage
  // of either on stderr as it begins and as it ends; `note` gets each end, for the event log.
  void watch(traces::EventLogWriter& log, Journal& journal,
             const std::function<void(const std::string&)>& note);

 private:
  struct Outages {
    std::uint64_t reported = 0;  // outages reported so far
    bool failing = false;        // an outage was reported and has not ended
  };
  OutageMarker marker_;          // STATE_DIR/outage: records waiting in memory, across a crash
  double pending_first_t_ = -1;  // run time of the oldest record waiting, -1: none
  double pending_last_t_ = 0;
  Outages log_, journal_;
};

}  // namespace faultline::live
