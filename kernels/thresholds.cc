#include "kernels/thresholds.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace faultline::kernels {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& field,
                       const std::string& expected) {
  throw ThresholdsError(source + ": field '" + field + "': expected " + expected);
}

void reject_unknown_keys(const nlohmann::json& obj, const std::set<std::string>& allowed,
                         const std::string& source, const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.contains(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(source, where + key, "one of the known keys (" + list + "); unknown key");
    }
  }
}

double positive_number(const nlohmann::json& v, const std::string& source, const std::string& field,
                       bool allow_zero) {
  if (!v.is_number()) fail(source, field, "a number");
  const double d = v.get<double>();
  if (allow_zero ? d < 0 : d <= 0)
    fail(source, field, allow_zero ? "a number >= 0" : "a number > 0");
  return d;
}

std::optional<double> spec_number(const nlohmann::json& obj, const std::string& key,
                                  const std::string& source, const std::string& where,
                                  bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) fail(source, where + key, "a number or null (the key must be present)");
    return std::nullopt;
  }
  if (it->is_null()) return std::nullopt;
  return positive_number(*it, source, where + key, false);
}

const std::set<std::string> kFractionKeys = {"hbm_bandwidth",  "gemm_tflops",   "gemm_vs_baseline",
                                             "pcie_bandwidth", "p2p_bandwidth", "nccl_busbw"};
const std::set<std::string> kLimitKeys = {"bit_errors_max",
                                          "checksum_mismatches_max",
                                          "data_errors_max",
                                          "ecc_uncorrected_max",
                                          "retired_pages_pending_max",
                                          "remapped_rows_pending_max",
                                          "remapped_rows_failure_max",
                                          "temperature_c_max",
                                          "gemm_throughput_min_size",
                                          "gemm_throughput_min_duration_s",
                                          "gemm_vs_baseline_min_duration_s"};
const std::set<std::string> kSpecKeys = {
    "hbm_gbps",  "bf16_dense_tflops", "fp16_dense_tflops", "tf32_dense_tflops",
    "pcie_gbps", "nvlink_gbps",       "nccl_busbw_gbps"};

double* fraction_field(PassFractions& f, const std::string& key) {
  if (key == "hbm_bandwidth") return &f.hbm_bandwidth;
  if (key == "gemm_tflops") return &f.gemm_tflops;
  if (key == "gemm_vs_baseline") return &f.gemm_vs_baseline;
  if (key == "pcie_bandwidth") return &f.pcie_bandwidth;
  if (key == "p2p_bandwidth") return &f.p2p_bandwidth;
  if (key == "nccl_busbw") return &f.nccl_busbw;
  return nullptr;
}

double* limit_field(Limits& l, const std::string& key) {
  if (key == "bit_errors_max") return &l.bit_errors_max;
  if (key == "checksum_mismatches_max") return &l.checksum_mismatches_max;
  if (key == "data_errors_max") return &l.data_errors_max;
  if (key == "ecc_uncorrected_max") return &l.ecc_uncorrected_max;
  if (key == "retired_pages_pending_max") return &l.retired_pages_pending_max;
  if (key == "remapped_rows_pending_max") return &l.remapped_rows_pending_max;
  if (key == "remapped_rows_failure_max") return &l.remapped_rows_failure_max;
  if (key == "temperature_c_max") return &l.temperature_c_max;
  if (key == "gemm_throughput_min_size") return &l.gemm_throughput_min_size;
  if (key == "gemm_throughput_min_duration_s") return &l.gemm_throughput_min_duration_s;
  if (key == "gemm_vs_baseline_min_duration_s") return &l.gemm_vs_baseline_min_duration_s;
  return nullptr;
}

