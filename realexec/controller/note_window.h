// Notes that anyone who can reach the controller may cause (bad credentials, a client's
// refused requests), said one by one up to a number a minute; the rest of the minute is
// counted and summed up in one line at its end, so a flood writes no more than that.
#pragma once

#include <cstdint>
#include <functional>

#include "realexec/net/reactor.h"

namespace faultline::live {

class NoteWindow {
 public:
  // Called at a minute's end when notes were left out: how many, and how many so far.
  using Summary = std::function<void(std::uint64_t unsaid, std::uint64_t total)>;

  explicit NoteWindow(std::uint64_t per_minute) : per_minute_(per_minute) {}
  ~NoteWindow();
  NoteWindow(const NoteWindow&) = delete;
  NoteWindow& operator=(const NoteWindow&) = delete;

  // Counts one note: true when it is to be said now, false when it is left for the minute's
  // summary. The first of a minute arms its end on `reactor`, which calls `summary` then.
  bool admit(Reactor& reactor, Summary summary);
  // The minute's end (the armed timer calls it): `summary` when notes were left out; the
  // next note starts a new minute.
  void end_minute();
  std::uint64_t total() const { return total_; }

 private:
  std::uint64_t per_minute_;
  std::uint64_t total_ = 0, window_ = 0, unsaid_ = 0;
  Reactor* reactor_ = nullptr;
  std::uint64_t timer_ = 0;  // the minute's end; 0: none armed
  Summary summary_;
};

}  // namespace faultline::live
