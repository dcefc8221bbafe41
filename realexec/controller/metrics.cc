#include "realexec/controller/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace faultline::live {
namespace {

bool valid_name(std::string_view s, bool colon_ok) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void check_family(const MetricFamily& f) {
  if (!valid_name(f.name, true))
    throw std::logic_error("metrics: invalid metric name \"" + f.name + "\"");
  const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
  if ((f.type == MetricType::kCounter) != total)
    throw std::logic_error("metrics: " + f.name + ": counters, and only counters, end in _total");
  auto check_labels = [&](const Labels& labels) {
    for (const auto& [k, v] : labels)
      if (!valid_name(k, false) || k.rfind("__", 0) == 0 ||
          (f.type == MetricType::kHistogram && k == "le"))
        throw std::logic_error("metrics: " + f.name + ": invalid label name \"" + k + "\"");
  };
  for (const Sample& s : f.samples) check_labels(s.labels);
  for (const auto& [labels, h] : f.histograms) check_labels(labels);
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first + "=\"" + escape_label_value(labels[i].second) + '"';
  }
  return out + '}';
}

void line(std::string& out, const std::string& name, const Labels& labels, double v) {
  out += name + label_text(labels) + ' ' + format_value(v) + '\n';
}

void render_histogram(std::string& out, const std::string& name, const Labels& labels,
                      const Histogram& h) {
  for (std::size_t i = 0; i <= h.bounds().size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", i < h.bounds().size() ? format_value(h.bounds()[i]) : "+Inf");
    line(out, name + "_bucket", with_le, static_cast<double>(h.cumulative(i)));
  }
  line(out, name + "_sum", labels, h.sum());
  line(out, name + "_count", labels, static_cast<double>(h.count()));
}

const char* type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kGauge:
      break;
  }
  return "gauge";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), per_bucket_(bounds_.size() + 1) {
  for (std::size_t i = 0; i < bounds_.size(); ++i)
    if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i])))
      throw std::logic_error("metrics: histogram bounds must be finite and strictly increasing");
}

void Histogram::observe(double v) {
  // The first bound >= v: Prometheus buckets are "less than or equal".
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  ++per_bucket_[static_cast<std::size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += v;
}

bool Histogram::restore(const std::vector<double>& bounds,
                        const std::vector<std::uint64_t>& per_bucket, double sum) {
  if (bounds != bounds_ || per_bucket.size() != per_bucket_.size()) return false;
  per_bucket_ = per_bucket;
  count_ = 0;
  for (std::uint64_t n : per_bucket_) count_ += n;
  sum_ = sum;
  return true;
}

std::uint64_t Histogram::cumulative(std::size_t i) const {
  std::uint64_t n = 0;
  for (std::size_t b = 0; b <= i && b < per_bucket_.size(); ++b) n += per_bucket_[b];
  return n;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

std::string render(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    check_family(f);
    out += "# HELP " + f.name + ' ' + escape_help(f.help) + '\n';
    out += "# TYPE " + f.name + ' ' + type_name(f.type) + '\n';
    for (const Sample& s : f.samples) line(out, f.name, s.labels, s.value);
    for (const auto& [labels, h] : f.histograms) render_histogram(out, f.name, labels, h);
  }
  return out;
}

}  // namespace faultline::live
