// The trace readers' entry points and container scanners (see readers.h): format names
// and detection, the JSON (JSON Lines or one array) and CSV scanners that fill a
// RecordView per record through the column map, and reading from memory or a mapped
// file. What each field means is record_interpreter.cc's; column maps are column_map.cc's.
#include "traces/readers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "traces/config.h"
#include "traces/record_interpreter.h"
#include "traces/scan.h"

namespace faultline::traces {

namespace {

using internal::Interpreter;
using internal::RecordView;
using internal::Sink;
using internal::Slot;

// ------------------------------------------------------------------ JSON containers

// Fills a RecordView from a flattened JSON record through the column map.
class JsonBinder {
 public:
  explicit JsonBinder(const ColumnMap& map) : map_(map) {
    if (map.canonical) return;
    attr_names_.reserve(map.attributes.size());
    for (const auto& a : map.attributes) attr_names_.push_back(a.name);
  }
  void bind(const scan::JRecord& rec, RecordView& v, Sink& sink, std::size_t line,
            std::set<std::string>& warned) {
    v.clear();
    if (map_.canonical) {
      bind_canonical(rec, v, sink, line, warned);
      return;
    }
    auto get = [&](const FieldRef& f, Slot& s) {
      if (f.is_constant) {
        s.set(f.constant);
      } else if (!f.name.empty()) {
        if (const scan::JField* jf = rec.find(f.name))
          s.set(jf->value, jf->type == scan::JType::kNull);
      }
    };
    get(map_.time, v.time);
    get(map_.end_time, v.end_time);
    if (map_.node_parts.empty()) {
      get(map_.node, v.node);
    } else {
      v.node_parts.resize(map_.node_parts.size());
      for (std::size_t i = 0; i < map_.node_parts.size(); ++i)
        get(map_.node_parts[i], v.node_parts[i]);
    }
    get(map_.event, v.event);
    get(map_.duration, v.duration);
    get(map_.level, v.level);
    get(map_.cls, v.cls);
    get(map_.desc, v.desc);
    get(map_.scope, v.scope);
    get(map_.scope_id, v.scope_id);
    for (const auto& a : map_.attributes) {
      Slot s;
      get(a, s);
      if (s.present) v.attrs.emplace_back(a.name, s);
    }
  }

 private:
  void bind_canonical(const scan::JRecord& rec, RecordView& v, Sink& sink, std::size_t line,
                      std::set<std::string>& warned) {
    for (std::size_t i = 0; i < rec.size(); ++i) {
      const scan::JField& f = rec[i];
      const std::string_view k = f.key;
      const bool null = f.type == scan::JType::kNull;
      Slot* s = nullptr;
      switch (k.size()) {
        case 4:
          if (k == "node")
            s = &v.node;
          else if (k == "desc")
            s = &v.desc;
          break;
        case 5:
          if (k == "event")
            s = &v.event;
          else if (k == "level")
            s = &v.level;
          else if (k == "class")
            s = &v.cls;
          else if (k == "scope")
            s = &v.scope;
          break;
        case 6:
          if (k == "time_s") s = &v.time;
          break;
        case 8:
          if (k == "scope_id") s = &v.scope_id;
          break;
        case 10:
          if (k == "duration_s") s = &v.duration;
          break;
        default:
          break;
      }
      if (s) {
        s->set(f.value, null);
        continue;
      }
      if (k.size() >= 6 && k.compare(0, 6, "attrs.") == 0) {
        Slot a;
        a.set(f.value, null);
        v.attrs.emplace_back(k.substr(6), a);
        continue;
      }
      if (warned.insert(std::string(k)).second)
        sink.issue(line, std::string(k), "unknown key ignored", false);
    }
  }

