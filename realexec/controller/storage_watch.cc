#include "realexec/controller/storage_watch.h"

#include <algorithm>
#include <iostream>

#include "realexec/net/wire.h"

namespace faultline::live {

void StorageWatch::mark_outage(const traces::StorageHealth& h, double t_s) {
  if (h.pending == 0) {
    pending_first_t_ = -1;
    marker_.clear();
    return;
  }
  if (pending_first_t_ < 0) pending_first_t_ = t_s;
  pending_last_t_ = std::max(pending_last_t_, t_s);
  marker_.set(
      {h.pending, h.lost, h.since_unix_ms, pending_first_t_, pending_last_t_, h.last_error});
}

void StorageWatch::watch(traces::EventLogWriter& log, Journal& journal,
                         const std::function<void(const std::string&)>& note) {
  log.flush();
  journal.retry();
  if (log.health().pending == 0) {
    pending_first_t_ = -1;
    marker_.clear();
  } else {
    mark_outage(log.health(), pending_last_t_);
  }
  const std::string stamp = log_stamp();
  {
    const traces::StorageHealth& h = log.health();
    if (h.outages > log_.reported) {
      log_.reported = h.outages;
      log_.failing = true;
      std::cerr << stamp << " faultline live: storage: writing the event log failed at "
                << utc_stamp(h.since_unix_ms) << ": " << h.last_error << "; " << h.pending
                << " records pending, kept in memory and retried (reported once per outage)\n";
    }
    if (log_.failing && !h.failing) {
      log_.failing = false;
      const std::string line = "storage: the event log is written again after failing since " +
                               utc_stamp(h.since_unix_ms) + ": " + std::to_string(h.written_late) +
                               " records written late, " + std::to_string(h.outage_lost) + " lost";
      std::cerr << stamp << " faultline live: " << line << "\n";
      note(line);  // the log itself says where it has a gap
    }
  }
  {
    const traces::StorageHealth& h = journal.health();
    if (h.outages > journal_.reported) {
      journal_.reported = h.outages;
      journal_.failing = true;
      std::cerr << stamp << " faultline live: storage: saving the journal failed at "
                << utc_stamp(h.since_unix_ms) << ": " << h.last_error
                << "; the previous journal stays, retried (reported once per outage)\n";
    }
    if (journal_.failing && !h.failing) {
      journal_.failing = false;
      const std::string line =
          "storage: the journal is saved again after failing since " + utc_stamp(h.since_unix_ms);
      std::cerr << stamp << " faultline live: " << line << "\n";
      note(line);
    }
  }
  std::cerr << std::flush;
}

}  // namespace faultline::live
