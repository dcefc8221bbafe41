#include "traces/config.h"

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

}  // namespace faultline::traces
