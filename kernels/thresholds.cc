#include "kernels/thresholds.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "json/strict_object.h"

namespace faultline::kernels {
namespace {

using nlohmann::json;

// The thresholds file's reader, one per JSON object: errors "FILE: PATH: expected ..., got
// ...", thrown as ThresholdsError. Each object's keys are checked before its fields are read.
using Reader = StrictObject<ThresholdsError>;

double positive_number(const Reader& r, const json& v, const std::string& field, bool allow_zero) {
  if (!v.is_number())
    r.fail(field, "expected a number, got " + json_type_of(v) + " " + json_brief(v));
  const double d = v.get<double>();
  if (allow_zero ? d < 0 : d <= 0)
    r.fail(field, std::string(allow_zero ? "expected a number >= 0" : "expected a number > 0") +
                      ", got " + json_brief(v));
  return d;
}

std::optional<double> spec_number(Reader& r, const std::string& key, bool required) {
  const json* v = r.get(key);
  if (!v) {
    if (required) r.fail(r.at(key), "expected a number or null (the key must be present)");
    return std::nullopt;
  }
  if (v->is_null()) return std::nullopt;
  return positive_number(r, *v, r.at(key), false);
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
void read_fractions(const json& obj, PassFractions& f, bool complete, const std::string& file,
                    const std::string& where) {
  Reader r(obj, where, file);
  r.only(kFractionKeys);
  for (const auto& key : kFractionKeys) {
    const json* v = r.get(key);
    if (!v) {
      if (complete) r.fail(r.at(key), "expected a fraction in (0, 1] (missing)");
      continue;
    }
    const double x = positive_number(r, *v, r.at(key), false);
    if (x > 1.0) r.fail(r.at(key), "expected a fraction in (0, 1], got " + json_brief(*v));
    *fraction_field(f, key) = x;
  }
}

void read_limits(const json& obj, Limits& l, bool complete, const std::string& file,
                 const std::string& where) {
  Reader r(obj, where, file);
  r.only(kLimitKeys);
  for (const auto& key : kLimitKeys) {
    const json* v = r.get(key);
    if (!v) {
      if (complete) r.fail(r.at(key), "expected a number >= 0 (missing)");
      continue;
    }
    *limit_field(l, key) = positive_number(r, *v, r.at(key), true);
  }
}

// "calibration": where each number comes from, keyed by the number's own key (a pass fraction,
// a limit or a spec number); every value a non-empty sentence.
void check_calibration(Reader& parent) {
  const json* c = parent.get("calibration");
  if (!c) return;
  const std::string w = parent.at("calibration");
  if (!c->is_object()) parent.fail(w, "expected an object of sentences keyed by a number's key");
  Reader r(*c, w, parent.file());
  std::set<std::string> allowed = kSpecKeys;
  allowed.insert(kFractionKeys.begin(), kFractionKeys.end());
  allowed.insert(kLimitKeys.begin(), kLimitKeys.end());
  r.only(allowed);
  for (const auto& [key, value] : c->items()) {
    if (!value.is_string() || value.get<std::string>().empty())
      r.fail(r.at(key),
             "expected a non-empty string naming the number's source, got " + json_brief(value));
  }
}

ModelThresholds read_model(const json& obj, const PassFractions& fractions, const Limits& limits,
                           const std::string& file, const std::string& where, bool is_fallback) {
  Reader r(obj, where, file);
  std::set<std::string> allowed = kSpecKeys;
  allowed.insert({"name", "match", "pass_fractions", "limits", "source", "calibration"});
  r.only(allowed);
  check_calibration(r);
  ModelThresholds m;
  m.name = r.string("name", "", true);
  if (m.name.empty()) r.fail(r.at("name"), "expected a non-empty string");
  if (const json* match = r.get("match")) {
    if (!match->is_array())
      r.fail(r.at("match"), "expected an array of strings, got " + json_type_of(*match));
    m.match = r.strings("match");
    for (const auto& s : m.match)
      if (s.empty()) r.fail(r.at("match"), "expected an array of non-empty strings");
  }
  if (!is_fallback && m.match.empty())
    r.fail(r.at("match"), "expected at least one device-name substring");
  r.string("source", "");
  m.hbm_gbps = spec_number(r, "hbm_gbps", !is_fallback);
  m.bf16_dense_tflops = spec_number(r, "bf16_dense_tflops", !is_fallback);
  m.fp16_dense_tflops = spec_number(r, "fp16_dense_tflops", !is_fallback);
  m.tf32_dense_tflops = spec_number(r, "tf32_dense_tflops", !is_fallback);
  m.pcie_gbps = spec_number(r, "pcie_gbps", !is_fallback);
  m.nvlink_gbps = spec_number(r, "nvlink_gbps", !is_fallback);
  m.nccl_busbw_gbps = spec_number(r, "nccl_busbw_gbps", !is_fallback);
  m.fractions = fractions;
  m.limits = limits;
  if (const json* f = r.get("pass_fractions"))
    read_fractions(*f, m.fractions, false, file, r.at("pass_fractions"));
  if (const json* l = r.get("limits")) read_limits(*l, m.limits, false, file, r.at("limits"));
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
  Reader r(doc, "", source);
  r.only({"description", "pass_fractions", "limits", "calibration", "models", "fallback"});
  check_calibration(r);
  if (const json* d = r.get("description"); !d || !d->is_string())
    r.fail("description", "expected a string saying what the numbers are and where they come from");
  PassFractions fractions;
  Limits limits;
  read_fractions(r.need("pass_fractions", "object"), fractions, true, source, "pass_fractions");
  read_limits(r.need("limits", "object"), limits, true, source, "limits");

  ThresholdTable table;
  table.source_ = source;
  const json* models = r.get("models");
  if (!models || !models->is_array() || models->empty())
    r.fail("models", "expected a non-empty array of models");
  std::set<std::string> names;
  for (std::size_t i = 0; i < models->size(); ++i) {
    const std::string where = "models[" + std::to_string(i) + "]";
    auto m = read_model((*models)[i], fractions, limits, source, where, false);
    if (!names.insert(m.name).second)
      r.fail(where + ".name", "expected a unique model name, got \"" + m.name + "\" again");
    table.models_.push_back(std::move(m));
  }
  table.fallback_ = read_model(r.need("fallback", "object (the model for unknown GPUs)"), fractions,
                               limits, source, "fallback", true);
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
