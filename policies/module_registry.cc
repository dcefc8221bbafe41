#include <stdexcept>

#include "policies/module.h"

namespace faultline::policies {

const char* module_kind_name(ModuleKind k) {
  switch (k) {
    case ModuleKind::kDetection: return "detection";
    case ModuleKind::kLocalization: return "localization";
    case ModuleKind::kRecovery: return "recovery";
    case ModuleKind::kCheckpoint: return "checkpoint";
  }
  return "?";
}

void ModuleRegistry::add(ModuleInfo info, LocalizerFactory make) {
  if (find(info.kind, info.name))
    throw std::invalid_argument(std::string(module_kind_name(info.kind)) + " module '" + info.name +
                                "' is registered twice");
  entries_.push_back({std::move(info), std::move(make)});
}

std::vector<const ModuleInfo*> ModuleRegistry::of(ModuleKind kind) const {
  std::vector<const ModuleInfo*> out;
  for (const auto& e : entries_)
    if (e.info.kind == kind) out.push_back(&e.info);
  return out;
}

std::vector<std::string> ModuleRegistry::names(ModuleKind kind) const {
  std::vector<std::string> out;
  for (const ModuleInfo* m : of(kind)) out.push_back(m->name);
  return out;
}

const ModuleInfo* ModuleRegistry::find(ModuleKind kind, std::string_view name) const {
  for (const auto& e : entries_)
    if (e.info.kind == kind && e.info.name == name) return &e.info;
  return nullptr;
}

std::unique_ptr<Localizer> ModuleRegistry::make_localizer(std::string_view name, const Params& params) const {
  for (const auto& e : entries_)
    if (e.info.kind == ModuleKind::kLocalization && e.info.name == name) return e.make(params);
  throw std::invalid_argument("no localization module '" + std::string(name) + "'");
}

}  // namespace faultline::policies