  const ColumnMap& map_;
  std::vector<std::string> attr_names_;
};

void read_json(std::string_view text, const ColumnMap& map, Trace& trace, Sink& sink,
               ReadResult& res) {
  Interpreter in(map, trace, sink, res);
  JsonBinder binder(map);
  scan::JRecord rec;
  RecordView view;
  std::set<std::string> warned;
  std::string err;
  auto handle = [&](std::size_t line) {
    if (map.canonical && rec.size() > 0 && rec[0].key.compare(0, 5, "meta.") == 0)
      return in.meta(rec, line, 0);
    binder.bind(rec, view, sink, line, warned);
    if (sink.stopped()) return false;
    return in.record(view, line);
  };
  scan::JsonCursor c(text);
  if (map.container == Container::kJsonl) {
    while (true) {
      c.skip_ws();
      if (c.at_end()) break;
      const std::size_t line = c.line();
      if (!c.object(rec, &err)) {
        if (sink.issue(line, "", "invalid JSON: " + err)) return;
        c.skip_line();
        continue;
      }
      // The rest of the line must be blank.
      while (!c.at_end() && (c.peek() == ' ' || c.peek() == '\t' || c.peek() == '\r')) c.advance();
      if (!c.at_end() && c.peek() != '\n') {
        if (sink.issue(line, "", "text after the JSON object")) return;
        c.skip_line();
        continue;
      }
      if (!handle(line)) return;
    }
  } else {
    c.skip_ws();
    if (c.peek() != '[') {
      sink.issue(c.line(), "", "expected a JSON array of records");
      return;
    }
    c.advance();
    bool expect_more = false;
    while (true) {
      c.skip_ws();
      if (c.at_end()) {
        sink.issue(c.line(), "", "unterminated array (missing ']')", false);
        break;
      }
      if (c.peek() == ']' && !expect_more) {
        c.advance();
        c.skip_ws();
        if (!c.at_end()) sink.issue(c.line(), "", "text after the closing ']' ignored", false);
        break;
      }
      const std::size_t line = c.line();
      if (!c.object(rec, &err)) {
        if (sink.issue(line, "", "invalid JSON: " + err)) return;
        c.resync_to_next_object_line();
        expect_more = false;
        continue;
      }
      if (!handle(line)) return;
      c.skip_ws();
      if (c.peek() == ',') {
        c.advance();
        expect_more = true;
      } else if (c.peek() == ']') {
        expect_more = false;
      } else {
        if (sink.issue(c.line(), "", "expected ',' or ']' after a record")) return;
        c.resync_to_next_object_line();
        expect_more = false;
      }
    }
  }
  in.finish();
}

// ------------------------------------------------------------------ CSV

// The column of every field the column map names, once the header is known, and the
// filling of a RecordView from a row through them.
class CsvColumns {
 public:
  CsvColumns(const ColumnMap& map, Sink& sink) : map_(map), sink_(sink) {}

  // Binds each field to its column (`header`: the header row at line `hline`, or null
  // without one). False when reading must stop: a required column is missing, or strict
  // mode stopped at an unknown column.
  bool bind(const std::vector<std::string>* header, std::size_t hline) {
    for (const FieldRef& part : map_.node_parts) {
      const int col = column(part, header);
      if (col == -2) {
        sink_.issue(hline, part.name, "column \"" + part.name + "\" is not in the header");
        return false;
      }
      part_cols_.push_back(col);
    }
    if (!bind_fields(header, hline)) return false;
    for (const auto& a : map_.attributes) {
      const int col = column(a, header);
      if (col >= 0)
        attr_cols_.emplace_back(
            a.index >= 0 && a.name.empty() ? "column" + std::to_string(a.index) : a.name, col);
    }
    if (!map_.attributes_object.empty() && header) {
      for (std::size_t i = 0; i < header->size(); ++i)
        if ((*header)[i] == map_.attributes_object) attrs_col_ = static_cast<int>(i);
    }
    if (map_.canonical && header) {
      static const std::set<std::string> known = {"time_s",   "node", "event",      "level",
                                                  "class",    "desc", "duration_s", "scope",
                                                  "scope_id", "attrs"};
      for (const auto& h : *header)
        if (!known.count(h) && sink_.issue(hline, h, "unknown column ignored", false)) return false;
    }
    return true;
  }

  void fill(const std::vector<std::string>& row, RecordView& view) const {
    view.clear();
    // A padded export's value without its padding (ColumnMap::trim).
    auto cell = [&](int col) -> std::string_view {
      std::string_view v = row[static_cast<std::size_t>(col)];
      if (!map_.trim) return v;
      const std::size_t b = v.find_first_not_of(" \t");
      if (b == std::string_view::npos) return {};
      return v.substr(b, v.find_last_not_of(" \t") - b + 1);
    };
    for (const Bound& b : bound_) {
      if (b.ref->is_constant) {
        (view.*(b.slot)).set(b.ref->constant);
      } else if (b.index < static_cast<int>(row.size())) {
        (view.*(b.slot)).set(cell(b.index));
      }
    }
    view.node_parts.resize(part_cols_.size());
    for (std::size_t i = 0; i < part_cols_.size(); ++i)
      if (part_cols_[i] < static_cast<int>(row.size())) view.node_parts[i].set(cell(part_cols_[i]));
    for (const auto& [name, col] : attr_cols_) {
      if (col < static_cast<int>(row.size()) && !cell(col).empty()) {
        Slot s;
        s.set(cell(col));
        view.attrs.emplace_back(name, s);
      }
    }
    if (attrs_col_ >= 0 && attrs_col_ < static_cast<int>(row.size()) &&
        !row[static_cast<std::size_t>(attrs_col_)].empty())
      view.attrs_text.set(row[static_cast<std::size_t>(attrs_col_)]);
  }

