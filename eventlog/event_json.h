// Internal to the event log (event_codec.cc and event_log.cc, nothing else): the strict
// reader of one JSON object that both the Event/Action codec and the record framing
// decode with, and the scalar encodings they share (non-finite doubles as strings,
// Durations as seconds, enums by name). Apart from both because both need it, and so the
// codec and the framing each stay one concern. Errors are EventLogError
// "PATH.field: expected ..., got ...".
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
#include "policies/api/time.h"
#include "traces/config.h"  // json_brief, json_type_of

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

// "a|b|c", for "expected one of" messages.
template <class Names>
std::string join_names(const Names& names) {
  std::string all;
  for (const char* n : names) all += (all.empty() ? "" : "|") + std::string(n);
  return all;
}

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

// Reads one JSON object, remembering which keys were read so unknown keys are errors.
// `j` must outlive the reader. Each getter returns `def` when the key is absent (an
// error instead when `required`), and throws EventLogError when the value is malformed.
class JsonIn {
 public:
  JsonIn(const nlohmann::json& j, std::string path);
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  std::string at(const std::string& key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return j_.contains(key); }
  // The value (marking the key read), or nullptr when absent.
  const nlohmann::json* get(const std::string& key);
  const nlohmann::json& need(const std::string& key, const char* what);
  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi,
                       bool required = false);
  std::int64_t as_integer(const nlohmann::json& v, const std::string& where, std::int64_t lo,
                          std::int64_t hi) const;
  std::uint64_t unsigned_integer(const std::string& key, std::uint64_t def, bool required = false);
  // A number, or "inf", "-inf", "nan".
  double real(const std::string& key, double def, bool required = false);
  double as_real(const nlohmann::json& v, const std::string& where) const;
  // A finite number within [lo, hi].
  double finite(const std::string& key, double def, double lo, double hi, bool required = false);
  Duration duration(const std::string& key, Duration def);
  std::string string(const std::string& key, const std::string& def, bool required = false);
  bool boolean(const std::string& key, bool def, bool required = false);
  std::vector<std::int32_t> ids(const nlohmann::json& v, const std::string& where) const;
  std::vector<std::int32_t> ids(const std::string& key);
  std::vector<std::string> strings(const std::string& key);
  std::vector<bool> bools(const std::string& key);
  // One of `names`, decoded by `from`.
  template <class E>
  E enumerated(const std::string& key, E def, std::optional<E> (*from)(std::string_view),
               const std::vector<const char*>& names) {
    const nlohmann::json* v = get(key);
    if (!v) return def;
    if (v->is_string())
      if (auto e = from(v->get_ref<const std::string&>())) return *e;
    fail(at(key), "expected one of " + join_names(names) + ", got " + json_brief(*v));
  }
  // Fails on the first key that was never read.
  void finish() const;

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace faultline::traces::internal
