// The flag table (cli/flag_table.h): typed options, the one usage-error wording, the
// generated --help.
#include "cli/flag_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace faultline::cli {
namespace {

struct Parsed {
  int rc;
  std::string err;
};

Parsed parse(const FlagTable& t, const std::vector<std::string>& args) {
  ::testing::internal::CaptureStderr();
  const int rc = t.parse(args);
  return {rc, ::testing::internal::GetCapturedStderr()};
}

TEST(FlagTable, TypedOptionsApplyTheirValues) {
  long long n = 0;
  double x = 0;
  bool on = false;
  std::string format = "table", path;
  std::vector<std::string> sets;
  FlagTable t("prog", "prog FILE [options]");
  t.integer("--n", "N", "N in [1, 9]", "a count", 1, 9, &n)
      .number("--x", "X", "X in [0, 1]", "a share", 0, 1, &x)
      .toggle("--on", "a switch", &on)
      .choice("--format", "output", {"table", "json"}, &format)
      .texts("--set", "K=V", "repeatable", &sets)
      .positional(&path);
  EXPECT_EQ(parse(t, {"f", "--n", "3", "--x", "0.5", "--on", "--format", "json", "--set", "a=1",
                      "--set", "b=2"})
                .rc,
            -1);
  EXPECT_EQ(n, 3);
  EXPECT_EQ(x, 0.5);
  EXPECT_TRUE(on);
  EXPECT_EQ(format, "json");
  EXPECT_EQ(sets, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(path, "f");
}

TEST(FlagTable, BadInputIsOneUsageErrorLine) {
  long long n = 0;
  std::string format = "table", path;
  FlagTable t("prog", "prog FILE");
  t.integer("--n", "N", "N in [1, 9]", "a count", 1, 9, &n)
      .choice("--format", "output", {"table", "json"}, &format)
      .positional(&path);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--n", "0"}, "prog: --n: expected N in [1, 9], got '0' (see --help)\n"},
      {{"--n"}, "prog: --n: expected N in [1, 9] (see --help)\n"},
      {{"--format", "xml"}, "prog: --format: expected table or json, got 'xml' (see --help)\n"},
      {{"--bogus"}, "prog: unknown option --bogus (see --help)\n"},
      {{"a", "b"}, "prog: unexpected argument b (see --help)\n"},
  };
  for (const auto& [args, want] : cases) {
    path.clear();
    const Parsed p = parse(t, args);
    EXPECT_EQ(p.rc, 2) << args[0];
    EXPECT_EQ(p.err, want);
  }
}

TEST(FlagTable, HelpIsGeneratedFromTheTable) {
  bool on = false;
  std::string out;
  FlagTable t("prog", "prog [options]", "What it does.");
  t.toggle("--on", "a switch\nover two lines", &on).text("--out", "FILE", "where to", &out);
  t.epilog("After.");
  EXPECT_EQ(t.help(),
            "usage: prog [options]\n\nWhat it does.\n\noptions:\n"
            "  --on                a switch\n"
            "                      over two lines\n"
            "  --out FILE          where to\n"
            "  -h, --help          this text\n\nAfter.\n");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(t.parse({"--out", "x", "--help"}), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), t.help());
}

TEST(FlagTable, ValueChecksWhatItStores) {
  std::vector<std::string> kv;
  FlagTable t("prog", "prog");
  t.value("--opt", "KEY=VALUE", "KEY=VALUE", "an option", [&kv](const std::string& v) {
    if (v.find('=') == std::string::npos) return false;
    kv.push_back(v);
    return true;
  });
  EXPECT_EQ(parse(t, {"--opt", "a=1", "--opt", "b=2"}).rc, -1);
  EXPECT_EQ(kv, (std::vector<std::string>{"a=1", "b=2"}));
  const Parsed bad = parse(t, {"--opt", "a"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err, "prog: --opt: expected KEY=VALUE, got 'a' (see --help)\n");
}

// extract(): a program takes its own options out of a command line before it dispatches the
// rest (faultline's --plugin, the Python module's look for --mpi).
TEST(FlagTable, ExtractTakesOutOnlyItsOptions) {
  std::vector<std::string> files;
  bool mpi = false;
  FlagTable t("prog", "prog");
  t.inline_values().texts("--plugin", "FILE", "a plugin", &files).toggle("--mpi", "mpi", &mpi);
  std::vector<std::string> args = {"sim",   "run",   "--plugin",      "a.so", "s.json",
                                   "--set", "--x=1", "--plugin=b.so", "--mpi"};
  EXPECT_EQ(t.extract(&args), "");
  EXPECT_EQ(args, (std::vector<std::string>{"sim", "run", "s.json", "--set", "--x=1"}));
  EXPECT_EQ(files, (std::vector<std::string>{"a.so", "b.so"}));
  EXPECT_TRUE(mpi);
  std::vector<std::string> bad = {"sim", "--plugin"};
  EXPECT_EQ(t.extract(&bad), "--plugin: expected FILE");
  EXPECT_EQ(bad, (std::vector<std::string>{"sim", "--plugin"}));
  std::vector<std::string> switched = {"--mpi=1"};
  EXPECT_EQ(t.extract(&switched), "--mpi takes no value");
}

}  // namespace
}  // namespace faultline::cli
