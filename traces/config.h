// Validation of the small JSON configuration files of traces/ (column maps, category
// mappings): the same one-line "file: $.path: expected ..." errors as the scenario
// loader, and unknown keys are errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::traces {

// A configuration or input error; what() is the one-line message.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses JSON text; throws TraceError "file: $: invalid JSON (...)".
nlohmann::json parse_config_json(const std::string& text, const std::string& file);
// Reads a whole file; throws TraceError "file: cannot open file".
std::string read_text_file(const std::string& path);

std::string json_type_of(const nlohmann::json& j);
std::string json_brief(const nlohmann::json& j);

// Reads one JSON object, remembering which keys were read so unknown keys are errors.
class ConfigObj {
 public:
  ConfigObj(const nlohmann::json& j, std::string path, std::string file);
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  std::string at(const std::string& key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const nlohmann::json* get(const std::string& key);
  double number(const std::string& key, double def, double lo, double hi, bool required = false);
  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi,
                       bool required = false);
  std::string string(const std::string& key, const std::string& def, bool required = false);
  bool boolean(const std::string& key, bool def);
  std::string choice(const std::string& key, const std::string& def,
                     const std::vector<std::string>& choices);
  // A string or an array of strings.
  std::vector<std::string> strings(const std::string& key);
  void finish() const;

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::string file_;
  std::set<std::string> seen_;
};

}  // namespace faultline::traces
