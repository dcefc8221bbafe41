// One flag table per command: each option's name, the value it takes, its help and how it
// applies, parsed by one loop with one usage-error wording ("PROGRAM: MESSAGE (see --help)",
// exit code 2) and one generated --help. Every program of the tree parses its command lines
// through it (faultline, faultline-live, faultline-trainjob, faultline-probe); the Python API
// builds `faultline` argv from these tables, so they are its contract too.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace faultline::cli {

// One option of a command.
struct Flag {
  std::string name;    // "--replicas"
  std::string arg;     // what --help shows after the name ("N"); empty: a switch
  std::string expect;  // what the value must be, for messages ("N >= 1"); empty: `arg`
  std::string help;    // its help; "\n" starts a line of its own
  // Applies the value ("" for a switch). Returns "", or the usage error without the
  // program's name ("--replicas: expected N >= 1, got 'x'").
  std::function<std::string(const std::string&)> apply;
  std::string alias = "";  // "-o", or ""
};

// The options of one command of one program.
class FlagTable {
 public:
  // `program` prefixes every message ("faultline"); `usage` is the first line of --help
  // after "usage: "; `about` the paragraph after it.
  FlagTable(std::string program, std::string usage, std::string about = "");

  FlagTable& add(Flag f);
  // Typed options; each value error reads "NAME: expected EXPECT, got 'VALUE'".
  FlagTable& toggle(const std::string& name, const std::string& help, bool* on);
  FlagTable& text(const std::string& name, const std::string& arg, const std::string& help,
                  std::string* out);  // a non-empty value
  FlagTable& texts(const std::string& name, const std::string& arg, const std::string& help,
                   std::vector<std::string>* out);  // repeatable, in order
  FlagTable& integer(const std::string& name, const std::string& arg, const std::string& expect,
                     const std::string& help, long long lo, long long hi, long long* out);
  FlagTable& integer(const std::string& name, const std::string& arg, const std::string& expect,
                     const std::string& help, long long lo, long long hi, int* out);
  FlagTable& number(const std::string& name, const std::string& arg, const std::string& expect,
                    const std::string& help, double lo, double hi, double* out);
  // An option whose value `accept` checks and stores; false is the usage error
  // "NAME: expected EXPECT, got 'VALUE'".
  FlagTable& value(const std::string& name, const std::string& arg, const std::string& expect,
                   const std::string& help, std::function<bool(const std::string&)> accept);
  FlagTable& choice(const std::string& name, const std::string& help,
                    std::vector<std::string> choices, std::string* out);
  // Arguments that are no option: `apply` takes each ("" or an error). Without it, an
  // argument that is no option is the usage error "unexpected argument X".
  FlagTable& positional(std::function<std::string(const std::string&)> apply);
  // One positional argument into `out`; a second is "unexpected argument X".
  FlagTable& positional(std::string* out);
  // What an option that is not in the table is told (default "unknown option X"): the probe
  // says which probe's option it is.
  FlagTable& unknown(std::function<std::string(const std::string&)> why);
  // Text after the options in --help.
  FlagTable& epilog(std::string text);
  // Also accept "--name=VALUE" for an option that takes a value (faultline-trainjob's form).
  FlagTable& inline_values();
  // A --help written by hand instead of the generated one (the analyze models keep theirs
  // until their options carry their own help).
  FlagTable& help_text(std::string text);

  // Parses `args`. -h or --help prints help() on stdout and returns 0; a bad option or value
  // prints the one usage error and returns 2; returns -1 when the command goes on. With
  // FAULTLINE_LIST_FLAGS=1 in the environment it prints the options' names, one a line,
  // and returns 0 (for the test that every --help lists every option).
  int parse(const std::vector<std::string>& args) const;
  // The same without printing: the help text (exit 0) or the usage error line (exit 2,
  // without its newline) goes into `message`.
  int parse(const std::vector<std::string>& args, std::string* message) const;
  // Applies this table's options wherever they stand in `args` and takes them out, with
  // their values, leaving every other argument in its order: for a program that removes an
  // option before it dispatches (--plugin) or looks for one (--mpi). No --help, no positional
  // arguments. Returns "", or the usage error without the program's name.
  std::string extract(std::vector<std::string>* args) const;
  std::string help() const;
  std::span<const Flag> flags() const { return flags_; }
  // Prints "PROGRAM: MESSAGE (see --help)" on stderr and returns 2, the usage exit code.
  int usage_error(const std::string& msg) const;

 private:
  // The option `a` names ("--name" or, with inline_values(), "--name=VALUE" into *inline_value);
  // nullptr when none.
  const Flag* find(std::string* a, std::optional<std::string>* inline_value) const;
  // Applies `f`, found at args[*i], taking its value from there on; "" or the usage error.
  std::string take(const Flag& f, const std::string& a,
                   const std::optional<std::string>& inline_value,
                   const std::vector<std::string>& args, std::size_t* i) const;

  std::string program_, usage_, about_, epilog_, help_text_;
  std::vector<Flag> flags_;
  std::function<std::string(const std::string&)> positional_, unknown_;
  bool inline_values_ = false;
};

// The one usage-error line, without its newline: "PROGRAM: MESSAGE (see --help)".
std::string usage_line(const std::string& program, const std::string& message);
// Whether `a` asks for help (-h or --help), for commands that dispatch to subcommands.
bool is_help(const std::string& a);
// "NAME: expected EXPECT" of `f` (its `arg` when it has no `expect`).
std::string expected(const Flag& f);
// A base-10 integer in [lo, hi], the whole string.
bool parse_int(const std::string& s, long long lo, long long hi, long long* out);
// A finite decimal number in [lo, hi], the whole string.
bool parse_double(const std::string& s, double lo, double hi, double* out);

}  // namespace faultline::cli
