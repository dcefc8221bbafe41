#include "kernels/thresholds.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

namespace faultline::kernels {
namespace {

const ThresholdTable& shipped() {
  static const ThresholdTable table = ThresholdTable::load(FAULTLINE_THRESHOLDS_FILE);
  return table;
}

nlohmann::json minimal_document() {
  return nlohmann::json::parse(R"({
    "description": "test",
    "pass_fractions": {"hbm_bandwidth": 0.85, "gemm_tflops": 0.5, "gemm_vs_baseline": 0.9,
                       "pcie_bandwidth": 0.6, "p2p_bandwidth": 0.7, "nccl_busbw": 0.7},
    "limits": {"bit_errors_max": 0, "checksum_mismatches_max": 0, "data_errors_max": 0,
               "ecc_uncorrected_max": 0, "retired_pages_pending_max": 0,
               "remapped_rows_pending_max": 0, "remapped_rows_failure_max": 0,
               "temperature_c_max": 87, "gemm_throughput_min_size": 16384,
               "gemm_throughput_min_duration_s": 1, "gemm_vs_baseline_min_duration_s": 5},
    "models": [{"name": "X1", "match": ["X1"], "hbm_gbps": 1000, "bf16_dense_tflops": 100,
                "fp16_dense_tflops": 100, "tf32_dense_tflops": 50, "pcie_gbps": 32,
                "nvlink_gbps": null, "nccl_busbw_gbps": null}],
    "fallback": {"name": "unknown"}
  })");
}

std::string error_of(const nlohmann::json& doc) {
  try {
    ThresholdTable::parse(doc, "test.json");
  } catch (const ThresholdsError& e) {
    return e.what();
  }
  return "";
}

TEST(Thresholds, ShippedFileHasTheRequiredModels) {
  const auto& t = shipped();
  const auto& h100 = t.lookup("NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.name, "H100 SXM");
  EXPECT_DOUBLE_EQ(*h100.hbm_gbps, 3350);
  EXPECT_DOUBLE_EQ(h100.fractions.hbm_bandwidth, 0.82);
  EXPECT_DOUBLE_EQ(*h100.hbm_gbps * h100.fractions.hbm_bandwidth, 2747);
  ASSERT_TRUE(h100.bf16_dense_tflops);
  EXPECT_GT(*h100.bf16_dense_tflops, 900);
  const auto& h200 = t.lookup("NVIDIA H200");
  EXPECT_EQ(h200.name, "H200");
  EXPECT_DOUBLE_EQ(*h200.hbm_gbps, 4800);
  EXPECT_DOUBLE_EQ(h200.fractions.gemm_vs_baseline, 0.86);
}

// The lowest figures a healthy H200 reached (kernels/VALIDATION.md, 2026-11-26): every limit of
// the shipped file must sit at least 5 points of spec (or of the baseline) below them.
TEST(Thresholds, ShippedH200LimitsLeaveFivePointsBelowTheMeasuredGpu) {
  const auto& h200 = shipped().lookup("NVIDIA H200");
  const double margin = 0.05;
  EXPECT_LE(h200.fractions.hbm_bandwidth, 4401.7 / *h200.hbm_gbps - margin);
  EXPECT_LE(h200.fractions.gemm_tflops, 643.5 / *h200.bf16_dense_tflops - margin);
  EXPECT_LE(h200.fractions.gemm_tflops, 623.3 / *h200.fp16_dense_tflops - margin);
  EXPECT_LE(h200.fractions.gemm_tflops, 334.6 / *h200.tf32_dense_tflops - margin);
  EXPECT_LE(h200.fractions.gemm_vs_baseline, 0.939 - margin);
  EXPECT_LE(h200.fractions.pcie_bandwidth, 55.2 / *h200.pcie_gbps - margin);
  EXPECT_GE(h200.limits.gemm_throughput_min_size, 16384);
}

// The lowest healthy figures an H100 80GB HBM3 reached (kernels/VALIDATION.md, 2026-11-26).
TEST(Thresholds, ShippedH100LimitsLeaveFivePointsBelowTheMeasuredGpu) {
  const auto& h100 = shipped().lookup("NVIDIA H100 80GB HBM3");
  const double margin = 0.05;
  EXPECT_LE(h100.fractions.hbm_bandwidth, 3056.8 / *h100.hbm_gbps - margin);
  EXPECT_LE(h100.fractions.hbm_bandwidth, 0.87 - margin);  // the published fleet level
  EXPECT_LE(h100.fractions.gemm_tflops, 664.4 / *h100.bf16_dense_tflops - margin);
  EXPECT_LE(h100.fractions.gemm_tflops, 630.3 / *h100.fp16_dense_tflops - margin);
  EXPECT_LE(h100.fractions.gemm_tflops, 344.0 / *h100.tf32_dense_tflops - margin);
  EXPECT_LE(h100.fractions.pcie_bandwidth, 53.1 / *h100.pcie_gbps - margin);
  // Against the same-run cuBLAS loop: 5 s burns reached >= 0.926; 1 s burns only 0.896, so
  // short burns must not be judged against it at all.
  EXPECT_LE(h100.fractions.gemm_vs_baseline, 0.926 - margin);
  EXPECT_GT(h100.limits.gemm_vs_baseline_min_duration_s, 1.0);
  EXPECT_LE(h100.limits.gemm_throughput_min_duration_s, 1.0);
}

TEST(Thresholds, EveryGlobalFractionAndMeasuredModelsNumberNamesItsSource) {
  const auto doc = nlohmann::json::parse(std::ifstream(FAULTLINE_THRESHOLDS_FILE));
  for (const auto& [key, value] : doc["pass_fractions"].items()) {
    EXPECT_TRUE(doc["calibration"].contains(key)) << key;
  }
  for (const char* key : {"gemm_throughput_min_size", "gemm_throughput_min_duration_s",
                          "gemm_vs_baseline_min_duration_s"}) {
    EXPECT_TRUE(doc["calibration"].contains(key)) << key;
  }
  for (const auto& m : doc["models"]) {
    if (m["name"] != "H200" && m["name"] != "H100 SXM") continue;
    for (const char* key :
         {"hbm_gbps", "bf16_dense_tflops", "fp16_dense_tflops", "tf32_dense_tflops", "pcie_gbps"}) {
      EXPECT_TRUE(m["calibration"].contains(key)) << key;
    }
  }
}

TEST(Thresholds, LookupPrefersTheMoreSpecificModel) {
  const auto& t = shipped();
  const std::map<std::string, std::string> expected = {
      {"NVIDIA H100 80GB HBM3", "H100 SXM"},
      {"nvidia h100 80gb hbm3", "H100 SXM"},  // case-insensitive
      {"NVIDIA H100 PCIe", "H100 PCIe"},
      {"NVIDIA H100 NVL", "H100 NVL"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA H200 NVL", "H200 NVL"},
      {"NVIDIA GH200 480GB", "GH200"},
      {"NVIDIA H800", "H800"},
      {"NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"},
      {"NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"},
      {"NVIDIA B200", "B200"},
      {"Tesla T4", "unknown"},
      {"", "unknown"},
  };
  for (const auto& [device, model] : expected) {
    EXPECT_EQ(t.lookup(device).name, model) << device;
  }
  EXPECT_FALSE(t.lookup("Tesla T4").hbm_gbps.has_value());
  EXPECT_FALSE(t.lookup("NVIDIA H100 PCIe").nvlink_gbps.has_value());
}

TEST(Thresholds, MinimalDocumentParses) {
  const auto t = ThresholdTable::parse(minimal_document(), "test.json");
  EXPECT_EQ(t.lookup("my X1 card").name, "X1");
  EXPECT_DOUBLE_EQ(t.lookup("my X1 card").fractions.gemm_tflops, 0.5);
  EXPECT_EQ(t.lookup("other").name, "unknown");
  EXPECT_EQ(t.source(), "test.json");
}

TEST(Thresholds, PerModelOverridesMergeIntoDefaults) {
  auto doc = minimal_document();
  doc["models"][0]["pass_fractions"] = {{"hbm_bandwidth", 0.8}};
  doc["models"][0]["limits"] = {{"temperature_c_max", 80}};
  const auto t = ThresholdTable::parse(doc, "test.json");
  const auto& m = t.lookup("X1");
  EXPECT_DOUBLE_EQ(m.fractions.hbm_bandwidth, 0.8);
  EXPECT_DOUBLE_EQ(m.fractions.gemm_vs_baseline, 0.9);
  EXPECT_DOUBLE_EQ(m.limits.temperature_c_max, 80);
  EXPECT_DOUBLE_EQ(t.fallback().fractions.hbm_bandwidth, 0.85);
}

TEST(Thresholds, ErrorsNameTheFileAndField) {
  auto unknown = minimal_document();
  unknown["models"][0]["hbm_gbs"] = 3;
  EXPECT_NE(error_of(unknown).find("test.json: models[0].hbm_gbs: unknown key; expected one of: "),
            std::string::npos)
      << error_of(unknown);

  auto top = minimal_document();
  top["extra"] = 1;
  EXPECT_NE(error_of(top).find("test.json: extra: unknown key"), std::string::npos);

  auto fraction = minimal_document();
  fraction["pass_fractions"]["hbm_bandwidth"] = 1.5;
  EXPECT_NE(error_of(fraction).find("pass_fractions.hbm_bandwidth"), std::string::npos);

  auto missing = minimal_document();
  missing["pass_fractions"].erase("nccl_busbw");
  EXPECT_NE(error_of(missing).find("pass_fractions.nccl_busbw"), std::string::npos);

  auto spec = minimal_document();
  spec["models"][0].erase("pcie_gbps");
  EXPECT_NE(error_of(spec).find("models[0].pcie_gbps"), std::string::npos);

  auto type = minimal_document();
  type["models"][0]["hbm_gbps"] = "fast";
  EXPECT_NE(error_of(type).find("models[0].hbm_gbps"), std::string::npos);

  auto negative = minimal_document();
  negative["limits"]["temperature_c_max"] = -1;
  EXPECT_NE(error_of(negative).find("limits.temperature_c_max"), std::string::npos);

  auto nomatch = minimal_document();
  nomatch["models"][0]["match"] = nlohmann::json::array();
  EXPECT_NE(error_of(nomatch).find("models[0].match"), std::string::npos);

  auto duplicate = minimal_document();
  duplicate["models"].push_back(duplicate["models"][0]);
  EXPECT_NE(error_of(duplicate).find("models[1].name"), std::string::npos);

  auto calibration_key = minimal_document();
  calibration_key["calibration"] = {{"hbm_bandwith", "typo"}};
  EXPECT_NE(error_of(calibration_key).find("calibration.hbm_bandwith"), std::string::npos)
      << error_of(calibration_key);

  auto calibration_value = minimal_document();
  calibration_value["models"][0]["calibration"] = {{"hbm_gbps", 3}};
  EXPECT_NE(error_of(calibration_value).find("models[0].calibration.hbm_gbps"), std::string::npos)
      << error_of(calibration_value);

  auto nofallback = minimal_document();
  nofallback.erase("fallback");
  EXPECT_NE(error_of(nofallback).find("fallback"), std::string::npos);

  EXPECT_THROW(ThresholdTable::load("/nonexistent/thresholds.json"), ThresholdsError);
}

// The thresholds read with the one strict reader (json/strict_object.h): an unknown key is
// refused naming every key its object takes, a wrong type is named with what it is, in one line
// "FILE: PATH: expected ..., got ...".
TEST(Thresholds, AnUnknownKeyOrAWrongTypeIsOneLineNamingTheFieldAndTheExpectation) {
  auto unknown = minimal_document();
  unknown["limits"]["temperature_max"] = 90;
  EXPECT_EQ(error_of(unknown),
            "test.json: limits.temperature_max: unknown key; expected one of: bit_errors_max, "
            "checksum_mismatches_max, data_errors_max, ecc_uncorrected_max, "
            "gemm_throughput_min_duration_s, gemm_throughput_min_size, "
            "gemm_vs_baseline_min_duration_s, remapped_rows_failure_max, "
            "remapped_rows_pending_max, retired_pages_pending_max, temperature_c_max");
  auto type = minimal_document();
  type["models"][0]["hbm_gbps"] = "fast";
  EXPECT_EQ(error_of(type),
            "test.json: models[0].hbm_gbps: expected a number, got a string \"fast\"");
  auto fraction = minimal_document();
  fraction["models"][0]["pass_fractions"] = {{"nccl_busbw", 1.5}};
  EXPECT_EQ(
      error_of(fraction),
      "test.json: models[0].pass_fractions.nccl_busbw: expected a fraction in (0, 1], got 1.5");
  auto match = minimal_document();
  match["models"][0]["match"] = "X1";
  EXPECT_EQ(error_of(match),
            "test.json: models[0].match: expected an array of strings, got a string");
  EXPECT_EQ(error_of(nlohmann::json::array()),
            "test.json: (top level): expected an object, got an array");
}

TEST(Thresholds, BadJsonIsAnError) {
  const std::string path = ::testing::TempDir() + "/bad_thresholds.json";
  std::ofstream(path) << "{ not json";
  try {
    ThresholdTable::load(path);
    FAIL() << "expected ThresholdsError";
  } catch (const ThresholdsError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(Thresholds, FileSearchOrder) {
  const auto none = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  const auto env = [](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "FAULTLINE_PROBE_THRESHOLDS") return "/from/env.json";
    return std::nullopt;
  };
  EXPECT_EQ(find_thresholds_file("/explicit.json", env, "", "")->string(), "/explicit.json");
  EXPECT_EQ(find_thresholds_file("", env, "", "")->string(), "/from/env.json");
  EXPECT_EQ(
      find_thresholds_file("", none, "/nonexistent/bin/faultline-probe", FAULTLINE_THRESHOLDS_FILE)
          ->string(),
      FAULTLINE_THRESHOLDS_FILE);
  EXPECT_FALSE(find_thresholds_file("", none, "/nonexistent/bin/x", "/nonexistent.json"));
  const auto built_in = ThresholdTable::built_in();
  EXPECT_EQ(built_in.lookup("NVIDIA H100 80GB HBM3").name, "unknown");
}

}  // namespace
}  // namespace faultline::kernels
