// The policy vocabulary as JSON: faultline::Event and faultline::Action to and from
// nlohmann::json, and the enums they carry to and from their names. This is the content
// codec of the live event log; the log's framing (records, lines, the writer) is
// eventlog/event_log.h, which includes this header, as leveldb keeps write_batch apart from
// log_reader/log_writer. Kept apart so that the vocabulary's encoding can be read, tested
// and changed without the file format around it.
//
// Events and actions encode as {"type": "ProcessExit", ...} with the structs' snake_case
// field names; Durations as seconds (double) with the suffix `_s` (stalled_for_s,
// interval_s, deadline_s, ...); MachineSets as arrays; enums by name (mechanism_name,
// mode_name, tier_name, probe_name); non-finite doubles as the strings "inf", "-inf",
// "nan". Decoding is strict (unknown keys are errors) and a round trip is exact.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "policies/api/action.h"
#include "policies/api/event.h"

namespace faultline::traces {

// A malformed event, action or log line; what() is the one-line message.
class EventLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json to_json(const faultline::Event& e);
nlohmann::json to_json(const faultline::Action& a);
// Throw EventLogError "PATH.field: expected ..."; `path` names `j` in the message.
faultline::Event event_from_json(const nlohmann::json& j, const std::string& path = "$");
faultline::Action action_from_json(const nlohmann::json& j, const std::string& path = "$");

// Inverses of mode_name, tier_name and probe_name; nullopt when `name` is none of them. (A
// mechanism is any name: Mechanism::named.)
std::optional<AcquireMode> mode_from_name(std::string_view name);
std::optional<CheckpointTier> tier_from_name(std::string_view name);
std::optional<ProbeKind> probe_from_name(std::string_view name);
std::optional<Mitigation> mitigation_from_name(std::string_view name);

}  // namespace faultline::traces
