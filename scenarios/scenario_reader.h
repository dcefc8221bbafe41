// Internal to the scenario loader (scenario.cc, faults.cc, stack_fields.cc): the reader
// every section is read with (json/strict_object.h), the record of the fields it reads
// (the scenario reference is generated from the parser itself, so it cannot drift from
// it), and the sections read outside scenario.cc.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "json/strict_object.h"
#include "scenarios/scenario.h"

namespace faultline::scenarios::internal {

// Reads one JSON object of the scenario: "file: $.path: expected ..." errors as
// ScenarioError, unknown keys are errors; pass it fields() so the reference sees each field.
using Obj = StrictObject<ScenarioError>;

// What records each field a reader reads while scenario_fields() runs, else nullptr.
FieldObserver* fields();
// Records a field the parser reads without a getter of Obj (an array, a free-form object),
// while scenario_fields() runs.
void record(const std::string& path, std::string type, std::string def, bool required,
            std::optional<std::pair<double, double>> range = std::nullopt,
            const std::vector<std::string>& choices = {});

// $.faults (faults.cc): rate scale, clock, the categories and the trace. REQUIRES the
// cluster read.
void parse_faults(const nlohmann::json& fj, const std::string& file, Scenario& sc);
// $.diagnosis (faults.cc): what stop-time tests take, and their false positives.
void parse_diagnosis(const nlohmann::json& dj, const std::string& file, DiagnosisSpec& g);

// Sorts the fields of stack_fields.h's table that `doc` (after --set) sets into
// sc.read_fields, those the stack that runs reads, and sc.unread_fields, those it never
// reads, each marked kept when `original` (the file as written) wrote it as it is for a
// stack that reads it: its own (when another runs), or one of compared_with
// (stack_fields.cc). REQUIRES the policy read.
void find_unread_fields(const nlohmann::json& doc, const nlohmann::json& original,
                        const Registry& registry, Scenario& sc);

}  // namespace faultline::scenarios::internal
