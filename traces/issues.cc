#include "traces/issues.h"

namespace faultline::traces {

std::string Issue::text() const {
  std::string s = source.empty() ? "<memory>" : source;
  if (line > 0) s += ":" + std::to_string(line);
  s += ": ";
  if (!field.empty()) s += field + ": ";
  return s + reason;
}

void CollectingReporter::report(const Issue& issue) {
  ++count_;
  if (issues_.size() < keep_) issues_.push_back(issue);
}

void PrintingReporter::report(const Issue& issue) {
  ++count_;
  if (count_ <= max_ && out_) std::fprintf(out_, "%s\n", issue.text().c_str());
}

}  // namespace faultline::traces
