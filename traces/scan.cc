#include "traces/scan.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace faultline::traces::scan {

JField& JRecord::add() {
  if (n_ == fields_.size()) fields_.emplace_back();
  JField& f = fields_[n_++];
  f.key = {};
  f.value = {};
  f.type = JType::kNull;
  f.key_owned = f.value_owned = false;
  return f;
}

void JRecord::add_copy(std::string_view key, std::string_view value, JType type) {
  JField& f = add();
  f.key_buf.assign(key);
  f.value_buf.assign(value);
  f.key_owned = f.value_owned = true;
  f.type = type;
}

void JRecord::seal() {
  for (std::size_t i = 0; i < n_; ++i) {
    JField& f = fields_[i];
    if (f.key_owned) f.key = f.key_buf;
    if (f.value_owned) f.value = f.value_buf;
  }
}

const JField* JRecord::find(std::string_view key) const {
  for (std::size_t i = 0; i < n_; ++i)
    if (fields_[i].key == key) return &fields_[i];
  return nullptr;
}

// ------------------------------------------------------------------ JSON

void JsonCursor::skip_ws() {
  while (pos_ < s_.size()) {
    const char c = s_[pos_];
    if (c == '\n') {
      ++line_;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      return;
    }
    ++pos_;
  }
}

bool JsonCursor::fail(std::string* err, const std::string& what) {
  if (err) *err = what;
  return false;
}

namespace {
std::string describe_char(char c) {
  if (c == '\0') return "end of input";
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) {
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
  }
  return std::string("'") + c + "'";
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at s[pos] into *v, pos past them; false (pos unmoved) when they are not.
bool read_hex4(std::string_view s, std::size_t& pos, std::uint32_t* v) {
  if (s.size() - pos < 4) return false;
  std::uint32_t x = 0;
  for (int i = 0; i < 4; ++i) {
    const int h = hex_value(s[pos + i]);
    if (h < 0) return false;
    x = x * 16 + static_cast<std::uint32_t>(h);
  }
  pos += 4;
  *v = x;
  return true;
}

// A \u escape, pos just past the 'u': its character appended to `out` as UTF-8, a surrogate
// pair joined into one, a lone surrogate as U+FFFD (a high one followed by another \u escape
// that is not its low half: U+FFFD, then that escape's character). False on bad hex digits.
bool unicode_escape(std::string_view s, std::size_t& pos, std::string& out) {
  std::uint32_t cp = 0;
  if (!read_hex4(s, pos, &cp)) return false;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    std::uint32_t lo = 0;
    if (s.size() - pos >= 6 && s[pos] == '\\' && s[pos + 1] == 'u') {
      pos += 2;
      if (!read_hex4(s, pos, &lo)) return false;
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else {
        append_utf8(out, 0xFFFD);
        cp = lo >= 0xD800 && lo <= 0xDFFF ? 0xFFFD : lo;
      }
    } else {
      cp = 0xFFFD;
    }
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    cp = 0xFFFD;
  }
  append_utf8(out, cp);
  return true;
}
}  // namespace

bool JsonCursor::string(std::string_view* view, std::string& out, bool* owned, std::string* err) {
  // At the opening quote.
  ++pos_;
  const std::size_t start = pos_;
  *owned = false;
  // Fast path: no escapes, so the text itself is the value.
  std::size_t run = pos_;
  while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' &&
         static_cast<unsigned char>(s_[run]) >= 0x20)
    ++run;
  if (run < s_.size() && s_[run] == '"') {
    *view = s_.substr(start, run - start);
    pos_ = run + 1;
    return true;
  }
  *owned = true;
  out.clear();
  while (true) {
    // Copy the run of plain characters in one go.
    run = pos_;
    while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' &&
           static_cast<unsigned char>(s_[run]) >= 0x20)
      ++run;
    out.append(s_.data() + pos_, run - pos_);
    pos_ = run;
    if (pos_ >= s_.size()) return fail(err, "unterminated string");
    const char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      *view = out;
      return true;
    }
    if (c != '\\') return fail(err, "control character " + describe_char(c) + " inside a string");
    ++pos_;
    if (pos_ >= s_.size()) return fail(err, "unterminated escape");
    const char e = s_[pos_++];
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u':
        if (!unicode_escape(s_, pos_, out)) return fail(err, "bad \\u escape");
        break;
      default:
        return fail(err, "bad escape \\" + std::string(1, e));
    }
  }
}

