#include "realexec/trainjob/faults.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "realexec/trainjob/checkpoint.h"

namespace faultline::live::trainjob {
namespace {

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Splits off the first whitespace-delimited token of `s`; `s` keeps the (trimmed) rest.
std::string_view next_token(std::string_view& s) {
  s = trim(s);
  const auto e = s.find_first_of(" \t");
  const auto tok = s.substr(0, e);
  s = e == std::string_view::npos ? std::string_view{} : trim(s.substr(e));
  return tok;
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const std::string str(s);
  char* end = nullptr;
  out = std::strtod(str.c_str(), &end);
  return end == str.c_str() + str.size();
}

// Parses one trimmed, non-comment line; false with *error when malformed.
bool parse_line(std::string_view line, FaultDirective& d, std::string* error) {
  d = FaultDirective{};
  d.line = std::string(line);
  std::string_view rest = line;
  std::string_view tok = next_token(rest);
  d.local_ranks = {0};
  if (tok.starts_with("id=")) {
    const auto id = tok.substr(3);
    const bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (!ok) {
      *error = "bad id '" + std::string(id.substr(0, 64)) +
               "' (want 1 to 64 letters, digits, '.', '_' or '-')";
      return false;
    }
    d.id = std::string(id);
    tok = next_token(rest);
  }
  if (tok.starts_with("local_rank=")) {
    const auto target = tok.substr(11);
    d.local_ranks.clear();
    if (target == "all") {
      d.all_local_ranks = true;
    } else {
      std::string_view list = target;
      while (!list.empty()) {
        const auto comma = list.find(',');
        int k = -1;
        if (!parse_number(list.substr(0, comma), k) || k < 0) {
          *error = "bad local_rank target '" + std::string(target) + "' (want K, K1,K2 or all)";
          return false;
        }
        d.local_ranks.push_back(k);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      }
      if (d.local_ranks.empty()) {
        *error = "empty local_rank target";
        return false;
      }
    }
    tok = next_token(rest);
  }
  if (tok == "crash") {
    d.kind = FaultKind::kCrash;
    d.signature = rest.empty() ? "injected crash" : std::string(rest);
    return true;
  }
  if (tok == "hang" || tok == "nan") {
    d.kind = tok == "hang" ? FaultKind::kHang : FaultKind::kNan;
    if (!rest.empty()) {
      *error = std::string(tok) + " takes no arguments";
      return false;
    }
    return true;
  }
  if (tok == "slow") {
    d.kind = FaultKind::kSlow;
    const auto f = next_token(rest);
    if (!parse_double(f, d.factor) || !std::isfinite(d.factor) || d.factor <= 0 || !rest.empty()) {
      *error = "slow wants one positive FACTOR";
      return false;
    }
    return true;
  }
  if (tok == "sdc") {
    d.kind = FaultKind::kSdc;
    const auto arg = next_token(rest);
    if (!arg.empty()) {
      if (!arg.starts_with("after=") || !parse_number(arg.substr(6), d.after_steps) ||
          d.after_steps < 0 || !rest.empty()) {
        *error = "sdc takes an optional after=N (N >= 0)";
        return false;
      }
    }
    return true;
  }
  *error = tok.empty() ? "missing directive" : "unknown directive '" + std::string(tok) + "'";
  return false;
}

// The directive text of a line without its id= and local_rank= prefixes; *id_token gets the
// id= token ("" when none).
std::string_view body_of(std::string_view line, std::string_view* id_token) {
  std::string_view rest = line;
  auto tok = next_token(rest);
  *id_token = {};
  if (tok.starts_with("id=")) {
    *id_token = tok;
    line = rest;
    tok = next_token(rest);
  }
  return tok.starts_with("local_rank=") ? rest : trim(line);
}

}  // namespace

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kCrash:
      return "crash";
    case FaultKind::kHang:
      return "hang";
    case FaultKind::kNan:
      return "nan";
    case FaultKind::kSlow:
      return "slow";
    case FaultKind::kSdc:
      return "sdc";
  }
  return "?";
}

bool FaultDirective::applies_to(int local_rank) const {
  if (all_local_ranks) return true;
  for (int k : local_ranks) {
    if (k == local_rank) return true;
  }
  return false;
}

