// libFuzzer target: the generic reader. The input is a column map, a line "---", and
// a log; the map is validated (errors are fine, crashes are not) and, when valid,
// drives the reader. Inputs without the separator read a fixed CSV map, a JSON Lines
// map and the built-in fta map (tab-separated, padded, up records), and also go through
// the category-mapping parser.
#include "tests/fuzz/fuzz_common.h"
#include "traces/config.h"

namespace {

using namespace faultline::traces;

const ColumnMap& csv_map() {
  static const ColumnMap m = parse_column_map(R"({"format": "csv", "delimiter": ";",
      "time": {"field": "when", "date": "iso8601"}, "node": "host",
      "event": {"field": "kind", "start": ["down"], "end": ["up"], "fault": ["blip"], "ignore": ["note"]},
      "duration": {"field": "mins", "unit": "min"}, "class": "what", "level": {"value": "L"},
      "scope": {"field": "blast", "rack": ["tor"], "switch": ["sw"]}, "scope_id": "grp",
      "attributes": ["ticket", 7], "pairing": "lifo", "rejoin_ends_fault": true})",
                                              "csv-map");
  return m;
}

const ColumnMap& jsonl_map() {
  static const ColumnMap m =
      parse_column_map(R"({"format": "jsonl", "time": {"field": "t", "unit": "ms"},
      "node": "a.b", "event": {"field": "e", "start": ["s"], "end": ["e"], "join": ["j"]},
      "class": "c.0", "desc": "d", "attributes": ["x", "y.z"], "origin": "first"})",
                       "jsonl-map");
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t sep = text.find("\n---\n");
  if (sep != std::string::npos) {
    ColumnMap m;
    try {
      m = parse_column_map(text.substr(0, sep), "fuzz-map");
    } catch (const TraceError&) {
      return 0;
    }
    const std::string log = text.substr(sep + 5);
    faultline::traces::fuzz::run(reinterpret_cast<const std::uint8_t*>(log.data()), log.size(),
                                 Format::kColumns, &m);
    return 0;
  }
  faultline::traces::fuzz::run(data, size, Format::kColumns, &csv_map());
  faultline::traces::fuzz::run(data, size, Format::kColumns, &jsonl_map());
  faultline::traces::fuzz::run(data, size, Format::kFta);
  try {
    (void)parse_category_map(text, "fuzz-mapping");
  } catch (const TraceError&) {
  }
  return 0;
}
