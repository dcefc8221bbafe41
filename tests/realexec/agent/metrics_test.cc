// The exposition renderer (realexec/controller/metrics.h), read back by a parser written here from
// the format's description (not from the renderer): names, escaping, histogram buckets, values that
// round-trip exactly, and the names the format forbids.
#include "realexec/controller/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::live {
namespace {

struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct Parsed {
  std::map<std::string, std::string> help, type;
  std::vector<ParsedSample> samples;
};

// Text exposition 0.0.4: "# HELP name text", "# TYPE name type", then
// name{label="value",...} value, label values with \\, \" and \n escaped.
Parsed parse(const std::string& text) {
  Parsed p;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) throw std::runtime_error("last line without a newline");
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::size_t sp = line.find(' ', 7);
      auto& m = line[2] == 'H' ? p.help : p.type;
      if (sp == std::string::npos || m.count(line.substr(7, sp - 7)))
        throw std::runtime_error("bad: " + line);
      m[line.substr(7, sp - 7)] = line.substr(sp + 1);
      continue;
    }
    ParsedSample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (line.at(i) != '}') {
        std::string k, v;
        while (line.at(i) != '=') k += line[i++];
        if (line.at(++i) != '"') throw std::runtime_error("unquoted value: " + line);
        for (++i; line.at(i) != '"'; ++i) {
          if (line[i] == '\\') {
            const char e = line.at(++i);
            if (e == 'n')
              v += '\n';
            else if (e == '\\' || e == '"')
              v += e;
            else
              throw std::runtime_error("bad escape: " + line);
          } else {
            v += line[i];
          }
        }
        ++i;
        if (line.at(i) == ',') ++i;
        if (!s.labels.emplace(k, v).second) throw std::runtime_error("repeated label: " + line);
      }
      ++i;
    }
    if (line.at(i) != ' ') throw std::runtime_error("no value: " + line);
    const std::string v = line.substr(i + 1);
    if (v == "+Inf")
      s.value = std::numeric_limits<double>::infinity();
    else if (v == "-Inf")
      s.value = -std::numeric_limits<double>::infinity();
    else if (v == "NaN")
      s.value = std::numeric_limits<double>::quiet_NaN();
    else {
      char* end = nullptr;
      s.value = std::strtod(v.c_str(), &end);
      if (end != v.c_str() + v.size()) throw std::runtime_error("bad value: " + line);
    }
    p.samples.push_back(s);
  }
  return p;
}

TEST(Metrics, GaugesAndCountersReadBackWithHelpTypeAndExactValues) {
  const double ettr = 0.1 + 0.2;  // 0.30000000000000004: a value a %g would round
  std::vector<MetricFamily> f;
  f.push_back({"faultline_ettr", "ETTR so far.", MetricType::kGauge, {{{}, ettr}}, {}});
  f.push_back({"faultline_incidents_total",
               "Incidents.",
               MetricType::kCounter,
               {{{{"category", "rank_exit"}, {"resolution", "recovered"}}, 3}},
               {}});
  const Parsed p = parse(render(f));
  EXPECT_EQ(p.type.at("faultline_ettr"), "gauge");
  EXPECT_EQ(p.type.at("faultline_incidents_total"), "counter");
  EXPECT_EQ(p.help.at("faultline_ettr"), "ETTR so far.");
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[0].value, ettr) << "bit-exact round trip";
  EXPECT_EQ(p.samples[1].labels.at("category"), "rank_exit");
  EXPECT_EQ(p.samples[1].labels.at("resolution"), "recovered");
  EXPECT_EQ(p.samples[1].value, 3);
}

