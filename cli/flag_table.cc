#include "cli/flag_table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace faultline::cli {
namespace {

constexpr std::size_t kHelpColumn = 22;  // where an option's help starts in --help
// The one option every table has.
constexpr const char* kHelpName = "--help";
constexpr const char* kHelpAlias = "-h";

std::string got(const Flag& f, const std::string& v) { return expected(f) + ", got '" + v + "'"; }

// One option's lines of --help: "  NAME ARG" and its help from column kHelpColumn, a name
// too long for the column on a line of its own.
std::string help_lines(const std::string& left, const std::string& help) {
  std::string out = "  " + left;
  if (help.empty()) return out + "\n";
  if (out.size() + 1 > kHelpColumn)
    out += "\n" + std::string(kHelpColumn, ' ');
  else
    out += std::string(kHelpColumn - out.size(), ' ');
  for (char c : help) {
    out += c;
    if (c == '\n') out += std::string(kHelpColumn, ' ');
  }
  return out + "\n";
}

}  // namespace

std::string usage_line(const std::string& program, const std::string& message) {
  return program + ": " + message + " (see --help)";
}

bool is_help(const std::string& a) { return a == kHelpAlias || a == kHelpName; }

std::string expected(const Flag& f) {
  return f.name + ": expected " + (f.expect.empty() ? f.arg : f.expect);
}

