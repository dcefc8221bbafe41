// Calendar dates to seconds and back, without the C library's locale and time zone.
//
// Formats are a strftime subset: %Y %m %d %H %M %S %f (fraction of a second) %z (Z or
// +hh:mm) %b (Jan..Dec) %j (day of year) %s (Unix seconds, may be fractional) %T (=
// %H:%M:%S) %F (= %Y-%m-%d) %%; any other character matches itself. "iso8601" accepts
// YYYY-MM-DD, then optionally T or a blank, hh:mm[:ss[.fff]] and Z or +hh:mm. Times
// without a zone are UTC.
#pragma once

#include <string>
#include <string_view>

namespace faultline::traces {

// Parses `text` with `format`; false (and `err` set) when it does not match.
bool parse_date(std::string_view text, std::string_view format, double* unix_s, std::string* err);
// "2024-03-30T00:00:00Z" (fraction of a second added when not whole).
std::string format_iso8601(double unix_s);
// Checks a format string; false with `err` set when it uses an unsupported directive.
bool check_date_format(std::string_view format, std::string* err);

}  // namespace faultline::traces
