// What the files of `faultline sim replay` share and nobody else needs (replay.cc: the
// scenario, the run and the reports; replay_calibration.cc: reading the log and measuring the
// environment; replay_faults.cc: the faults as categories): the measurements on the live run's
// log that more than one stage takes, and the number format of the text report.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eventlog/event_log.h"
#include "sim/replay.h"

namespace faultline::sim::replay_internal {

// The job's first successful start: the index into log.actions, or -1.
int first_successful_start(const traces::EventLog& log);

// The live run's action durations by key, occurrence by occurrence from the first successful
// start on (Scenario::replay_durations).
std::map<std::string, std::vector<double>> occurrence_durations(const traces::EventLog& log);

// Checkpoint stall per checkpoint every `n` steps, from progress samples one step apart.
std::optional<Calibrated> checkpoint_stall(const traces::EventLog& log, std::int64_t n,
                                           double step_time_s);

// `v` in fixed notation with `prec` decimals.
std::string fmt(double v, int prec);

}  // namespace faultline::sim::replay_internal
