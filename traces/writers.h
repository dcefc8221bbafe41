// Trace writers: the canonical JSON Lines and CSV forms (lossless: reading what they
// write gives the same trace), and the InfiniteHBD and Oobleck layouts (lossy where
// those formats have no field: a note says what was dropped).
#pragma once

#include <string>
#include <vector>

#include "traces/readers.h"
#include "traces/trace.h"

namespace faultline::traces {

struct WriteResult {
  std::string text;
  std::vector<std::string> notes;  // what the target format could not hold
};

// `format` is one of kJsonl, kCsv, kInfiniteHbd, kOobleck. Events are written in the
// trace's order (readers keep file order; sort first for a time-ordered file).
WriteResult write_trace(const Trace& t, Format format);

// Writes to `path` ("-" = stdout). Returns false with `err` set when it cannot.
bool write_text_file(const std::string& path, const std::string& text, std::string* err);

}  // namespace faultline::traces
