// The shared scalar encodings of the event log (see event_json.h): non-finite doubles,
// Durations as seconds, so the codec (event_codec.cc) and the framing (event_log.cc)
// encode and report errors alike.
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

Duration read_duration(JsonIn& in, const std::string& key, Duration def) {
  const json* v = in.get(key);
  if (!v) return def;
  if (!v->is_number())
    in.fail(in.at(key),
            "expected seconds (a number), got " + json_type_of(*v) + " " + json_brief(*v));
  return from_s(v->get<double>());
}

}  // namespace faultline::traces::internal
