// Simulated or live time as integer nanoseconds.
//
// Policies reason about time only through these two types, so the same code runs
// against the simulator's virtual clock and live mode's monotonic clock. Integer
// nanoseconds keep event ordering exact and results byte-identical across runs.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace faultline {

// A signed span of time.
struct Duration {
  std::int64_t ns = 0;

  static constexpr Duration nanos(std::int64_t v) { return Duration{v}; }
  static constexpr Duration millis(double v) { return Duration{round_ns(v * 1e6)}; }
  static constexpr Duration seconds(double v) { return Duration{round_ns(v * 1e9)}; }
  static constexpr Duration minutes(double v) { return seconds(v * 60.0); }
  static constexpr Duration hours(double v) { return seconds(v * 3600.0); }
  static constexpr Duration days(double v) { return seconds(v * 86400.0); }
  static constexpr Duration zero() { return Duration{0}; }
  static constexpr Duration infinite() {
    return Duration{std::numeric_limits<std::int64_t>::max()};
  }

  constexpr double to_seconds() const { return static_cast<double>(ns) * 1e-9; }
  constexpr bool is_infinite() const { return ns == std::numeric_limits<std::int64_t>::max(); }

  constexpr auto operator<=>(const Duration&) const = default;
  constexpr Duration operator+(Duration o) const { return Duration{ns + o.ns}; }
  constexpr Duration operator-(Duration o) const { return Duration{ns - o.ns}; }
  constexpr Duration& operator+=(Duration o) {
    ns += o.ns;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ns -= o.ns;
    return *this;
  }
  constexpr Duration operator*(std::int64_t k) const { return Duration{ns * k}; }

  // Rounds to the nearest nanosecond, saturating at the representable range.
  static constexpr std::int64_t round_ns(double v) {
    if (!(v == v)) return 0;
    if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
    if (v <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(v < 0 ? v - 0.5 : v + 0.5);
  }
};

// A point in time: nanoseconds since the start of the run (simulation) or since
// an arbitrary monotonic origin (live mode).
struct Instant {
  std::int64_t ns = 0;

  static constexpr Instant at(Duration since_origin) { return Instant{since_origin.ns}; }
  static constexpr Instant max() { return Instant{std::numeric_limits<std::int64_t>::max()}; }
  constexpr double to_seconds() const { return static_cast<double>(ns) * 1e-9; }

  constexpr auto operator<=>(const Instant&) const = default;
  constexpr Instant operator+(Duration d) const {
    if (d.ns > 0 && ns > std::numeric_limits<std::int64_t>::max() - d.ns) return max();
    return Instant{ns + d.ns};
  }
  constexpr Instant operator-(Duration d) const { return Instant{ns - d.ns}; }
  constexpr Duration operator-(Instant o) const { return Duration{ns - o.ns}; }
};

}  // namespace faultline
