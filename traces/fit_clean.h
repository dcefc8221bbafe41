// Internal to the fits (fit.cc, fit_trace.cc): a sample with its unusable values dropped.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "traces/fit.h"

namespace faultline::traces::fit_internal {

struct Clean {
  std::vector<double> obs, cen;
  std::vector<std::pair<double, double>> iv;
  std::size_t dropped = 0;
  Sample sample() const { return {obs, cen, iv}; }
};

// The sample's usable values: positive finite observations and censorings, proper
// intervals (an interval of zero width is an observation, one open above a censoring).
Clean clean(const Sample& s);

}  // namespace faultline::traces::fit_internal
