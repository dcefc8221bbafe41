// The one strict reader of a JSON object: scenarios, trace configurations (column maps,
// category mappings), the live event log, the live config, the controller's journal and the
// probes' thresholds read with it. It remembers which keys were read, so that finish()
// refuses a key nobody reads, and it reports a malformed value in one line, "FILE:
// PATH.field: expected ..., got ...", thrown as the reader's `Error` (TraceError,
// ScenarioError, EventLogError, LiveConfigError, ThresholdsError, ...): each reader keeps its
// own error type without its own parser. Header-only, so that the fuzz targets use it without
// linking a library; policies/ never includes it (policies/ sees no JSON, docs/architecture.md §2).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

// One wording for JSON types in errors: "null", "a boolean", "an integer", "a number", "a
// string", "an array", "an object".
inline std::string json_type_of(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

// The value as JSON text, cut to 40 characters, for "got ..." in errors.
inline std::string json_brief(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// `s` with each control character written \n or \xHH, so that an error stays one line
// whatever the key or string that it quotes.
inline std::string json_one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// "a|b|c", for "expected one of" messages.
template <class Names>
std::string join_names(const Names& names) {
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : "|") + std::string(n);
  return all;
}

// Told of each object and field a StrictObject reads, before it reads it: how the scenario
// reference is generated from the scenario parser itself (scenarios/reference.cc).
class FieldObserver {
 public:
  virtual ~FieldObserver() = default;
  // `type`: "object", "number", "integer", "string" or "boolean"; `def`: the default (null
  // for an object); `range`: [lo, hi] of a number or an integer; `choices`: a choice's.
  virtual void field(const std::string& path, const char* type, const nlohmann::json* def,
                     bool required, std::optional<std::pair<double, double>> range,
                     const std::vector<std::string>& choices) = 0;
};

// Reads one JSON object at `path` ("$.job", or "" for a file's top level, whose keys are
// then named bare), remembering which keys were read so unknown keys are errors. `j` must
// outlive the reader. Each getter returns `def` when the key is absent (an error instead
// when `required`) and throws Error when the value is malformed. With a `file`, every
// error starts "FILE: ".
template <class Error>
class StrictObject {
 public:
  StrictObject(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
    check_object();
  }
  StrictObject(const nlohmann::json& j, std::string path, const std::string& file,
               FieldObserver* observer = nullptr)
      : j_(j), path_(std::move(path)), file_(file), prefix_(file + ": "), observer_(observer) {
    if (observer_ && path_ != "$") observer_->field(path_, "object", nullptr, false, {}, {});
    check_object();
  }

  // Throws "FILE: PATH: WHAT" in one line: a control character (from a key or a string value)
  // is written \n or \xHH.
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(json_one_line(prefix_ + path + ": " + what));
  }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  bool has(const std::string& key) const { return j_.contains(key); }
  // The value (marking the key read), or nullptr when absent.
  const nlohmann::json* get(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  // The value; "required WHAT is missing" when absent.
  const nlohmann::json& need(const std::string& key, const char* what) {
    const nlohmann::json* v = get(key);
    if (!v) fail(at(key), std::string("required ") + what + " is missing");
    return *v;
  }

  // A finite number within [lo, hi]: "expected a number in [lo, hi]".
  double number(const std::string& key, double def, double lo, double hi, bool required = false) {
    observe(key, "number", def, required, std::make_pair(lo, hi));
    return bounded(key, def, lo, hi, required, "a number");
  }
  // The same, worded "expected a finite number in [lo, hi]" (the event log's wording).
  double finite(const std::string& key, double def, double lo, double hi, bool required = false) {
    return bounded(key, def, lo, hi, required, "a finite number");
  }
  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi,
                       bool required = false) {
    observe(key, "integer", def, required,
            std::make_pair(static_cast<double>(lo), static_cast<double>(hi)));
    const nlohmann::json* v = required ? &need(key, "integer") : get(key);
    if (!v) return def;
    return as_integer(*v, at(key), lo, hi);
  }
  std::int64_t as_integer(const nlohmann::json& v, const std::string& where, std::int64_t lo,
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
  std::uint64_t unsigned_integer(const std::string& key, std::uint64_t def, bool required = false) {
    const nlohmann::json* v = required ? &need(key, "integer") : get(key);
    if (!v) return def;
    if (v->is_number_unsigned()) return v->get<std::uint64_t>();
    if (v->is_number_integer() && v->get<std::int64_t>() >= 0)
      return static_cast<std::uint64_t>(v->get<std::int64_t>());
    fail(at(key), "expected an integer >= 0, got " + json_type_of(*v) + " " + json_brief(*v));
  }
  // A number, or "inf", "-inf", "nan" (JSON has no infinities or NaN).
  double real(const std::string& key, double def, bool required = false) {
    const nlohmann::json* v = required ? &need(key, "number") : get(key);
    if (!v) return def;
    return as_real(*v, at(key));
  }
  double as_real(const nlohmann::json& v, const std::string& where) const {
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
  std::string string(const std::string& key, const std::string& def, bool required = false) {
    observe(key, "string", def, required);
    return read_string(key, def, required);
  }
  bool boolean(const std::string& key, bool def, bool required = false) {
    observe(key, "boolean", def, required);
    const nlohmann::json* v = required ? &need(key, "boolean") : get(key);
    if (!v) return def;
    if (!v->is_boolean())
      fail(at(key), "expected true or false, got " + json_type_of(*v) + " " + json_brief(*v));
    return v->get<bool>();
  }
  // A string among `choices`.
  std::string choice(const std::string& key, const std::string& def,
                     const std::vector<std::string>& choices) {
    observe(key, "string", def, false, std::nullopt, choices);
    std::string s = read_string(key, def, false);
    for (const auto& c : choices)
      if (c == s) return s;
    fail(at(key), "expected one of " + join_names(choices) + ", got \"" + s + "\"");
  }
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

  // An array of strings.
  std::vector<std::string> strings(const std::string& key) {
    const nlohmann::json* v = get(key);
    if (!v) return {};
    if (!v->is_array())
      fail(at(key), "expected an array of strings, got " + json_type_of(*v) + " " + json_brief(*v));
    return string_elements(*v, key);
  }
  // A string or an array of strings.
  std::vector<std::string> one_or_more_strings(const std::string& key) {
    const nlohmann::json* v = get(key);
    if (!v) return {};
    if (v->is_string()) return {v->get<std::string>()};
    if (!v->is_array())
      fail(at(key), "expected a string or an array of strings, got " + json_type_of(*v));
    return string_elements(*v, key);
  }
  // An array of 32-bit integers (ids).
  std::vector<std::int32_t> ids(const nlohmann::json& v, const std::string& where) const {
    if (!v.is_array())
      fail(where, "expected an array of integers, got " + json_type_of(v) + " " + json_brief(v));
    std::vector<std::int32_t> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(static_cast<std::int32_t>(as_integer(
          v[i], where + "[" + std::to_string(i) + "]", std::numeric_limits<std::int32_t>::min(),
          std::numeric_limits<std::int32_t>::max())));
    return out;
  }
  std::vector<std::int32_t> ids(const std::string& key) {
    const nlohmann::json* v = get(key);
    if (!v) return {};
    return ids(*v, at(key));
  }
  // An array of numbers.
  std::vector<double> numbers(const std::string& key) {
    const nlohmann::json* v = get(key);
    if (!v) return {};
    if (!v->is_array())
      fail(at(key), "expected an array of numbers, got " + json_type_of(*v) + " " + json_brief(*v));
    std::vector<double> out;
    out.reserve(v->size());
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_number())
        fail(at(key) + "[" + std::to_string(i) + "]",
             "expected a number, got " + json_type_of((*v)[i]) + " " + json_brief((*v)[i]));
      out.push_back((*v)[i].get<double>());
    }
    return out;
  }
  std::vector<bool> bools(const std::string& key) {
    const nlohmann::json* v = get(key);
    if (!v) return {};
    if (!v->is_array())
      fail(at(key),
           "expected an array of booleans, got " + json_type_of(*v) + " " + json_brief(*v));
    std::vector<bool> out;
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_boolean())
        fail(at(key) + "[" + std::to_string(i) + "]",
             "expected true or false, got " + json_type_of((*v)[i]));
      out.push_back((*v)[i].get<bool>());
    }
    return out;
  }

  // Refuses now, before any field is read, a key not among `keys`, naming them all: for a
  // reader whose checks across fields would otherwise report a misspelt key's consequence
  // ("expected more than heartbeat_s") rather than the misspelling. finish() then holds.
  template <class Keys>
  void only(const Keys& keys) {
    for (const auto& k : keys) seen_.insert(std::string(k));
    finish();
  }
  void only(std::initializer_list<const char*> keys) { only<decltype(keys)>(keys); }

  // Fails on the first key that was never read, naming those that were.
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!seen_.count(it.key())) {
        std::string known;
        for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
        fail(at(it.key()), "unknown key; expected one of: " + known);
      }
    }
  }

 private:
  void check_object() const {
    if (!j_.is_object())
      fail(path_.empty() ? "(top level)" : path_, "expected an object, got " + json_type_of(j_));
  }
  template <class T>
  void observe(const std::string& key, const char* type, const T& def, bool required,
               std::optional<std::pair<double, double>> range = std::nullopt,
               const std::vector<std::string>& choices = {}) const {
    if (!observer_) return;
    const nlohmann::json d(def);
    observer_->field(at(key), type, &d, required, range, choices);
  }
  double bounded(const std::string& key, double def, double lo, double hi, bool required,
                 const char* what) {
    const nlohmann::json* v = get(key);
    if (!v) {
      if (required) fail(at(key), "required number is missing");
      return def;
    }
    if (!v->is_number())
      fail(at(key), "expected a number, got " + json_type_of(*v) + " " + json_brief(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || !(x >= lo && x <= hi)) {
      std::ostringstream o;
      o << "expected " << what << " in [" << lo << ", " << hi << "], got " << json_brief(*v);
      fail(at(key), o.str());
    }
    return x;
  }
  std::string read_string(const std::string& key, const std::string& def, bool required) {
    const nlohmann::json* v = required ? &need(key, "string") : get(key);
    if (!v) return def;
    if (!v->is_string())
      fail(at(key), "expected a string, got " + json_type_of(*v) + " " + json_brief(*v));
    return v->get<std::string>();
  }
  std::vector<std::string> string_elements(const nlohmann::json& v, const std::string& key) const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        fail(at(key) + "[" + std::to_string(i) + "]",
             "expected a string, got " + json_type_of(v[i]));
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  const nlohmann::json& j_;
  std::string path_;
  std::string file_;
  std::string prefix_;  // "FILE: ", or "" without a file
  FieldObserver* observer_ = nullptr;
  std::set<std::string> seen_;
};

}  // namespace faultline
