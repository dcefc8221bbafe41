// The options every simulation command shares (sim run, compare, sweep, tune, replay),
// in one table with one parser and one set of messages. A command parses its own options
// first and hands the rest here.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace faultline::cli {

struct SimFlags {
  std::vector<std::string> sets;  // --set PATH=VALUE, in order
  long long replicas = -1;        // -1: the scenario's
  long long seed = -1;            // -1: the scenario's
  long long jobs = 1;
  std::string out_dir;
  std::string format = "table";
  bool quiet = false;
  bool progress = false;      // --progress: the progress bar also when stderr is no terminal
  bool allow_unused = false;  // --allow-unused: policy.allow_unused_params=true

  // --seed, --replicas and --allow-unused as scenario overrides, after the --sets.
  std::vector<std::string> scenario_sets() const;
};

// One shared option: its name, whether a value follows, and what the value must be.
struct FlagSpec {
  const char* name;
  const char* value;  // nullptr: a switch
};
inline constexpr FlagSpec kSimFlags[] = {
    {"--replicas", "N >= 1"},
    {"--jobs", "J in [1, 4096]"},
    {"--seed", "S >= 0"},
    {"--set", "PATH=VALUE"},
    {"--format", "one of the command's formats"},
    {"--out", "a directory"},
    {"--quiet", nullptr},
    {"--progress", nullptr},
    {"--allow-unused", nullptr},
};

// If args[i] is a shared option, consumes it (and its value, advancing i) into `f` and
// returns 1; returns 0 when it is not one; prints "faultline: MESSAGE (see --help)" and
// returns -2 on a bad value. `formats` lists the values --format takes (the first is
// the default).
int sim_flag(const std::vector<std::string>& args, std::size_t& i, SimFlags& f,
             const std::vector<std::string>& formats);

// A command's own options are a table of the same shape, one per command (FlagSpec: the
// name, and what the value must be or nullptr for a switch). The entry of `table` named
// `a`, or nullptr.
const FlagSpec* find_flag(std::span<const FlagSpec> table, const std::string& a);
// The value after args[i], advancing i; nullptr (i unchanged) when args[i] is the last.
const std::string* flag_value(const std::vector<std::string>& args, std::size_t& i);
// "NAME: expected VALUE": the message of a missing or bad value of `spec`.
std::string expected(const FlagSpec& spec);
// An argument that is no known option: the first non-option one is the scenario (into
// `path`); an unknown option or a second argument is a usage error. Returns -1 when taken,
// else the exit code 2 (after printing the message).
int positional_arg(const std::string& a, std::string& path);

// Prints "faultline: MESSAGE (see --help)" and returns 2, the usage exit code.
int usage_error(const std::string& msg);
// A base-10 integer in [lo, hi], the whole string.
bool parse_int(const std::string& s, long long lo, long long hi, long long* out);

}  // namespace faultline::cli
