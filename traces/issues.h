// Bad records: every reader reports them here and goes on (or stops, in strict mode).
//
// A real log has truncated lines, hand edits and fields in the wrong unit. A reader
// never throws on such input and never aborts the whole file for one record: it tells
// a Reporter where (source, line, field) and why, skips the record, and reads on.
// Strict mode turns the first issue into a stop, for pipelines that must not guess.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace faultline::traces {

struct Issue {
  std::string source;    // file name (or "<memory>")
  std::size_t line = 0;  // 1-based; 0 = the file as a whole
  std::string field;     // column or key; empty = the record as a whole
  std::string reason;
  // "source:line: field: reason"
  std::string text() const;
};

// Receives issues. Implementations must not throw.
class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void report(const Issue& issue) = 0;
};

// Keeps the first `keep` issues and counts all of them.
class CollectingReporter final : public Reporter {
 public:
  explicit CollectingReporter(std::size_t keep = 1000) : keep_(keep) {}
  void report(const Issue& issue) override;
  const std::vector<Issue>& issues() const { return issues_; }
  std::size_t count() const { return count_; }

 private:
  std::size_t keep_;
  std::size_t count_ = 0;
  std::vector<Issue> issues_;
};

// Prints the first `max_printed` issues to `out` (one line each) and counts the rest.
class PrintingReporter final : public Reporter {
 public:
  PrintingReporter(std::FILE* out, std::size_t max_printed) : out_(out), max_(max_printed) {}
  void report(const Issue& issue) override;
  std::size_t count() const { return count_; }

 private:
  std::FILE* out_;
  std::size_t max_;
  std::size_t count_ = 0;
};

struct ReadOptions {
  bool strict = false;           // stop at the first bad record
  Reporter* reporter = nullptr;  // may be null: issues are then only counted
};

}  // namespace faultline::traces
