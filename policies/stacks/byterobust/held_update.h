// A code update waiting for a restart (ByteRobust §5: hot updates). A non-urgent update
// is held by choice (defer_non_urgent) and rides the next restart, whatever starts it, or
// is forced when the deferral window ends; any update that arrives while the stack
// recovers rides that recovery's restart, or, when the restart was already asked for,
// is applied as soon as the job runs. Versions are successive: the newest held one
// carries the older ones, and the deadline of the oldest. A value type: the stack asks, it
// answers, and keeps its deferral timer at window_end().
#pragma once

#include <optional>
#include <string>

#include "policies/api/time.h"

namespace faultline::policies {

class HeldUpdate {
 public:
  enum class Answer { kHoldForWindow, kHoldForRecovery, kApplyNow };
  // An update arrived: hold it for the deferral window (`defer`: the stack's choice for
  // non-urgent ones) that ends at `window_end`, or earlier when the update it replaces was
  // due first; hold it for the recovery under way (`busy`); or apply it now.
  Answer requested(const std::string& version, bool urgent, bool defer, bool busy,
                   Instant window_end) {
    if (!urgent && defer) {
      if (!held_ || !for_window_) window_end_ = window_end;
      hold(version, true);
      return Answer::kHoldForWindow;
    }
    if (busy) {
      hold(version, false);
      window_end_ = Instant::max();
      return Answer::kHoldForRecovery;
    }
    return Answer::kApplyNow;
  }
  // The version a restart asked for now carries: the held one, if any.
  const std::string& restart() {
    starting_ = held_.value_or("");
    return starting_;
  }
  // A rollback to the last good version: a held update stays held (it may carry the bug).
  void roll_back() { starting_.clear(); }
  // `version` is applied now (a hot update), the held one with it.
  void applying(const std::string& version) {
    held_.reset();
    window_end_ = Instant::max();
    starting_ = version;
  }
  // The job started with what the start asked for. Returns an update held for a recovery
  // that came after the restart was asked for: to be applied now.
  std::optional<std::string> started() {
    if (held_ && *held_ == starting_) {  // it rode this start
      held_.reset();
      window_end_ = Instant::max();
    }
    if (held_ && !for_window_) return held_;
    return std::nullopt;
  }
  // The deferral window ended. Returns the held update to force now when the job runs;
  // while a recovery is under way it rides that recovery's restart (or right after it).
  std::optional<std::string> window_ended(bool running) {
    if (!held_ || !for_window_) return std::nullopt;
    if (running) return held_;
    for_window_ = false;
    window_end_ = Instant::max();
    return std::nullopt;
  }
  // When the update held by choice is to be forced (Instant::max(): none is): the time of
  // the stack's deferral timer, so that a window that ended or was carried off by a
  // restart leaves no timer to force a newer update early.
  Instant window_end() const { return window_end_; }

 private:
  void hold(const std::string& version, bool for_window) {
    held_ = version;
    for_window_ = for_window;
  }
  std::optional<std::string> held_;
  bool for_window_ = false;              // held by choice (deferral window), not by a recovery
  Instant window_end_ = Instant::max();  // the deferral window's end (held by choice)
  std::string starting_;                 // the version the pending start asked for
};

}  // namespace faultline::policies