// Reads pass fractions into `f`; with `complete`, every key must be present.
void read_fractions(const nlohmann::json& obj, PassFractions& f, bool complete,
                    const std::string& source, const std::string& where) {
  if (!obj.is_object()) fail(source, where, "an object");
  reject_unknown_keys(obj, kFractionKeys, source, where + ".");
  for (const auto& key : kFractionKeys) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (complete) fail(source, where + "." + key, "a fraction in (0, 1] (missing)");
      continue;
    }
    const double v = positive_number(*it, source, where + "." + key, false);
    if (v > 1.0) fail(source, where + "." + key, "a fraction in (0, 1]");
    *fraction_field(f, key) = v;
  }
}

void read_limits(const nlohmann::json& obj, Limits& l, bool complete, const std::string& source,
                 const std::string& where) {
  if (!obj.is_object()) fail(source, where, "an object");
  reject_unknown_keys(obj, kLimitKeys, source, where + ".");
  for (const auto& key : kLimitKeys) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (complete) fail(source, where + "." + key, "a number >= 0 (missing)");
      continue;
    }
    *limit_field(l, key) = positive_number(*it, source, where + "." + key, true);
  }
}

// "calibration": where each number comes from, keyed by the number's own key (a pass fraction,
// a limit or a spec number); every value a non-empty sentence.
void check_calibration(const nlohmann::json& obj, const std::string& source,
                       const std::string& where) {
  auto c = obj.find("calibration");
  if (c == obj.end()) return;
  const std::string w = where.empty() ? "calibration" : where + ".calibration";
  if (!c->is_object()) fail(source, w, "an object of sentences keyed by a number's key");
  std::set<std::string> allowed = kSpecKeys;
  allowed.insert(kFractionKeys.begin(), kFractionKeys.end());
  allowed.insert(kLimitKeys.begin(), kLimitKeys.end());
  reject_unknown_keys(*c, allowed, source, w + ".");
  for (const auto& [key, value] : c->items()) {
    if (!value.is_string() || value.get<std::string>().empty()) {
      fail(source, w + "." + key, "a non-empty string naming the number's source");
    }
  }
}

ModelThresholds read_model(const nlohmann::json& obj, const PassFractions& fractions,
                           const Limits& limits, const std::string& source,
                           const std::string& where, bool is_fallback) {
  if (!obj.is_object()) fail(source, where, "an object");
  std::set<std::string> allowed = kSpecKeys;
  allowed.insert({"name", "match", "pass_fractions", "limits", "source", "calibration"});
  reject_unknown_keys(obj, allowed, source, where + ".");
  check_calibration(obj, source, where);
  ModelThresholds m;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get<std::string>().empty()) {
    fail(source, where + ".name", "a non-empty string");
  }
  m.name = name->get<std::string>();
  auto match = obj.find("match");
  if (match != obj.end()) {
    if (!match->is_array()) fail(source, where + ".match", "an array of strings");
    for (const auto& s : *match) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        fail(source, where + ".match", "an array of non-empty strings");
      }
      m.match.push_back(s.get<std::string>());
    }
  }
  if (!is_fallback && m.match.empty()) {
    fail(source, where + ".match", "at least one device-name substring");
  }
  if (auto src = obj.find("source"); src != obj.end() && !src->is_string()) {
    fail(source, where + ".source", "a string");
  }
  const std::string w = where + ".";
  m.hbm_gbps = spec_number(obj, "hbm_gbps", source, w, !is_fallback);
  m.bf16_dense_tflops = spec_number(obj, "bf16_dense_tflops", source, w, !is_fallback);
  m.fp16_dense_tflops = spec_number(obj, "fp16_dense_tflops", source, w, !is_fallback);
  m.tf32_dense_tflops = spec_number(obj, "tf32_dense_tflops", source, w, !is_fallback);
  m.pcie_gbps = spec_number(obj, "pcie_gbps", source, w, !is_fallback);
  m.nvlink_gbps = spec_number(obj, "nvlink_gbps", source, w, !is_fallback);
  m.nccl_busbw_gbps = spec_number(obj, "nccl_busbw_gbps", source, w, !is_fallback);
  m.fractions = fractions;
  m.limits = limits;
  if (auto f = obj.find("pass_fractions"); f != obj.end()) {
    read_fractions(*f, m.fractions, false, source, where + ".pass_fractions");
  }
  if (auto l = obj.find("limits"); l != obj.end()) {
    read_limits(*l, m.limits, false, source, where + ".limits");
  }
  return m;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::optional<double> ModelThresholds::dense_tflops(GemmPath path) const {
  switch (path) {
    case GemmPath::kBf16:
      return bf16_dense_tflops;
    case GemmPath::kFp16:
      return fp16_dense_tflops;
    case GemmPath::kTf32:
      return tf32_dense_tflops;
    case GemmPath::kTiled:
      return std::nullopt;
  }
  return std::nullopt;
}

