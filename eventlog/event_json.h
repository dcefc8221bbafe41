// Internal to the event log (event_codec.cc and event_log.cc, nothing else): the strict
// reader that both the Event/Action codec and the record framing decode with (the one
// reader of json/strict_object.h, throwing EventLogError), and the scalar encodings they
// share (non-finite doubles as strings, Durations as seconds, enums by name). Apart from
// both because both need it, and so the codec and the framing each stay one concern.
// Errors are EventLogError "PATH.field: expected ..., got ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "eventlog/event_codec.h"
#include "json/strict_object.h"
#include "policies/api/time.h"

namespace faultline::traces::internal {

inline constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
inline constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

// JSON has no infinities or NaN: they travel as strings.
nlohmann::json real_json(double x);
// Seconds as the correctly rounded quotient, so decoding can find the exact ns back.
double to_s(Duration d);
Duration from_s(double x);

// The enum value of E (values 0..N-1) whose `to` name is `name`.
template <class E, int N>
std::optional<E> lookup(std::string_view name, const char* (*to)(E)) {
  for (int i = 0; i < N; ++i)
    if (name == to(static_cast<E>(i))) return static_cast<E>(i);
  return std::nullopt;
}

template <class E, int N>
std::vector<const char*> names_of(const char* (*to)(E)) {
  std::vector<const char*> out;
  for (int i = 0; i < N; ++i) out.push_back(to(static_cast<E>(i)));
  return out;
}

// Reads one JSON object of the log (json/strict_object.h): errors are EventLogError
// "PATH.field: expected ..., got ...", unknown keys are errors.
using JsonIn = StrictObject<EventLogError>;

// Seconds (a number) at `key` as a Duration; `def` when absent.
Duration read_duration(JsonIn& in, const std::string& key, Duration def);

}  // namespace faultline::traces::internal