 private:
  struct Bound {
    const FieldRef* ref;
    Slot RecordView::*slot;
    int index;
  };

  // The field's column: -1 for none (a constant, an unset field, a name without a
  // header), -2 for a name the header lacks.
  static int column(const FieldRef& f, const std::vector<std::string>* header) {
    if (f.is_constant || !f.set()) return -1;
    if (f.index >= 0) return f.index;
    if (!header) return -1;
    for (std::size_t i = 0; i < header->size(); ++i)
      if ((*header)[i] == f.name) return static_cast<int>(i);
    return -2;
  }

  // The single-valued fields; false when a required one's column is missing.
  bool bind_fields(const std::vector<std::string>* header, std::size_t hline) {
    const std::pair<const FieldRef*, Slot RecordView::*> refs[] = {
        {&map_.time, &RecordView::time},         {&map_.end_time, &RecordView::end_time},
        {&map_.node, &RecordView::node},         {&map_.event, &RecordView::event},
        {&map_.duration, &RecordView::duration}, {&map_.level, &RecordView::level},
        {&map_.cls, &RecordView::cls},           {&map_.desc, &RecordView::desc},
        {&map_.scope, &RecordView::scope},       {&map_.scope_id, &RecordView::scope_id}};
    for (const auto& [ref, slot] : refs) {
      if (ref == &map_.node && !map_.node_parts.empty()) continue;
      const int col = column(*ref, header);
      if (col == -2) {
        const bool required = ref == &map_.time || ref == &map_.node || ref == &map_.end_time ||
                              (ref == &map_.event && map_.canonical);
        // A missing optional column is simply absent in every row.
        if (required) {
          sink_.issue(hline, ref->name, "column \"" + ref->name + "\" is not in the header");
          return false;
        }
        continue;
      }
      if (col >= 0 || ref->is_constant) bound_.push_back({ref, slot, col});
    }
    return true;
  }

