#include "traces/timefmt.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace faultline::traces {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<std::int64_t>(yoe) + era * 400 + (*m <= 2);
}

bool leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
unsigned days_in_month(std::int64_t y, unsigned m) {
  static const unsigned k[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : k[m - 1];
}

struct Parts {
  std::int64_t year = 1970;
  unsigned month = 1, day = 1, hour = 0, minute = 0, second = 0;
  int yday = -1;
  double frac = 0;
  int offset_s = 0;
  bool epoch = false;
  double epoch_s = 0;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool digits(int min, int max, std::int64_t* out) {
    std::int64_t v = 0;
    int n = 0;
    while (n < max && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_] - '0');
      ++i_;
      ++n;
    }
    *out = v;
    return n >= min;
  }
  bool lit(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool done() const { return i_ >= s_.size(); }
  std::size_t pos() const { return i_; }
  void skip(std::size_t n) { i_ += n; }
  std::string_view rest() const { return s_.substr(i_); }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

bool number_in(Reader& r, int min_digits, int max_digits, std::int64_t lo, std::int64_t hi,
               std::int64_t* out) {
  return r.digits(min_digits, max_digits, out) && *out >= lo && *out <= hi;
}

bool zone(Reader& r, Parts& p) {
  if (r.lit('Z') || r.lit('z')) return true;
  const char c = r.peek();
  if (c != '+' && c != '-') return false;
  r.skip(1);
  std::int64_t hh = 0, mm = 0;
  if (!number_in(r, 2, 2, 0, 23, &hh)) return false;
  r.lit(':');
  if (!number_in(r, 2, 2, 0, 59, &mm)) return false;
  p.offset_s = static_cast<int>((hh * 3600 + mm * 60) * (c == '-' ? -1 : 1));
  return true;
}

bool fraction(Reader& r, Parts& p) {
  std::size_t start = r.pos();
  double scale = 0.1, f = 0;
  int n = 0;
  while (r.peek() >= '0' && r.peek() <= '9') {
    if (n < 15) f += (r.peek() - '0') * scale;
    scale /= 10;
    r.skip(1);
    ++n;
  }
  p.frac = f;
  return r.pos() > start;
}

bool directive(Reader& r, char d, Parts& p) {
  std::int64_t v = 0;
  switch (d) {
    case 'Y': {
      bool neg = r.lit('-');
      if (!r.digits(4, 4, &v)) return false;
      p.year = neg ? -v : v;
      return true;
    }
    case 'm':
      if (!number_in(r, 1, 2, 1, 12, &v)) return false;
      p.month = static_cast<unsigned>(v);
      return true;
    case 'd':
      if (!number_in(r, 1, 2, 1, 31, &v)) return false;
      p.day = static_cast<unsigned>(v);
      return true;
    case 'H':
      if (!number_in(r, 1, 2, 0, 23, &v)) return false;
      p.hour = static_cast<unsigned>(v);
      return true;
    case 'M':
      if (!number_in(r, 1, 2, 0, 59, &v)) return false;
      p.minute = static_cast<unsigned>(v);
      return true;
    case 'S':
      if (!number_in(r, 1, 2, 0, 60, &v)) return false;
      p.second = static_cast<unsigned>(v);
      return true;
    case 'j':
      if (!number_in(r, 1, 3, 1, 366, &v)) return false;
      p.yday = static_cast<int>(v);
      return true;
    case 'f':
      return fraction(r, p);
    case 'z':
      return zone(r, p);
    case 'T':
      return directive(r, 'H', p) && r.lit(':') && directive(r, 'M', p) && r.lit(':') &&
             directive(r, 'S', p);
    case 'F':
      return directive(r, 'Y', p) && r.lit('-') && directive(r, 'm', p) && r.lit('-') &&
             directive(r, 'd', p);
    case 'b': {
      static const char* names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                    "jul", "aug", "sep", "oct", "nov", "dec"};
      std::string_view rest = r.rest();
      if (rest.size() < 3) return false;
      for (unsigned k = 0; k < 12; ++k) {
        bool eq = true;
        for (int c = 0; c < 3; ++c)
          if ((rest[c] | 0x20) != names[k][c]) eq = false;
        if (eq) {
          p.month = k + 1;
          r.skip(3);
          return true;
        }
      }
      return false;
    }
    case 's': {
      bool neg = r.lit('-');
      std::int64_t whole = 0;
      if (!r.digits(1, 12, &whole)) return false;
      p.epoch = true;
      p.epoch_s = static_cast<double>(whole);
      if (r.lit('.')) {
        if (!fraction(r, p)) return false;
        p.epoch_s += p.frac;
        p.frac = 0;
      }
      if (neg) p.epoch_s = -p.epoch_s;
      return true;
    }
    case '%':
      return r.lit('%');
  }
  return false;
}

