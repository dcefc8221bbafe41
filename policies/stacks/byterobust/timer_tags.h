// The byterobust stack's timer tags, in one place so that no two parts of it share one.
#pragma once

#include <cstdint>

namespace faultline::policies::timer_tags {

inline constexpr std::uint64_t kMfuRound = 1;        // Slowdowns: the next aggregation round
inline constexpr std::uint64_t kDeferredUpdate = 2;  // the stack: a deferral window ends
inline constexpr std::uint64_t kDetect = 3;          // the stack: the detector's next check
inline constexpr std::uint64_t kFailSlow = 4;        // Slowdowns: the fail-slow module's check

}  // namespace faultline::policies::timer_tags