ParsedFaultFile parse_fault_text(std::string_view text) {
  ParsedFaultFile out;
  int line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const auto line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    FaultDirective d;
    std::string error;
    if (parse_line(line, d, &error)) {
      out.directives.push_back(std::move(d));
    } else {
      out.errors.push_back("line " + std::to_string(line_no) + ": " + error);
    }
  }
  return out;
}

std::optional<std::string> consume_in_text(std::string_view text, const std::string& line,
                                           int local_rank, int local_world_size) {
  std::string out;
  bool done = false;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto raw = nl == std::string_view::npos ? text : text.substr(0, nl + 1);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto trimmed = trim(raw);
    FaultDirective d;
    std::string error;
    if (done || trimmed != line || !parse_line(trimmed, d, &error) || !d.applies_to(local_rank)) {
      out.append(raw);
      continue;
    }
    done = true;
    std::vector<int> left;
    if (d.all_local_ranks) {
      for (int k = 0; k < local_world_size; ++k) {
        if (k != local_rank) left.push_back(k);
      }
    } else {
      for (int k : d.local_ranks) {
        if (k != local_rank) left.push_back(k);
      }
    }
    if (left.empty()) continue;  // the line is gone
    std::string_view id_token;
    const std::string_view body = body_of(trimmed, &id_token);
    std::string prefix = id_token.empty() ? "" : std::string(id_token) + " ";
    prefix += "local_rank=";
    for (std::size_t i = 0; i < left.size(); ++i) {
      if (i) prefix += ",";
      prefix += std::to_string(left[i]);
    }
    out += prefix + " " + std::string(body) + "\n";
  }
  if (!done) return std::nullopt;
  return out;
}

FaultFile::FaultFile(std::string path, int local_rank, int local_world_size)
    : path_(std::move(path)), local_rank_(local_rank), local_world_size_(local_world_size) {}

void FaultFile::poll() {
  if (path_.empty()) return;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    seen_ = false;
    active_.clear();
    return;
  }
  const std::int64_t mtime_ns =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (seen_ && st.st_ino == ino_ && st.st_size == size_ && mtime_ns == mtime_ns_) return;
  const auto text = read_whole_file(path_);
  if (!text) return;  // raced with a rename: try again at the next step boundary
  seen_ = true;
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ns_ = mtime_ns;
  auto parsed = parse_fault_text(*text);
  for (const auto& e : parsed.errors) {
    std::fprintf(stderr, "faultline-trainjob: fault file %s: %s (ignored)\n", path_.c_str(),
                 e.c_str());
  }
  active_.clear();
  for (auto& d : parsed.directives) {
    if (d.applies_to(local_rank_)) active_.push_back(std::move(d));
  }
}

bool FaultFile::consume(const FaultDirective& d) {
  if (path_.empty()) return false;
  const std::filesystem::path p(path_);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int lock_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd >= 0) {
    while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  bool consumed = false;
  if (const auto text = read_whole_file(path_)) {
    if (const auto rewritten = consume_in_text(*text, d.line, local_rank_, local_world_size_)) {
      std::string error;
      consumed = write_file_atomic(path_, *rewritten, &error);
      if (!consumed) {
        std::fprintf(stderr, "faultline-trainjob: cannot consume fault directive '%s': %s\n",
                     d.line.c_str(), error.c_str());
      }
    }
  }
  if (lock_fd >= 0) ::close(lock_fd);  // releases the lock
  seen_ = false;                       // re-read at the next poll
  return consumed;
}

const FaultDirective* FaultFile::persistent(FaultKind kind) const {
  const FaultDirective* found = nullptr;
  for (const auto& d : active_) {
    if (d.kind == kind) found = &d;
  }
  return found;
}

std::optional<double> FaultFile::slow_factor() const {
  std::optional<double> f;
  for (const auto& d : active_) {
    if (d.kind == FaultKind::kSlow) f = d.factor;
  }
  return f;
}

std::optional<std::int64_t> FaultFile::sdc_after() const {
  std::optional<std::int64_t> a;
  for (const auto& d : active_) {
    if (d.kind == FaultKind::kSdc) a = d.after_steps;
  }
  return a;
}

}  // namespace faultline::live::trainjob
