// The one strict JSON reader (json/strict_object.h): its error type, its one-line
// messages, unknown keys, and the observer the scenario reference is generated with.
#include "json/strict_object.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace faultline {
namespace {

using nlohmann::json;

struct MyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const MyError& e) {
    return e.what();
  }
  return "";
}

TEST(StrictObject, ThrowsItsErrorTypeWithFileAndPath) {
  const json j = {{"n", "x"}};
  StrictObject<MyError> o(j, "$.job", "a.json");
  EXPECT_EQ(error_of([&] { o.number("n", 0, 0, 1); }),
            "a.json: $.job.n: expected a number, got a string \"x\"");
  StrictObject<MyError> bare(j, "$.job");
  EXPECT_EQ(error_of([&] { bare.integer("n", 0, 0, 1); }),
            "$.job.n: expected an integer, got a string \"x\"");
}

TEST(StrictObject, RefusesUnknownKeysNamingTheKnownOnes) {
  const json j = {{"a", 1}, {"b", 2}, {"zz", 3}};
  StrictObject<MyError> o(j, "$", "f.json");
  o.integer("a", 0, 0, 9);
  o.integer("b", 0, 0, 9);
  EXPECT_EQ(error_of([&] { o.finish(); }), "f.json: $.zz: unknown key; expected one of: a, b");
}

// only(): the keys are checked before any field is read (the live config and the thresholds
// report a misspelt key rather than what its absence led to), and named in full.
TEST(StrictObject, OnlyRefusesAnUnknownKeyBeforeAnyFieldIsRead) {
  const json j = {{"a", "not a number"}, {"zz", 3}};
  StrictObject<MyError> o(j, "repair", "live.json");
  EXPECT_EQ(error_of([&] {
              o.only({"b", "a"});
            }),
            "live.json: repair.zz: unknown key; expected one of: a, b");
  const json fine = {{"a", 1}};
  StrictObject<MyError> f(fine, "repair", "live.json");
  f.only({"a", "b"});
  EXPECT_EQ(f.integer("a", 0, 0, 9), 1);
  EXPECT_EQ(error_of([&] { f.finish(); }), "");
}

// A key or a string value with a control character in it: the error stays one line.
TEST(StrictObject, ErrorsStayOneLine) {
  const json j = {{"max_\nchecks", 2}, {"c", "x\ty"}};
  StrictObject<MyError> o(j, "repair", "live.json");
  EXPECT_EQ(error_of([&] { o.choice("c", "a", {"a"}); }),
            "live.json: repair.c: expected one of a, got \"x\\x09y\"");
  EXPECT_EQ(error_of([&] { o.finish(); }),
            "live.json: repair.max_\\nchecks: unknown key; expected one of: c");
  EXPECT_EQ(json_one_line("a\nb\x7f"), "a\\nb\\x7f");
}

TEST(StrictObject, TopLevelPathNamesKeysBare) {
  const json j = {{"port", 70000}};
  StrictObject<MyError> o(j, "", "live.json");
  EXPECT_EQ(error_of([&] { o.integer("port", 1, 1, 65535); }),
            "live.json: port: expected an integer in [1, 65535], got 70000");
  EXPECT_EQ(error_of([] { StrictObject<MyError>(json::array(), "", "live.json"); }),
            "live.json: (top level): expected an object, got an array");
}

TEST(StrictObject, RangesChoicesAndRequiredFields) {
  const json j = {{"x", -1}, {"c", "d"}, {"s", 3}, {"v", {"a", 1}}};
  StrictObject<MyError> o(j, "$");
  EXPECT_EQ(error_of([&] { o.number("x", 0, 0, 10); }),
            "$.x: expected a number in [0, 10], got -1");
  EXPECT_EQ(error_of([&] { o.finite("x", 0, 0, 10); }),
            "$.x: expected a finite number in [0, 10], got -1");
  EXPECT_EQ(error_of([&] {
              o.choice("c", "a", {"a", "b"});
            }),
            "$.c: expected one of a|b, got \"d\"");
  EXPECT_EQ(error_of([&] { o.string("missing", "", true); }),
            "$.missing: required string is missing");
  EXPECT_EQ(error_of([&] { o.one_or_more_strings("s"); }),
            "$.s: expected a string or an array of strings, got an integer");
  EXPECT_EQ(error_of([&] { o.strings("v"); }), "$.v[1]: expected a string, got an integer");
  EXPECT_EQ(o.real("absent", 2.5), 2.5);
}

TEST(StrictObject, TellsItsObserverOfEachFieldBeforeReadingIt) {
  struct Seen : FieldObserver {
    std::vector<std::string> lines;
    void field(const std::string& path, const char* type, const json* def, bool required,
               std::optional<std::pair<double, double>> range,
               const std::vector<std::string>& choices) override {
      lines.push_back(path + " " + type + " " + (def ? def->dump() : "-") +
                      (required ? " required" : "") + (range ? " range" : "") +
                      (choices.empty() ? "" : " " + join_names(choices)));
    }
  } seen;
  const json j = {{"k", "b"}};
  StrictObject<MyError> o(j, "$.s", "f.json", &seen);
  o.number("n", 1.5, 0, 2);
  o.choice("k", "a", {"a", "b"});
  o.boolean("flag", true);
  EXPECT_EQ(error_of([&] { o.string("name", "", true); }),
            "f.json: $.s.name: required string is missing");  // told first
  EXPECT_EQ(seen.lines, (std::vector<std::string>{"$.s object -", "$.s.n number 1.5 range",
                                                  "$.s.k string \"a\" a|b", "$.s.flag boolean true",
                                                  "$.s.name string \"\" required"}));
}

}  // namespace
}  // namespace faultline
