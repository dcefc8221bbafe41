#include "traces/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace faultline::traces {

using nlohmann::json;

json parse_config_json(const std::string& text, const std::string& file) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    auto p = what.find("parse error");
    throw TraceError(file + ": $: invalid JSON (" +
                     (p == std::string::npos ? what : what.substr(p)) + ")");
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw TraceError(path + ": read error");
  return ss.str();
}

std::string json_type_of(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

std::string json_brief(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

ConfigObj::ConfigObj(const json& j, std::string path, std::string file)
    : j_(j), path_(std::move(path)), file_(std::move(file)) {
  if (!j_.is_object()) fail(path_, "expected an object, got " + json_type_of(j_));
}

void ConfigObj::fail(const std::string& path, const std::string& what) const {
  throw TraceError(file_ + ": " + path + ": " + what);
}

const json* ConfigObj::get(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

double ConfigObj::number(const std::string& key, double def, double lo, double hi, bool required) {
  const json* v = get(key);
  if (!v) {
    if (required) fail(at(key), "required number is missing");
    return def;
  }
  if (!v->is_number())
    fail(at(key), "expected a number, got " + json_type_of(*v) + " " + json_brief(*v));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi) || !std::isfinite(x)) {
    std::ostringstream o;
    o << "expected a number in [" << lo << ", " << hi << "], got " << json_brief(*v);
    fail(at(key), o.str());
  }
  return x;
}

std::int64_t ConfigObj::integer(const std::string& key, std::int64_t def, std::int64_t lo,
                                std::int64_t hi, bool required) {
  const json* v = get(key);
  if (!v) {
    if (required) fail(at(key), "required integer is missing");
    return def;
  }
  if (!v->is_number_integer() && !v->is_number_unsigned())
    fail(at(key), "expected an integer, got " + json_type_of(*v) + " " + json_brief(*v));
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    fail(at(key), "expected an integer <= " + std::to_string(hi) + ", got " + json_brief(*v));
  const std::int64_t x = v->get<std::int64_t>();
  if (x < lo || x > hi)
    fail(at(key), "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "], got " + json_brief(*v));
  return x;
}

std::string ConfigObj::string(const std::string& key, const std::string& def, bool required) {
  const json* v = get(key);
  if (!v) {
    if (required) fail(at(key), "required string is missing");
    return def;
  }
  if (!v->is_string())
    fail(at(key), "expected a string, got " + json_type_of(*v) + " " + json_brief(*v));
  return v->get<std::string>();
}

bool ConfigObj::boolean(const std::string& key, bool def) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_boolean())
    fail(at(key), "expected true or false, got " + json_type_of(*v) + " " + json_brief(*v));
  return v->get<bool>();
}

std::string ConfigObj::choice(const std::string& key, const std::string& def,
                              const std::vector<std::string>& choices) {
  std::string s = string(key, def);
  for (const auto& c : choices)
    if (c == s) return s;
  std::string all;
  for (const auto& c : choices) all += (all.empty() ? "" : "|") + c;
  fail(at(key), "expected one of " + all + ", got \"" + s + "\"");
}

std::vector<std::string> ConfigObj::strings(const std::string& key) {
  const json* v = get(key);
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array())
    fail(at(key), "expected a string or an array of strings, got " + json_type_of(*v));
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      fail(at(key) + "[" + std::to_string(i) + "]",
           "expected a string, got " + json_type_of((*v)[i]));
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

void ConfigObj::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      fail(at(it.key()), "unknown key; expected one of: " + known);
    }
  }
}

}  // namespace faultline::traces
