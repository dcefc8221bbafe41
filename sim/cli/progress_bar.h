// The progress bar of the sim commands: on stderr, drawn only for a terminal, at most every
// 0.2 s (and not in a run's first half second), with the elapsed time and an estimate of the
// time left from the pace so far.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace faultline::cli {

class ProgressBar {
 public:
  // `on`: draw at all (callers pass !quiet); the bar stays silent unless stderr is a terminal.
  // `what` prefixes the bar ("round 2 ", a stack's name).
  explicit ProgressBar(bool on, std::string what = "")
      : on_(on && isatty(STDERR_FILENO)),
        what_(std::move(what)),
        t0_(std::chrono::steady_clock::now()) {}
  void set_what(std::string what) { what_ = std::move(what); }
  void operator()(long long done, long long total) {
    if (!on_ || total <= 0) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (done < total && (el < 0.5 || el - last_ < 0.2)) return;
    last_ = el;
    const int width = 40;
    const int fill =
        static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width);
    std::fprintf(stderr, "\r%s[%.*s%*s] %lld/%lld replicas %.1f s", what_.c_str(), fill,
                 "########################################", width - fill, "", done, total, el);
    if (done > 0 && done < total)
      std::fprintf(stderr, ", about %.0f s left",
                   el / static_cast<double>(done) * static_cast<double>(total - done));
    std::fputs("\x1b[K", stderr);  // clear what a longer line before left
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::string what_;
  std::chrono::steady_clock::time_point t0_;
  double last_ = -1;
};

}  // namespace faultline::cli