bool parse_int(const std::string& s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_double(const std::string& s, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || *end || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

FlagTable::FlagTable(std::string program, std::string usage, std::string about)
    : program_(std::move(program)), usage_(std::move(usage)), about_(std::move(about)) {}

FlagTable& FlagTable::add(Flag f) {
  flags_.push_back(std::move(f));
  return *this;
}

FlagTable& FlagTable::toggle(const std::string& name, const std::string& help, bool* on) {
  return add({name, "", "", help, [on](const std::string&) {
                *on = true;
                return std::string();
              }});
}

FlagTable& FlagTable::text(const std::string& name, const std::string& arg, const std::string& help,
                           std::string* out) {
  Flag f{name, arg, "", help, nullptr};
  f.apply = [f, out](const std::string& v) {
    if (v.empty()) return got(f, v);
    *out = v;
    return std::string();
  };
  return add(std::move(f));
}

FlagTable& FlagTable::texts(const std::string& name, const std::string& arg,
                            const std::string& help, std::vector<std::string>* out) {
  return add({name, arg, "", help, [out](const std::string& v) {
                out->push_back(v);
                return std::string();
              }});
}

FlagTable& FlagTable::integer(const std::string& name, const std::string& arg,
                              const std::string& expect, const std::string& help, long long lo,
                              long long hi, long long* out) {
  Flag f{name, arg, expect, help, nullptr};
  f.apply = [f, lo, hi, out](const std::string& v) {
    return parse_int(v, lo, hi, out) ? std::string() : got(f, v);
  };
  return add(std::move(f));
}

FlagTable& FlagTable::integer(const std::string& name, const std::string& arg,
                              const std::string& expect, const std::string& help, long long lo,
                              long long hi, int* out) {
  Flag f{name, arg, expect, help, nullptr};
  f.apply = [f, lo, hi, out](const std::string& v) {
    long long x;
    if (!parse_int(v, lo, hi, &x)) return got(f, v);
    *out = static_cast<int>(x);
    return std::string();
  };
  return add(std::move(f));
}

FlagTable& FlagTable::number(const std::string& name, const std::string& arg,
                             const std::string& expect, const std::string& help, double lo,
                             double hi, double* out) {
  Flag f{name, arg, expect, help, nullptr};
  f.apply = [f, lo, hi, out](const std::string& v) {
    return parse_double(v, lo, hi, out) ? std::string() : got(f, v);
  };
  return add(std::move(f));
}

FlagTable& FlagTable::value(const std::string& name, const std::string& arg,
                            const std::string& expect, const std::string& help,
                            std::function<bool(const std::string&)> accept) {
  Flag f{name, arg, expect, help, nullptr};
  f.apply = [f, accept = std::move(accept)](const std::string& v) {
    return accept(v) ? std::string() : got(f, v);
  };
  return add(std::move(f));
}

FlagTable& FlagTable::choice(const std::string& name, const std::string& help,
                             std::vector<std::string> choices, std::string* out) {
  std::string all, bar;
  for (const auto& c : choices) {
    all += (all.empty() ? "" : " or ") + c;
    bar += (bar.empty() ? "" : "|") + c;
  }
  Flag f{name, bar, all, help, nullptr};
  f.apply = [f, choices, out](const std::string& v) {
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) return got(f, v);
    *out = v;
    return std::string();
  };
  return add(std::move(f));
}

FlagTable& FlagTable::positional(std::function<std::string(const std::string&)> apply) {
  positional_ = std::move(apply);
  return *this;
}

FlagTable& FlagTable::positional(std::string* out) {
  return positional([out](const std::string& a) {
    if (!out->empty()) return "unexpected argument " + a;
    *out = a;
    return std::string();
  });
}

FlagTable& FlagTable::unknown(std::function<std::string(const std::string&)> why) {
  unknown_ = std::move(why);
  return *this;
}

FlagTable& FlagTable::epilog(std::string text) {
  epilog_ = std::move(text);
  return *this;
}

FlagTable& FlagTable::help_text(std::string text) {
  help_text_ = std::move(text);
  return *this;
}

int FlagTable::usage_error(const std::string& msg) const {
  std::fprintf(stderr, "%s\n", usage_line(program_, msg).c_str());
  return 2;
}

FlagTable& FlagTable::inline_values() {
  inline_values_ = true;
  return *this;
}

int FlagTable::parse(const std::vector<std::string>& args) const {
  std::string message;
  const int rc = parse(args, &message);
  if (rc == 0) std::fputs(message.c_str(), stdout);
  if (rc == 2) std::fprintf(stderr, "%s\n", message.c_str());
  return rc;
}

int FlagTable::parse(const std::vector<std::string>& args, std::string* message) const {
  const auto usage = [&](const std::string& msg) {
    *message = usage_line(program_, msg);
    return 2;
  };
  // tests/cli/flag_help_test.py: every option of the table, one a line, to check that
  // --help lists them all.
  if (const char* list = std::getenv("FAULTLINE_LIST_FLAGS"); list && *list == '1') {
    for (const auto& f : flags_) *message += f.name + "\n";
    return 0;
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (is_help(a)) {
      *message = help();
      return 0;
    }
    std::optional<std::string> inline_value;
    std::string err;
    if (const Flag* f = find(&a, &inline_value)) {
      err = take(*f, a, inline_value, args, &i);
    } else if (a.size() > 1 && a[0] == '-') {
      err = unknown_ ? unknown_(a) : "unknown option " + a;
    } else {
      err = positional_ ? positional_(a) : "unexpected argument " + a;
    }
    if (!err.empty()) return usage(err);
  }
  return -1;
}

const Flag* FlagTable::find(std::string* a, std::optional<std::string>* inline_value) const {
  if (const auto eq = a->find('='); inline_values_ && a->rfind("--", 0) == 0 && eq != a->npos) {
    *inline_value = a->substr(eq + 1);
    *a = a->substr(0, eq);
  }
  const auto f = std::find_if(flags_.begin(), flags_.end(), [&](const Flag& x) {
    return x.name == *a || (!x.alias.empty() && x.alias == *a);
  });
  return f == flags_.end() ? nullptr : &*f;
}

std::string FlagTable::take(const Flag& f, const std::string& a,
                            const std::optional<std::string>& inline_value,
                            const std::vector<std::string>& args, std::size_t* i) const {
  if (f.arg.empty() && inline_value) return a + " takes no value";
  if (!f.arg.empty() && !inline_value && *i + 1 >= args.size()) return expected(f);
  return f.apply(f.arg.empty() ? std::string() : inline_value ? *inline_value : args[++*i]);
}

std::string FlagTable::extract(std::vector<std::string>* args) const {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args->size(); ++i) {
    std::string a = (*args)[i];
    std::optional<std::string> inline_value;
    if (const Flag* f = find(&a, &inline_value)) {
      if (std::string err = take(*f, a, inline_value, *args, &i); !err.empty()) return err;
    } else {
      rest.push_back((*args)[i]);
    }
  }
  *args = std::move(rest);
  return "";
}

std::string FlagTable::help() const {
  if (!help_text_.empty()) return help_text_;
  std::string out = "usage: " + usage_ + "\n";
  // A paragraph ends with one newline, however its text ends.
  const auto para = [](std::string text) {
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return "\n" + text + "\n";
  };
  if (!about_.empty()) out += para(about_);
  out += "\noptions:\n";
  for (const auto& f : flags_) {
    std::string left = f.alias.empty() ? f.name : f.alias + ", " + f.name;
    if (!f.arg.empty()) left += " " + f.arg;
    out += help_lines(left, f.help);
  }
  out += help_lines(std::string(kHelpAlias) + ", " + kHelpName, "this text");
  if (!epilog_.empty()) out += para(epilog_);
  return out;
}

}  // namespace faultline::cli
