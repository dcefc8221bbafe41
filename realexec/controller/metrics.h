// The controller's metrics in the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/), for `GET /metrics`.
//
// A small, dependency-free renderer: the controller builds a list of metric families from
// what LiveWorld tracks at the moment of the scrape (so a scrape never waits on anything)
// and render() turns them into the text Prometheus parses. Values are written in the
// shortest form that reads back as the same double, so a scraped value equals the
// controller's own account exactly. docs/metrics.md lists the metrics themselves.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline::live {

// Label name -> value, in the order written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Cumulative histogram with fixed upper bounds (the `le` buckets; +Inf is implicit).
class Histogram {
 public:
  // REQUIRES: `bounds` strictly increasing and finite.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative, as exposed); i == bounds().size() is +Inf.
  std::uint64_t cumulative(std::size_t i) const;
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  // Observations per bucket (bounds().size() + 1, the last above every bound), and a
  // histogram continued from such counts (a restarted controller's, from its journal):
  // false, and nothing changed, when they do not fit these bounds.
  const std::vector<std::uint64_t>& per_bucket() const { return per_bucket_; }
  bool restore(const std::vector<double>& bounds, const std::vector<std::uint64_t>& per_bucket,
               double sum);

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> per_bucket_;  // bounds_.size() + 1 (the last: above every bound)
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

enum class MetricType { kGauge, kCounter, kHistogram };

struct Sample {
  Labels labels;
  double value = 0;
};

// One metric: its samples share a name, a HELP text and a TYPE. A counter's name ends in
// "_total"; a histogram's series carry its labels plus `le`.
struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;                           // gauges and counters
  std::vector<std::pair<Labels, Histogram>> histograms;  // histograms
};

// The exposition text of `families`, one "# HELP", one "# TYPE" and the samples each.
// Throws std::logic_error for a name or label name the format does not allow, or a counter
// name without "_total": those are programming errors, caught by the unit tests.
std::string render(const std::vector<MetricFamily>& families);

// A label value as written between the quotes: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view v);
// A HELP text: backslash and newline escaped.
std::string escape_help(std::string_view v);
// A sample value: the shortest decimal that reads back as `v`; "+Inf", "-Inf", "NaN".
std::string format_value(double v);

// The Content-Type of render()'s text.
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace faultline::live
