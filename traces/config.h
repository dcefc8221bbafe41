// Validation of the small JSON configuration files of traces/ (column maps, category
// mappings): the same one-line "file: $.path: expected ..." errors as the scenario
// loader, and unknown keys are errors.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "json/strict_object.h"

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

// One wording for JSON types and values in errors, for every reader (json/strict_object.h).
using faultline::json_brief;
using faultline::json_type_of;

// Reads one JSON object of a trace configuration (json/strict_object.h): "file: $.path:
// expected ..." errors as TraceError, unknown keys are errors.
using ConfigObj = StrictObject<TraceError>;

}  // namespace faultline::traces
