#include "policies/api/registry.h"

#include <sstream>
#include <stdexcept>

namespace faultline {

bool conditions_hold(const PolicyInfo& info, const std::vector<std::string>& when,
                     const Params& values) {
  if (when.empty()) return true;
  for (const std::string& cond : when) {
    const auto eq = cond.find('=');
    const ParamSpec* choice = info.find_param(cond.substr(0, eq));
    if (!choice || eq == std::string::npos)
      return true;  // not a condition we can judge: assume it holds
    const int want = choice->choice_index(cond.substr(eq + 1));
    const auto it = values.values().find(choice->name);
    if (want < 0 || it == values.values().end() || static_cast<int>(it->second) == want)
      return true;
  }
  return false;
}

bool param_is_read(const PolicyInfo& info, const ParamSpec& spec, const Params& values) {
  return conditions_hold(info, spec.read_when, values);
}

bool may_use(const PolicyInfo& info, Facility f, const Params& values) {
  if (!info.uses) return true;  // declares nothing: may use everything
  for (const FacilityUse& u : *info.uses)
    if (u.facility == f && conditions_hold(info, u.when, values)) return true;
  return false;
}

std::optional<std::string> Params::resolve(const std::vector<ParamSpec>& specs,
                                           const std::map<std::string, double>& overrides,
                                           Params* out) {
  out->values_.clear();
  out->index_.clear();
  for (const auto& s : specs) out->values_[s.name] = s.default_value;
  for (const auto& [k, v] : overrides) {
    auto it = out->values_.find(k);
    if (it == out->values_.end()) {
      std::ostringstream o;
      o << "unknown parameter '" << k << "'; expected one of:";
      for (const auto& s : specs) o << ' ' << s.name;
      return o.str();
    }
    for (const auto& s : specs) {
      if (s.name != k) continue;
      if (!s.choices.empty() && !(v >= s.min && v <= s.max && v == static_cast<int>(v))) {
        std::ostringstream o;
        o << "parameter '" << k << "' = " << v << " is not a choice; expected one of:";
        for (size_t i = 0; i < s.choices.size(); ++i) o << ' ' << s.choices[i] << " (" << i << ')';
        return o.str();
      }
      if (!(v >= s.min && v <= s.max)) {
        std::ostringstream o;
        o << "parameter '" << k << "' = " << v << " is out of range; expected " << s.min << " to "
          << s.max << (s.unit.empty() ? "" : " ") << s.unit;
        return o.str();
      }
    }
    it->second = v;
  }
  out->index_ = {out->values_.begin(), out->values_.end()};
  return std::nullopt;
}

double Params::get(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    throw std::logic_error("undeclared policy parameter: " + std::string(name));
  return it->second;
}

Params Params::only(const std::vector<ParamSpec>& specs) const {
  Params out;
  for (const ParamSpec& s : specs) {
    auto it = values_.find(s.name);
    out.values_[s.name] = it == values_.end() ? s.default_value : it->second;
  }
  out.index_ = {out.values_.begin(), out.values_.end()};
  return out;
}

void Registry::add(PolicyInfo info, Factory factory) {
  std::string name = info.name;
  entries_[name] = Entry{std::move(info), std::move(factory)};
}

const PolicyInfo* Registry::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.info;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) out.push_back(k);
  return out;
}

std::unique_ptr<Policy> Registry::make(const std::string& name, const Params& params) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw std::logic_error("unregistered policy stack: " + name);
  return it->second.factory(params);
}

}  // namespace faultline
