// The progress bar of the sim commands, on stderr (never on stdout): replicas done and in
// all (and a sweep's points), the elapsed time and an estimate of the time left from the
// pace so far. Drawn in place for a terminal, at most every 0.2 s (and not in a run's first
// half second); with --progress and stderr not a terminal (a log file, a pipe), one line at
// most every 2 s and one at the end. --quiet draws nothing.
//
// A progress sink (progress_sink_fd(), set by faultline._core for a Python caller that
// asked for progress) receives "DONE TOTAL POINTS_DONE POINTS_TOTAL\n" lines at the same
// pace, whatever the terminal and --quiet say: the Python API draws its own bar from them.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace faultline::cli {

// The file descriptor of the progress sink; -1: none.
inline int& progress_sink_fd() {
  static int fd = -1;
  return fd;
}

class ProgressBar {
 public:
  // `on`: draw at all (callers pass !quiet); the bar stays silent unless stderr is a terminal
  // or `force` (--progress). `what` prefixes the bar ("round 2 ", a stack's name).
  explicit ProgressBar(bool on, std::string what = "", bool force = false)
      : tty_(isatty(STDERR_FILENO) != 0),
        on_(on && (tty_ || force)),
        what_(std::move(what)),
        t0_(std::chrono::steady_clock::now()) {}
  void set_what(std::string what) { what_ = std::move(what); }
  // A sweep's points: done (finished before included) and in all; shown before the replicas.
  void set_points(long long done, long long total) {
    points_done_ = done;
    points_total_ = total;
  }
  void operator()(long long done, long long total) {
    if ((!on_ && progress_sink_fd() < 0) || total <= 0) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    // The end: every replica done (and every point, for a sweep); drawn once.
    const bool end = done == total && points_done_ == points_total_;
    if (!end && (el < 0.5 || el - last_ < (tty_ || !on_ ? 0.2 : 2.0))) return;
    if (end && ended_) return;
    ended_ = end;
    last_ = el;
    if (progress_sink_fd() >= 0) sink(done, total);
    if (!on_) return;
    std::string line = what_;
    if (tty_) {
      const int width = 40;
      const int fill =
          static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width);
      line += "[" + std::string(static_cast<std::size_t>(fill), '#') +
              std::string(static_cast<std::size_t>(width - fill), ' ') + "] ";
    }
    char buf[160];
    if (points_total_ > 0) {
      std::snprintf(buf, sizeof buf, "%lld/%lld points, ", points_done_, points_total_);
      line += buf;
    }
    std::snprintf(buf, sizeof buf, "%lld/%lld replicas %.1f s", done, total, el);
    line += buf;
    if (done > 0 && done < total) {
      std::snprintf(buf, sizeof buf, ", about %.0f s left",
                    el / static_cast<double>(done) * static_cast<double>(total - done));
      line += buf;
    }
    if (tty_)
      std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), end ? "\n" : "");
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }

 private:
  void sink(long long done, long long total) const {
    char buf[128];
    const int n = std::snprintf(buf, sizeof buf, "%lld %lld %lld %lld\n", done, total, points_done_,
                                points_total_);
    if (n > 0) (void)!::write(progress_sink_fd(), buf, static_cast<std::size_t>(n));
  }

  bool tty_;
  bool on_;
  std::string what_;
  std::chrono::steady_clock::time_point t0_;
  double last_ = -1;
  bool ended_ = false;
  long long points_done_ = 0, points_total_ = 0;
};

}  // namespace faultline::cli
