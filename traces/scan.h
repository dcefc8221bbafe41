// Record scanners under the trace readers: JSON objects (one per line, or the elements
// of one top-level array) flattened into dotted keys, and RFC 4180 CSV rows.
//
// Hand-written rather than a JSON DOM because readers need the line of every record
// for their reports, must survive arbitrary bytes (they are fuzzed), and must read a
// million-record trace in well under a second. Nothing here throws or recurses deeper
// than kMaxDepth; every loop advances the cursor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::traces::scan {

enum class JType : std::uint8_t { kString, kNumber, kBool, kNull };

// One scalar of a flattened object. The views point into the scanned text when it
// needed no decoding, else into the field's own buffers; they stay valid until the
// record is reused (next object() or clear()) and while the text lives.
struct JField {
  std::string_view key;    // dotted path: {"a":{"b":1}} gives "a.b"; arrays give "a.0"
  std::string_view value;  // decoded string, number text, "true"/"false", "" for null
  JType type = JType::kNull;
  std::string key_buf, value_buf;
  bool key_owned = false, value_owned = false;
};

// A flattened object. Field storage is reused between records to avoid allocation.
class JRecord {
 public:
  void clear() { n_ = 0; }
  JField& add();
  // Adds a field that owns copies of its key and value (views fixed by seal()).
  void add_copy(std::string_view key, std::string_view value, JType type);
  // Points the views of owned fields at their buffers; call after the last add.
  void seal();
  std::size_t size() const { return n_; }
  const JField& operator[](std::size_t i) const { return fields_[i]; }
  // First field with this key, or null.
  const JField* find(std::string_view key) const;

 private:
  std::vector<JField> fields_;
  std::size_t n_ = 0;
};

constexpr int kMaxDepth = 32;

// A cursor over JSON text that tracks the line number.
class JsonCursor {
 public:
  explicit JsonCursor(std::string_view text) : s_(text) {}
  void skip_ws();
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void advance() {
    if (pos_ < s_.size()) ++pos_;
  }
  std::size_t pos() const { return pos_; }
  std::size_t line() const { return line_; }
  // Parses one object at the cursor into `rec` (cleared first). On failure returns
  // false with a reason in `err`; the cursor is then somewhere inside the object.
  bool object(JRecord& rec, std::string* err);
  // After a failure inside an array element: moves to the next line whose first
  // non-blank character is '{' (or to the end). Always advances.
  void resync_to_next_object_line();
  // Moves to just past the next newline (or the end).
  void skip_line();

 private:
  bool value(JRecord& rec, std::string& path, std::string_view stable_key, int depth,
             std::string* err);
  // A string at the cursor: `view` into the text when it has no escapes, else decoded
  // into `buf` (*owned set).
  bool string(std::string_view* view, std::string& buf, bool* owned, std::string* err);
  bool number(std::string_view* out, std::string* err);
  bool literal(std::string_view word, std::string* err);
  bool fail(std::string* err, const std::string& what);

  std::string_view s_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

// Splits CSV text into rows. Quoted fields may hold delimiters, doubled quotes and
// newlines; CRLF and LF both end a row. A line whose first character is `comment`
// (outside a quoted field) is a comment row.
class CsvCursor {
 public:
  CsvCursor(std::string_view text, char delimiter, char comment)
      : s_(text), delim_(delimiter), comment_(comment) {}
  enum class Row { kRecord, kComment, kBlank, kError, kEnd };
  // Reads the next row into `fields` (resized). `line` is the row's first line. On
  // kError `err` says why and the cursor has moved past the broken row's first line.
  // On kComment `fields` holds one element: the line after the comment character.
  Row next(std::vector<std::string>& fields, std::size_t& line, std::string* err);

 private:
  std::string_view s_;
  char delim_;
  char comment_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

// Strict number parsing: the whole text must be a finite number (leading/trailing
// blanks allowed). No locale, no exceptions.
bool parse_double(std::string_view s, double* out);
bool parse_int64(std::string_view s, std::int64_t* out);

// Appends `s` as a JSON string literal (quotes included). Invalid UTF-8 becomes U+FFFD
// so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view s);
// Appends `s` as a CSV field, quoted when it holds the delimiter, a quote, CR or LF,
// or leading/trailing blanks, or starts with the comment character.
void append_csv_field(std::string& out, std::string_view s, char delimiter);

}  // namespace faultline::traces::scan