TEST(Metrics, TheExactTextOfASmallFamily) {
  std::vector<MetricFamily> f;
  f.push_back({"faultline_machines",
               "Machines by state.",
               MetricType::kGauge,
               {{{{"state", "job"}}, 4}, {{{"state", "standby"}}, 1}},
               {}});
  EXPECT_EQ(render(f),
            "# HELP faultline_machines Machines by state.\n"
            "# TYPE faultline_machines gauge\n"
            "faultline_machines{state=\"job\"} 4\n"
            "faultline_machines{state=\"standby\"} 1\n");
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  const std::string hostile = "a\\b\"c\nd}{,=\xc3\xa9";
  std::vector<MetricFamily> f;
  f.push_back({"faultline_x",
               "line one\nback\\slash \"quoted\"",
               MetricType::kGauge,
               {{{{"cause", hostile}}, 1}},
               {}});
  const std::string text = render(f);
  EXPECT_NE(text.find("# HELP faultline_x line one\\nback\\\\slash \"quoted\"\n"),
            std::string::npos)
      << text;
  const Parsed p = parse(text);
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].labels.at("cause"), hostile);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Histogram h({0.5, 1, 5});
  for (double v : {0.1, 0.5, 0.7, 3.0, 9.0}) h.observe(v);
  std::vector<MetricFamily> f;
  MetricFamily fam{
      "faultline_recovery_latency_seconds", "Recovery.", MetricType::kHistogram, {}, {}};
  fam.histograms.emplace_back(Labels{}, h);
  f.push_back(fam);
  const Parsed p = parse(render(f));
  EXPECT_EQ(p.type.at("faultline_recovery_latency_seconds"), "histogram");
  std::map<std::string, double> buckets;
  double sum = -1, count = -1;
  for (const auto& s : p.samples) {
    if (s.name == "faultline_recovery_latency_seconds_bucket") buckets[s.labels.at("le")] = s.value;
    if (s.name == "faultline_recovery_latency_seconds_sum") sum = s.value;
    if (s.name == "faultline_recovery_latency_seconds_count") count = s.value;
  }
  // le is "less than or equal": 0.5 falls in the 0.5 bucket.
  EXPECT_EQ(buckets, (std::map<std::string, double>{{"0.5", 2}, {"1", 3}, {"5", 4}, {"+Inf", 5}}));
  EXPECT_EQ(sum, 0.1 + 0.5 + 0.7 + 3.0 + 9.0);
  EXPECT_EQ(count, 5);
}

// Issue 52: a restarted controller's latency histograms started from zero. Continued from the
// per-bucket counts its journal kept, one renders exactly as the original did, and goes on
// counting; counts of other bounds (another release's) are refused and change nothing.
TEST(Metrics, AHistogramRestoredFromItsBucketsRendersAsTheOriginalAndGoesOn) {
  Histogram h({0.5, 1, 5});
  for (double v : {0.1, 0.5, 0.7, 3.0, 9.0}) h.observe(v);
  Histogram back({0.5, 1, 5});
  ASSERT_TRUE(back.restore(h.bounds(), h.per_bucket(), h.sum()));
  const auto text = [](const Histogram& x) {
    MetricFamily fam{"faultline_detection_latency_seconds", "D.", MetricType::kHistogram, {}, {}};
    fam.histograms.emplace_back(Labels{}, x);
    return render({fam});
  };
  EXPECT_EQ(text(back), text(h));
  EXPECT_EQ(back.count(), 5u);
  back.observe(2);
  h.observe(2);
  EXPECT_EQ(text(back), text(h));
  Histogram other({1, 2});
  EXPECT_FALSE(other.restore(h.bounds(), h.per_bucket(), h.sum()));
  EXPECT_FALSE(other.restore({1, 2}, {1, 2}, 3));  // one count short
  EXPECT_EQ(other.count(), 0u);
}

TEST(Metrics, SpecialValuesAreWrittenAsTheFormatSpellsThem) {
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(-0.25), "-0.25");
  EXPECT_EQ(std::strtod(format_value(1.0 / 3).c_str(), nullptr), 1.0 / 3);
}

