// The points of a parameter sweep: which scenario fields take which values, and the
// stable name each point is stored under.
//
// A sweep is a cartesian product of axes. A grid axis (`--grid key=v1,v2,...`) is one
// field and its values; the zip axis (every `--zip key=a,b,...`, all of one length) is
// several fields that move together. Keys are `--set` paths (scenarios/scenario.h);
// values are kept as the text the user wrote (JSON, or else a string), so a point's
// `--set` arguments are exactly `key=value`. Axes vary in the order given, the first
// slowest, like nested loops.
//
// A point's identity is a hash of everything that decides its result except the grid
// it came from: the scenario file's bytes, the base `--set`s, seed and replica
// overrides, and its own assignments (sorted by key). So a rerun, a reordered or
// extended grid, and `sim tune` find the points already computed under the same
// directory. Pure code, no simulator; throws PlanError on bad input.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace faultline::analysis {

class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Axis {
  std::vector<std::string> keys;                 // one for a grid axis, several for the zip axis
  std::vector<std::vector<std::string>> values;  // values[i][k]: i-th setting of keys[k]
};

// One `key=v1,v2,...` argument. Values are split on commas outside brackets, braces
// and double quotes, so `policy.params={"a":1,"b":2}` is one value. Throws PlanError
// naming `flag` when the key or a value is empty.
std::pair<std::string, std::vector<std::string>> parse_axis_arg(const std::string& arg,
                                                                const std::string& flag);

using Assignment = std::vector<std::pair<std::string, std::string>>;  // (key, value text)

struct SweepPoint {
  Assignment params;  // in axis order
  std::string id;     // directory name: readable prefix and a 16-hex-digit hash
};

// Everything but the axes that decides a point's result.
struct SweepBase {
  std::string scenario_text;  // the scenario file's bytes
  std::vector<std::string> sets;
  long long seed = -1;      // -1: the scenario's
  long long replicas = -1;  // -1: the scenario's
};

// Expands the axes into points (cartesian product, first axis slowest). Throws
// PlanError when a key appears twice or zip lists differ in length.
std::vector<SweepPoint> expand(const SweepBase& base, const std::vector<Axis>& axes);

// The point's stable id (see above); pure function of base and params.
std::string point_id(const SweepBase& base, const Assignment& params);

// FNV-1a, 64 bits.
std::uint64_t fnv1a64(const std::string& s, std::uint64_t h = 0xcbf29ce484222325ull);

// Shortest text that reads back to the same double ("1800", "0.1", "1e-06").
std::string format_double(double x);

// One CSV field: quoted (with doubled quotes) when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

}  // namespace faultline::analysis
