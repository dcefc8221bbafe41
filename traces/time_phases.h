// Where wall time goes: the one list of phase names that the simulator's breakdown
// (sim/progress.h kBuckets: result JSON, tables, CSV columns) and live mode's account of lost
// time (`faultline live status`, /metrics faultline_lost_seconds_total{phase}, the event
// log's "account" records) share, so that a simulated and a live run are read in the same
// terms. Header-only: faultline-live links faultline_realexec without the simulator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace faultline {

// In report order; every phase but kProductive is lost time.
enum class TimePhase : std::uint8_t {
  kProductive,          // training that was kept
  kDetection,           // the job is broken but nothing knows yet
  kDiagnosis,           // stopped, the policy diagnosing or deciding
  kFailover,            // machines joining, processes starting, rendezvous
  kRestore,             // loading the checkpoint
  kRecompute,           // training lost since the last complete checkpoint
  kCheckpoint,          // blocking checkpoint time
  kDegraded,            // running slower than full speed
  kWarmup,              // running after a (re)start before full speed
  kWaitingForMachines,  // stopped, no healthy machine free
  kMissingReplicas,     // training with data-parallel replicas missing, and quorum changes
};

inline constexpr std::size_t kTimePhaseCount = 11;

inline constexpr std::array<const char*, kTimePhaseCount> kTimePhaseNames = {
    "productive",      "detection",  "diagnosis", "failover", "restore",
    "recompute",       "checkpoint", "degraded",  "warmup",   "waiting_for_machines",
    "missing_replicas"};

constexpr const char* time_phase_name(TimePhase p) {
  return kTimePhaseNames[static_cast<std::size_t>(p)];
}

inline std::optional<TimePhase> time_phase_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kTimePhaseCount; ++i)
    if (name == kTimePhaseNames[i]) return static_cast<TimePhase>(i);
  return std::nullopt;
}

}  // namespace faultline