bool JsonCursor::number(std::string_view* out, std::string* err) {
  const std::size_t start = pos_;
  auto digit = [&](std::size_t i) { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; };
  std::size_t i = pos_;
  if (i < s_.size() && s_[i] == '-') ++i;
  if (!digit(i)) return fail(err, "expected a digit, got " + describe_char(peek()));
  if (s_[i] == '0') {
    ++i;
  } else {
    while (digit(i)) ++i;
  }
  if (i < s_.size() && s_[i] == '.') {
    ++i;
    if (!digit(i)) return fail(err, "expected a digit after '.'");
    while (digit(i)) ++i;
  }
  if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
    ++i;
    if (i < s_.size() && (s_[i] == '+' || s_[i] == '-')) ++i;
    if (!digit(i)) return fail(err, "expected a digit in the exponent");
    while (digit(i)) ++i;
  }
  pos_ = i;
  *out = s_.substr(start, i - start);
  return true;
}

bool JsonCursor::literal(std::string_view word, std::string* err) {
  if (s_.substr(pos_, word.size()) != word) return fail(err, "unexpected " + describe_char(peek()));
  pos_ += word.size();
  return true;
}

bool JsonCursor::value(JRecord& rec, std::string& path, std::string_view stable_key, int depth,
                       std::string* err) {
  skip_ws();
  const char c = peek();
  if (c == '{' || c == '[') {
    if (depth >= kMaxDepth) return fail(err, "nested deeper than " + std::to_string(kMaxDepth));
    const bool obj = c == '{';
    ++pos_;
    const std::size_t base = path.size();
    skip_ws();
    if (peek() == (obj ? '}' : ']')) {
      ++pos_;
      return true;
    }
    std::string_view name;
    std::string name_buf;
    for (std::size_t index = 0;; ++index) {
      skip_ws();
      bool owned = true;
      if (obj) {
        if (peek() != '"') return fail(err, "expected a key string, got " + describe_char(peek()));
        if (!string(&name, name_buf, &owned, err)) return false;
        skip_ws();
        if (peek() != ':') return fail(err, "expected ':' after key, got " + describe_char(peek()));
        ++pos_;
      } else {
        name_buf = std::to_string(index);
        name = name_buf;
      }
      path.resize(base);
      if (base > 0 || depth > 0) path += '.';
      path += name;
      // A top-level key without escapes is its own text: no copy.
      const std::string_view stable = depth == 0 && !owned ? name : std::string_view();
      if (!value(rec, path, stable, depth + 1, err)) return false;
      path.resize(base);
      skip_ws();
      const char d = peek();
      if (d == ',') {
        ++pos_;
        continue;
      }
      if (d == (obj ? '}' : ']')) {
        ++pos_;
        return true;
      }
      return fail(
          err, std::string("expected ',' or '") + (obj ? '}' : ']') + "', got " + describe_char(d));
    }
  }
  JField& f = rec.add();
  if (stable_key.data() != nullptr) {
    f.key = stable_key;
  } else {
    f.key_buf = path;
    f.key_owned = true;
  }
  if (c == '"') {
    f.type = JType::kString;
    return string(&f.value, f.value_buf, &f.value_owned, err);
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    f.type = JType::kNumber;
    return number(&f.value, err);
  }
  if (c == 't' || c == 'f') {
    f.type = JType::kBool;
    f.value = c == 't' ? "true" : "false";
    return literal(f.value, err);
  }
  if (c == 'n') {
    f.type = JType::kNull;
    return literal("null", err);
  }
  return fail(err, "expected a value, got " + describe_char(c));
}

bool JsonCursor::object(JRecord& rec, std::string* err) {
  rec.clear();
  skip_ws();
  if (peek() != '{') return fail(err, "expected an object '{', got " + describe_char(peek()));
  std::string path;
  const bool ok = value(rec, path, std::string_view(), 0, err);
  rec.seal();
  return ok;
}