  const ColumnMap& map_;
  Sink& sink_;
  std::vector<Bound> bound_;
  std::vector<int> part_cols_;  // composite node key: the column of each part
  std::vector<std::pair<std::string, int>> attr_cols_;
  int attrs_col_ = -1;
};

// A canonical CSV's "# meta {...}" comment row, handed to the meta-record handler as
// "meta.x" keys. Returns false when reading must stop.
bool read_csv_meta(const std::string& cell, std::size_t line, Interpreter& in, Sink& sink) {
  scan::JsonCursor jc(std::string_view(cell).substr(5));
  scan::JRecord rec;
  std::string jerr;
  if (!jc.object(rec, &jerr)) return !sink.issue(line, "meta", "invalid JSON: " + jerr, false);
  scan::JRecord keyed;
  for (std::size_t i = 0; i < rec.size(); ++i)
    keyed.add_copy("meta." + std::string(rec[i].key), rec[i].value, rec[i].type);
  keyed.seal();
  return in.meta(keyed, line, 0);
}

void read_csv(std::string_view text, const ColumnMap& map, Trace& trace, Sink& sink,
              ReadResult& res) {
  Interpreter in(map, trace, sink, res);
  scan::CsvCursor c(text, map.delimiter, map.comment);
  std::vector<std::string> row;
  std::size_t line = 0;
  std::string err;
  CsvColumns columns(map, sink);
  bool have_header = !map.header;
  if (!map.header && !columns.bind(nullptr, 0)) return;
  RecordView view;
  while (true) {
    const auto kind = c.next(row, line, &err);
    if (kind == scan::CsvCursor::Row::kEnd) break;
    if (kind == scan::CsvCursor::Row::kBlank) continue;
    if (kind == scan::CsvCursor::Row::kError) {
      if (sink.issue(line, "", err)) return;
      continue;
    }
    if (kind == scan::CsvCursor::Row::kComment) {
      if (map.canonical && row.size() == 1 && row[0].compare(0, 5, "meta ") == 0 &&
          !read_csv_meta(row[0], line, in, sink))
        return;
      continue;
    }
    if (!have_header) {
      have_header = true;
      if (!columns.bind(&row, line)) return;
      continue;
    }
    columns.fill(row, view);
    if (!in.record(view, line)) return;
  }
  in.finish();
}

}  // namespace

const char* format_name(Format f) {
  switch (f) {
    case Format::kAuto:
      return "auto";
    case Format::kJsonl:
      return "jsonl";
    case Format::kCsv:
      return "csv";
    case Format::kInfiniteHbd:
      return "infinitehbd";
    case Format::kOobleck:
      return "oobleck";
    case Format::kColumns:
      return "columns";
    case Format::kFta:
      return "fta";
  }
  return "?";
}

bool parse_format(std::string_view s, Format* out) {
  for (Format f : {Format::kAuto, Format::kJsonl, Format::kCsv, Format::kInfiniteHbd,
                   Format::kOobleck, Format::kColumns, Format::kFta})
    if (s == format_name(f)) {
      *out = f;
      return true;
    }
  return false;
}

Format detect_format(std::string_view text, const std::string& path) {
  auto ends = [&](std::string_view suf) {
    return path.size() >= suf.size() &&
           path.compare(path.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(".jsonl") || ends(".ndjson")) return Format::kJsonl;
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
    ++i;
  if (i < text.size() && text[i] == '[') return Format::kInfiniteHbd;
  if (i < text.size() && text[i] == '{') return Format::kJsonl;
  // First non-comment line: "digits,add|remove,name" is Oobleck.
  while (i < text.size() && text[i] == '#') {
    while (i < text.size() && text[i] != '\n') ++i;
    while (i < text.size() && (text[i] == '\n' || text[i] == '\r')) ++i;
  }
  std::size_t j = i;
  while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
  if (j > i) {
    std::string_view rest = text.substr(j);
    if (rest.substr(0, 5) == ",add," || rest.substr(0, 8) == ",remove,") return Format::kOobleck;
  }
  return Format::kCsv;
}

ReadResult read_trace_text(std::string_view text, Format format, const std::string& source,
                           const ReadOptions& opt, const ColumnMap* columns) {
  ReadResult res;
  try {
    if (format == Format::kAuto) format = detect_format(text, source);
    ColumnMap builtin;
    const ColumnMap* map = columns;
    if (format == Format::kColumns) {
      if (!columns) {
        res.error = source + ": format \"columns\" needs a column map";
        return res;
      }
    } else {
      builtin = builtin_column_map(format);
      map = &builtin;
    }
    res.trace.source = source;
    res.trace.format =
        format == Format::kColumns ? "columns:" + columns->name : format_name(format);
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    Sink sink(opt, res, source);
    if (map->container == Container::kCsv) {
      read_csv(text, *map, res.trace, sink, res);
    } else {
      read_json(text, *map, res.trace, sink, res);
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Nothing above throws by design; this is a last line so callers never see one.
    res.error = source + ": " + e.what();
  }
  return res;
}

namespace {

// A read-only view of a whole file: mapped when possible (no copy, no zeroed pages
// for a 150 MB trace), else read into memory.
class FileText {
 public:
  explicit FileText(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error_ = path + ": cannot open file";
      return;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p =
          ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        map_ = p;
        size_ = static_cast<std::size_t>(st.st_size);
        ::madvise(p, size_, MADV_SEQUENTIAL);
        ::close(fd);
        return;
      }
    }
    ::close(fd);
    try {
      copy_ = read_text_file(path);
    } catch (const TraceError& e) {
      error_ = e.what();
    }
  }
  ~FileText() {
    if (map_) ::munmap(map_, size_);
  }
  FileText(const FileText&) = delete;
  FileText& operator=(const FileText&) = delete;
  std::string_view text() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : copy_;
  }
  const std::string& error() const { return error_; }

 private:
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::string copy_;
  std::string error_;
};

}  // namespace

ReadResult read_trace_file(const std::string& path, Format format, const ReadOptions& opt,
                           const ColumnMap* columns) {
  const FileText file(path);
  if (!file.error().empty()) {
    ReadResult res;
    res.error = file.error();
    return res;
  }
  return read_trace_text(file.text(), format, path, opt, columns);
}

}  // namespace faultline::traces
