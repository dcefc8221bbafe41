// Shared body of the trace-reader fuzz targets: read the input with one reader, then
// push whatever was read through pairing, statistics, fitting and both canonical
// writers, and check that the canonical form is a fixed point (writing what was read
// from a canonical file gives the same text). Any crash, sanitizer report or broken
// fixed point aborts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "traces/category_map.h"
#include "traces/fit.h"
#include "traces/readers.h"
#include "traces/stats.h"
#include "traces/writers.h"

namespace faultline::traces::fuzz {

inline void check_fixed_point(const Trace& t, Format f) {
  const std::string once = write_trace(t, f).text;
  ReadResult again = read_trace_text(once, f, "fixed-point", {});
  const std::string twice = write_trace(again.trace, f).text;
  if (!again.ok() || again.issues != 0 || once != twice) {
    std::fprintf(
        stderr,
        "canonical %s form is not a fixed point (%zu issues: %s)\n--- once\n%s\n--- twice\n%s\n",
        format_name(f), again.issues, again.first_issue.c_str(), once.c_str(), twice.c_str());
    std::abort();
  }
}

inline void exercise(ReadResult& r) {
  if (!r.error.empty()) return;
  Trace& t = r.trace;
  const TraceStats st = compute_stats(t);
  (void)stats_json(st);
  (void)stats_table(st);
  t.sort_by_time();
  if (t.events.size() <= 300) {  // fits iterate; keep the executions per second up
    FitOptions fo;
    fo.min_samples = 2;
    (void)fit_json(fit_trace(t, fo));
    (void)identity_category_map(t);
  }
  for (Format f : {Format::kInfiniteHbd, Format::kOobleck}) (void)write_trace(t, f);
  check_fixed_point(t, Format::kJsonl);
  check_fixed_point(t, Format::kCsv);
}

inline void run(const std::uint8_t* data, std::size_t size, Format f,
                const ColumnMap* cols = nullptr) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CollectingReporter rep(16);
  ReadOptions o;
  o.reporter = &rep;
  ReadResult r = read_trace_text(text, f, "fuzz", o, cols);
  exercise(r);
  o.strict = true;
  ReadResult s = read_trace_text(text, f, "fuzz", o, cols);
  if (s.ok() && s.records != r.records) {
    std::fprintf(stderr, "strict read kept %zu records, lenient %zu\n", s.records, r.records);
    std::abort();
  }
}

}  // namespace faultline::traces::fuzz
