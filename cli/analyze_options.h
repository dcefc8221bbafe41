// The command line of the `faultline analyze` models, shared by analyze_cmd.cc (which
// defines it) and localize_cmd.cc: each model's "--name VALUE" options checked against its
// list, numbers with their bounds, the usage messages, and the table-or-JSON output of
// --format. In a namespace of its own: cli/flags.h has a usage_error of the same shape.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::cli {

// faultline analyze localize ... (localize_cmd.cc)
int analyze_localize(const std::vector<std::string>& args);

namespace analyze_options {

// Prints "faultline: MESSAGE (see --help)" and returns 2, the usage exit code.
int usage_error(const std::string& msg);
// A finite number, the whole string.
bool parse_double(const std::string& s, double* out);

// The options of one model.
struct Options {
  std::map<std::string, std::string> values;  // --name VALUE, the last of each name
  std::string format = "table";
  std::vector<std::string> positional;
  std::vector<std::string> sets;  // --set, in order
  bool strict = false;            // --strict
};

// One option of a model: its name, what --help shows after it (empty for --strict, a
// switch) and its help.
struct Option {
  std::string name, arg, help;
};
// A model's command line: its --help is generated from `usage`, `about` and `options`
// (--format last).
struct Model {
  std::string usage, about;
  std::vector<Option> options;
};

// Parses the "--name VALUE" options of `model` (--format, --help and, when the model has
// them, --strict and the repeatable --set are handled too) into `o`. Returns an exit code
// >= 0 to stop with, or -1.
int parse_options(const std::vector<std::string>& args, const Model& model, Options* o);

// A required or optional number option (`def` when absent) that must be >= lo (> lo when
// lo_open). Returns false after printing a usage error.
bool number(const Options& o, const std::string& name, bool required, double def, double lo,
            double* out, bool lo_open = false);

// `x` with `prec` significant digits.
std::string fmt(double x, int prec = 6);
// `x` as a percentage with `decimals` decimals, "12.345%".
std::string pct(double x, int decimals = 3);
// Prints `j` (--format json) or `table`; returns 0.
int emit(const Options& o, const nlohmann::ordered_json& j, const std::string& table);

}  // namespace analyze_options
}  // namespace faultline::cli
