// The strict JSON object reader and shared scalar encodings of the event log (see
// event_json.h): the one place that says what a well-formed integer, number, duration,
// string or array is in an event log, and how a malformed one is reported, so the codec
// (event_codec.cc) and the framing (event_log.cc) report errors alike.
#include "eventlog/event_json.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace faultline::traces::internal {

using nlohmann::json;

json real_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

double to_s(Duration d) { return static_cast<double>(d.ns) / 1e9; }

Duration from_s(double x) {
  if (x >= 9.2e9) return Duration::infinite();
  if (x <= -9.2e9) return Duration{std::numeric_limits<std::int64_t>::min()};
  const std::int64_t n = std::llround(x * 1e9);
  for (std::int64_t d : {0, -1, 1, -2, 2})
    if (static_cast<double>(n + d) / 1e9 == x) return Duration{n + d};
  return Duration{n};
}

JsonIn::JsonIn(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) fail(path_, "expected an object, got " + json_type_of(j_));
}

void JsonIn::fail(const std::string& path, const std::string& what) const {
  throw EventLogError(path + ": " + what);
}

const json* JsonIn::get(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

const json& JsonIn::need(const std::string& key, const char* what) {
  const json* v = get(key);
  if (!v) fail(at(key), std::string("required ") + what + " is missing");
  return *v;
}

std::int64_t JsonIn::integer(const std::string& key, std::int64_t def, std::int64_t lo,
                             std::int64_t hi, bool required) {
  const json* v = required ? &need(key, "integer") : get(key);
  if (!v) return def;
  return as_integer(*v, at(key), lo, hi);
}

std::int64_t JsonIn::as_integer(const json& v, const std::string& where, std::int64_t lo,
                                std::int64_t hi) const {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    fail(where, "expected an integer, got " + json_type_of(v) + " " + json_brief(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    fail(where, "expected an integer <= " + std::to_string(hi) + ", got " + json_brief(v));
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    fail(where, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "], got " + json_brief(v));
  return x;
}

std::uint64_t JsonIn::unsigned_integer(const std::string& key, std::uint64_t def, bool required) {
  const json* v = required ? &need(key, "integer") : get(key);
  if (!v) return def;
  if (v->is_number_unsigned()) return v->get<std::uint64_t>();
  if (v->is_number_integer() && v->get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v->get<std::int64_t>());
  fail(at(key), "expected an integer >= 0, got " + json_type_of(*v) + " " + json_brief(*v));
}

double JsonIn::real(const std::string& key, double def, bool required) {
  const json* v = required ? &need(key, "number") : get(key);
  if (!v) return def;
  return as_real(*v, at(key));
}

double JsonIn::as_real(const json& v, const std::string& where) const {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  fail(where, "expected a number (or \"inf\", \"-inf\", \"nan\"), got " + json_type_of(v) + " " +
                  json_brief(v));
}

double JsonIn::finite(const std::string& key, double def, double lo, double hi, bool required) {
  const json* v = required ? &need(key, "number") : get(key);
  if (!v) return def;
  if (!v->is_number())
    fail(at(key), "expected a number, got " + json_type_of(*v) + " " + json_brief(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream o;
    o << "expected a finite number in [" << lo << ", " << hi << "], got " << json_brief(*v);
    fail(at(key), o.str());
  }
  return x;
}

Duration JsonIn::duration(const std::string& key, Duration def) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_number())
    fail(at(key), "expected seconds (a number), got " + json_type_of(*v) + " " + json_brief(*v));
  return from_s(v->get<double>());
}

std::string JsonIn::string(const std::string& key, const std::string& def, bool required) {
  const json* v = required ? &need(key, "string") : get(key);
  if (!v) return def;
  if (!v->is_string())
    fail(at(key), "expected a string, got " + json_type_of(*v) + " " + json_brief(*v));
  return v->get<std::string>();
}

bool JsonIn::boolean(const std::string& key, bool def, bool required) {
  const json* v = required ? &need(key, "boolean") : get(key);
  if (!v) return def;
  if (!v->is_boolean())
    fail(at(key), "expected true or false, got " + json_type_of(*v) + " " + json_brief(*v));
  return v->get<bool>();
}

std::vector<std::int32_t> JsonIn::ids(const json& v, const std::string& where) const {
  if (!v.is_array())
    fail(where, "expected an array of integers, got " + json_type_of(v) + " " + json_brief(v));
  std::vector<std::int32_t> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(static_cast<std::int32_t>(as_integer(v[i], where + "[" + std::to_string(i) + "]",
                                                       std::numeric_limits<std::int32_t>::min(),
                                                       std::numeric_limits<std::int32_t>::max())));
  return out;
}

std::vector<std::int32_t> JsonIn::ids(const std::string& key) {
  const json* v = get(key);
  if (!v) return {};
  return ids(*v, at(key));
}

std::vector<std::string> JsonIn::strings(const std::string& key) {
  const json* v = get(key);
  if (!v) return {};
  if (!v->is_array())
    fail(at(key), "expected an array of strings, got " + json_type_of(*v) + " " + json_brief(*v));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      fail(at(key) + "[" + std::to_string(i) + "]",
           "expected a string, got " + json_type_of((*v)[i]));
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::vector<bool> JsonIn::bools(const std::string& key) {
  const json* v = get(key);
  if (!v) return {};
  if (!v->is_array())
    fail(at(key), "expected an array of booleans, got " + json_type_of(*v) + " " + json_brief(*v));
  std::vector<bool> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_boolean())
      fail(at(key) + "[" + std::to_string(i) + "]",
           "expected true or false, got " + json_type_of((*v)[i]));
    out.push_back((*v)[i].get<bool>());
  }
  return out;
}

void JsonIn::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      fail(at(it.key()), "unknown key; expected one of: " + known);
    }
  }
}

}  // namespace faultline::traces::internal