bool finish(const Parts& p, double* unix_s, std::string* err) {
  if (p.epoch) {
    *unix_s = p.epoch_s;
    return true;
  }
  std::int64_t days;
  if (p.yday > 0) {
    if (p.yday > (leap(p.year) ? 366 : 365)) {
      if (err) *err = "day of year out of range";
      return false;
    }
    days = days_from_civil(p.year, 1, 1) + p.yday - 1;
  } else {
    if (p.day > days_in_month(p.year, p.month)) {
      if (err)
        *err =
            "day " + std::to_string(p.day) + " does not exist in month " + std::to_string(p.month);
      return false;
    }
    days = days_from_civil(p.year, p.month, p.day);
  }
  *unix_s = static_cast<double>(days) * 86400.0 + p.hour * 3600.0 + p.minute * 60.0 + p.second +
            p.frac - p.offset_s;
  return true;
}

bool parse_iso(Reader& r, Parts& p) {
  if (!directive(r, 'F', p)) return false;
  if (r.done()) return true;
  if (!r.lit('T') && !r.lit(' ') && !r.lit('t')) return false;
  if (!directive(r, 'H', p) || !r.lit(':') || !directive(r, 'M', p)) return false;
  if (r.lit(':')) {
    if (!directive(r, 'S', p)) return false;
    if ((r.lit('.') || r.lit(',')) && !fraction(r, p)) return false;
  }
  if (!r.done() && !zone(r, p)) return false;
  return true;
}

}  // namespace

bool check_date_format(std::string_view format, std::string* err) {
  if (format == "iso8601") return true;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (i + 1 >= format.size()) {
      if (err) *err = "format ends with a lone '%'";
      return false;
    }
    const char d = format[++i];
    if (std::string_view("YmdHMSjfzTFbs%").find(d) == std::string_view::npos) {
      if (err)
        *err = std::string("unsupported directive %") + d +
               " (supported: %Y %m %d %H %M %S %f %z %b %j %s %T %F %%, or \"iso8601\")";
      return false;
    }
  }
  return true;
}

bool parse_date(std::string_view text, std::string_view format, double* unix_s, std::string* err) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  Reader r(text);
  Parts p;
  auto bad = [&] {
    if (err) {
      std::string shown(text.substr(0, 40));
      *err = "expected a date like \"" + std::string(format) + "\", got \"" + shown + "\"";
    }
    return false;
  };
  if (format == "iso8601") {
    if (!parse_iso(r, p) || !r.done()) return bad();
    return finish(p, unix_s, err);
  }
  for (std::size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '%' && i + 1 < format.size()) {
      if (!directive(r, format[++i], p)) return bad();
    } else if (!r.lit(c)) {
      return bad();
    }
  }
  if (!r.done()) return bad();
  return finish(p, unix_s, err);
}

std::string format_iso8601(double unix_s) {
  if (!std::isfinite(unix_s) || std::fabs(unix_s) > 1e14) return "invalid";
  const double whole = std::floor(unix_s);
  const auto secs = static_cast<std::int64_t>(whole);
  std::int64_t days = secs / 86400;
  std::int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld", static_cast<long long>(y),
                m, d, static_cast<long long>(rem / 3600), static_cast<long long>(rem / 60 % 60),
                static_cast<long long>(rem % 60));
  std::string out = buf;
  const double frac = unix_s - whole;
  if (frac > 5e-7 && frac < 1 - 5e-7) {
    std::snprintf(buf, sizeof buf, "%.6f", frac);
    std::string f = buf + 1;  // ".xxxxxx"
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "Z";
}

}  // namespace faultline::traces
