// Scenario fields that only some stacks read: each names the World facilities
// (policies/api/policy.h, Facility) whose use reads it in the simulator, so that a field a
// scenario sets for a stack that can never read it (with its module choices) is refused in
// one line, as an unread policy parameter is, instead of leaving every value with the same
// result. A stack declares the facilities it may use beside itself (PolicyInfo::uses,
// ModuleInfo::uses); this table, beside the schema, says which facility reads which field.
//
// Every other field is read whatever the stack does (the cluster, the job, the faults'
// arrivals, repairs): a field belongs here only when the simulator reads it on a path that
// one action or event of a stack opens (sim/sim_actions.cc and the files it calls).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/api/policy.h"

namespace faultline::scenarios {

struct StackField {
  // The field as the scenario reference names it ("faults.categories[].alert",
  // "diagnosis.false_positive.gpu_diag"): `[]` stands for every element of an array.
  std::string path;
  std::vector<Facility> read_by;  // read when the stack may use any of these
};

// The table, in the order of the scenario reference.
const std::vector<StackField>& stack_fields();

// The facilities that read the field at schema path `path`, or an empty list when every
// stack reads it.
std::vector<Facility> facilities_reading(const std::string& path);

// When stack `info` may use any of `fs`, for messages and the reference: "always" (also for
// a stack that declares nothing), its module choices grouped by choice parameter
// ("recovery=standby|flash or localization=stress"), or "" when never.
std::string when_used(const PolicyInfo& info, const std::vector<Facility>& fs);

// One field of the table that a scenario document sets.
struct SetField {
  std::string at;               // its JSON path, "$.faults.categories[2].alert"
  const StackField* field;      // its line of the table
  const nlohmann::json* value;  // in the document, valid while it is
};
// Every field of the table that `doc` sets, in the table's order (the sections' as the
// parser reads them), each field's values in document order.
std::vector<SetField> fields_set(const nlohmann::json& doc);
// The JSON pointer of a JSON path as fields_set writes it ("$.a.b[2].c" -> "/a/b/2/c").
nlohmann::json::json_pointer pointer_of(const std::string& at);
// Erases from `doc` every field of the table that stack `info`, with `values`, never reads
// (may_use): for a document written for one stack and run under another (sim replay's
// scenario), which then holds only what the stack reads. Returns their JSON paths.
std::vector<std::string> drop_unread_fields(nlohmann::json& doc, const PolicyInfo& info,
                                            const Params& values);

}  // namespace faultline::scenarios