ThresholdTable ThresholdTable::parse(const nlohmann::json& doc, std::string source) {
  if (!doc.is_object()) fail(source, "(document)", "a JSON object");
  reject_unknown_keys(
      doc, {"description", "pass_fractions", "limits", "calibration", "models", "fallback"}, source,
      "");
  check_calibration(doc, source, "");
  if (auto d = doc.find("description"); d == doc.end() || !d->is_string()) {
    fail(source, "description", "a string saying what the numbers are and where they come from");
  }
  PassFractions fractions;
  Limits limits;
  auto f = doc.find("pass_fractions");
  if (f == doc.end()) fail(source, "pass_fractions", "an object");
  read_fractions(*f, fractions, true, source, "pass_fractions");
  auto l = doc.find("limits");
  if (l == doc.end()) fail(source, "limits", "an object");
  read_limits(*l, limits, true, source, "limits");

  ThresholdTable table;
  table.source_ = source;
  auto models = doc.find("models");
  if (models == doc.end() || !models->is_array() || models->empty()) {
    fail(source, "models", "a non-empty array");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < models->size(); ++i) {
    const std::string where = "models[" + std::to_string(i) + "]";
    auto m = read_model((*models)[i], fractions, limits, source, where, false);
    if (!names.insert(m.name).second) fail(source, where + ".name", "a unique model name");
    table.models_.push_back(std::move(m));
  }
  auto fallback = doc.find("fallback");
  if (fallback == doc.end()) fail(source, "fallback", "an object (the model for unknown GPUs)");
  table.fallback_ = read_model(*fallback, fractions, limits, source, "fallback", true);
  return table;
}

ThresholdTable ThresholdTable::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ThresholdsError(path.string() + ": cannot open thresholds file");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw ThresholdsError(path.string() + ": not valid JSON: " + e.what());
  }
  return parse(doc, path.string());
}

ThresholdTable ThresholdTable::built_in() {
  ThresholdTable table;
  table.source_ = "built-in fallback (no thresholds file found)";
  table.fallback_.name = "unknown";
  return table;
}

const ModelThresholds& ThresholdTable::lookup(std::string_view device_name) const {
  const std::string name = lower(device_name);
  for (const auto& model : models_) {
    for (const auto& m : model.match) {
      if (name.find(lower(m)) != std::string::npos) return model;
    }
  }
  return fallback_;
}

std::optional<std::filesystem::path> find_thresholds_file(const std::string& explicit_path,
                                                          const EnvLookup& env,
                                                          const std::filesystem::path& exe_path,
                                                          const std::string& compiled_in_path) {
  std::error_code ec;
  if (!explicit_path.empty()) return std::filesystem::path(explicit_path);
  if (env) {
    if (auto v = env("FAULTLINE_PROBE_THRESHOLDS"); v && !v->empty()) {
      return std::filesystem::path(*v);
    }
  }
  if (!exe_path.empty()) {
    auto candidate = exe_path.parent_path() / ".." / "share" / "faultline" / "thresholds.json";
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.lexically_normal();
  }
  if (!compiled_in_path.empty() && std::filesystem::is_regular_file(compiled_in_path, ec)) {
    return std::filesystem::path(compiled_in_path);
  }
  return std::nullopt;
}

}  // namespace faultline::kernels