TEST(Metrics, NamesTheFormatForbidsAreRefused) {
  auto one = [](std::string name, MetricType t, Labels l = {}) {
    return render({MetricFamily{std::move(name), "h", t, {{std::move(l), 1}}, {}}});
  };
  EXPECT_THROW(one("1faultline", MetricType::kGauge), std::logic_error);
  EXPECT_THROW(one("faultline-x", MetricType::kGauge), std::logic_error);
  EXPECT_THROW(one("faultline_x", MetricType::kCounter), std::logic_error)
      << "a counter ends in _total";
  EXPECT_THROW(one("faultline_x_total", MetricType::kGauge), std::logic_error);
  EXPECT_THROW(one("faultline_x", MetricType::kGauge, {{"bad-label", "v"}}), std::logic_error);
  EXPECT_THROW(one("faultline_x", MetricType::kGauge, {{"__reserved", "v"}}), std::logic_error);
  EXPECT_NO_THROW(one("faultline_x", MetricType::kGauge, {{"phase", "v"}}));
  EXPECT_THROW(Histogram({1, 1}), std::logic_error);
}

// --- the shipped Grafana dashboard against the documented metric names ---------------------

// The source tree (this file's path less tests/realexec/agent/metrics_test.cc).
std::string source_file(const std::string& rel) {
  const std::string self = __FILE__;
  const std::size_t at = self.rfind("tests/realexec/agent/");
  return (at == std::string::npos ? std::string() : self.substr(0, at)) + rel;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// docs/metrics.md's table: name -> type, for every row "| `faultline_x` | type | ...".
// (LiveWorldMetrics.TheExportedMetricsAreTheDocumentedOnes checks that the controller exports
// exactly these.)
std::map<std::string, std::string> documented_metrics() {
  std::map<std::string, std::string> out;
  const std::regex row(R"(^\| `(faultline_[a-z_]+)` \| (gauge|counter|histogram) \|)");
  std::istringstream in(slurp(source_file("docs/metrics.md")));
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, row)) out[m[1]] = m[2];
  return out;
}

void collect_exprs(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "expr" && v.is_string()) out.push_back(v.get<std::string>());
      collect_exprs(v, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_exprs(v, out);
  }
}

// Every metric a panel of realexec/grafana/faultline-dashboard.json queries is one the
// controller exports (as documented), a histogram's series included; and lost time is shown
// by phase, with the simulator's phase names as the legend.
TEST(GrafanaDashboard, EveryMetricItQueriesIsOneTheControllerExports) {
  const auto documented = documented_metrics();
  ASSERT_GE(documented.size(), 15u) << "docs/metrics.md's table did not parse";
  ASSERT_TRUE(documented.count("faultline_lost_seconds_total"));
  EXPECT_EQ(documented.at("faultline_lost_seconds_total"), "counter");
  const std::string text = slurp(source_file("realexec/grafana/faultline-dashboard.json"));
  const nlohmann::json dash = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "the dashboard is not JSON";
  std::vector<std::string> exprs;
  collect_exprs(dash, exprs);
  ASSERT_GE(exprs.size(), 10u);
  const std::regex name(R"(faultline_[a-z_]+)");
  bool lost_by_phase = false;
  for (const std::string& e : exprs) {
    for (auto it = std::sregex_iterator(e.begin(), e.end(), name); it != std::sregex_iterator();
         ++it) {
      std::string n = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        const std::string base = n.size() > s.size() ? n.substr(0, n.size() - s.size()) : "";
        if (n.ends_with(s) && documented.count(base) && documented.at(base) == "histogram")
          n = base;
      }
      EXPECT_TRUE(documented.count(n)) << "the dashboard queries " << it->str()
                                       << ", which the controller does not export: " << e;
    }
    lost_by_phase |= e.find("faultline_lost_seconds_total") != std::string::npos &&
                     e.find("phase") != std::string::npos;
  }
  EXPECT_TRUE(lost_by_phase) << "no panel shows lost time by phase";
  EXPECT_EQ(text.find("faultline_unproductive_seconds"), std::string::npos) << "retired";
}

}  // namespace
}  // namespace faultline::live