void JsonCursor::skip_line() {
  while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
  if (pos_ < s_.size()) {
    ++pos_;
    ++line_;
  }
}

void JsonCursor::resync_to_next_object_line() {
  skip_line();
  while (pos_ < s_.size()) {
    std::size_t i = pos_;
    while (i < s_.size() && (s_[i] == ' ' || s_[i] == '\t' || s_[i] == '\r')) ++i;
    if (i < s_.size() && s_[i] == '{') {
      pos_ = i;
      return;
    }
    skip_line();
  }
}

// ------------------------------------------------------------------ CSV

CsvCursor::Row CsvCursor::next(std::vector<std::string>& fields, std::size_t& line,
                               std::string* err) {
  fields.clear();
  if (pos_ >= s_.size()) return Row::kEnd;
  line = line_;
  auto end_of_line = [&](std::size_t i) {
    return i >= s_.size() || s_[i] == '\n' || s_[i] == '\r';
  };
  auto eat_newline = [&] {
    if (pos_ < s_.size() && s_[pos_] == '\r') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '\n') ++pos_;
    ++line_;
  };
  if (end_of_line(pos_)) {
    eat_newline();
    return Row::kBlank;
  }
  if (comment_ != '\0' && s_[pos_] == comment_) {
    std::size_t i = pos_ + 1;
    while (!end_of_line(i)) ++i;
    fields.emplace_back(s_.substr(pos_ + 1, i - pos_ - 1));
    pos_ = i;
    eat_newline();
    return Row::kComment;
  }
  const std::size_t row_start = pos_;
  const std::size_t row_line = line_;
  auto give_up = [&](const std::string& why) {
    // Skip the rest of the row's first physical line and go on from the next one.
    pos_ = row_start;
    line_ = row_line;
    while (!end_of_line(pos_)) ++pos_;
    eat_newline();
    fields.clear();
    if (err) *err = why;
    return Row::kError;
  };
  while (true) {
    std::string& f = fields.emplace_back();
    if (pos_ < s_.size() && s_[pos_] == '"') {
      ++pos_;
      while (true) {
        std::size_t run = pos_;
        while (run < s_.size() && s_[run] != '"') ++run;
        for (std::size_t k = pos_; k < run; ++k)
          if (s_[k] == '\n') ++line_;
        f.append(s_.data() + pos_, run - pos_);
        pos_ = run;
        if (pos_ >= s_.size()) return give_up("unterminated quoted field");
        ++pos_;  // the quote
        if (pos_ < s_.size() && s_[pos_] == '"') {
          f += '"';
          ++pos_;
          continue;
        }
        break;
      }
      if (!end_of_line(pos_) && s_[pos_] != delim_)
        return give_up("field " + std::to_string(fields.size()) + ": text after a closing quote");
    } else {
      std::size_t run = pos_;
      while (!end_of_line(run) && s_[run] != delim_) ++run;
      f.assign(s_.data() + pos_, run - pos_);
      pos_ = run;
    }
    if (end_of_line(pos_)) {
      if (pos_ < s_.size()) eat_newline();
      return Row::kRecord;
    }
    ++pos_;  // delimiter
  }
}

// ------------------------------------------------------------------ numbers and output

bool parse_double(std::string_view s, double* out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse_int64(std::string_view s, std::int64_t* out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  std::int64_t v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size()) return false;
  *out = v;
  return true;
}

void append_json_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        switch (c) {
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          default:
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Validate one UTF-8 sequence.
    int len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (ok) {
      const std::uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (ok) {
      out.append(s.data() + i, static_cast<std::size_t>(len));
      i += static_cast<std::size_t>(len);
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

void append_csv_field(std::string& out, std::string_view s, char delimiter) {
  bool quote = !s.empty() && (s.front() == ' ' || s.front() == '\t' || s.back() == ' ' ||
                              s.back() == '\t' || s.front() == '#');
  for (char c : s)
    if (c == delimiter || c == '"' || c == '\n' || c == '\r') quote = true;
  if (!quote) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

}  // namespace faultline::traces::scan
