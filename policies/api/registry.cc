#include "policies/api/registry.h"

#include <algorithm>
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
    const std::string want = cond.substr(eq + 1);
    const auto it = values.choices().find(choice->name);
    if (choice->choice_index(want) < 0 || it == values.choices().end() || it->second == want)
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

namespace {

// "expected one of: a (0) b (1)": a choice's names, with the indexes a scenario may give.
std::string choice_list(const ParamSpec& s) {
  std::ostringstream o;
  o << "expected one of:";
  for (size_t i = 0; i < s.choices.size(); ++i) o << ' ' << s.choices[i] << " (" << i << ')';
  return o.str();
}

// Sets `s`'s value in `out` from `v`: a choice takes a module name (or its index, turned into
// the name here), a number parameter a number in range. Returns the error, or nullopt.
std::optional<std::string> set_value(const ParamSpec& s, const ParamValue& v,
                                     std::map<std::string, double, std::less<>>& values,
                                     std::map<std::string, std::string, std::less<>>& choices) {
  std::ostringstream o;
  if (!s.choices.empty()) {
    const double x = v.number();
    if (v.is_name() && s.choice_index(v.name()) >= 0) {
      choices[s.name] = v.name();
      return std::nullopt;
    }
    if (!v.is_name() && x >= s.min && x <= s.max && x == static_cast<int>(x)) {
      choices[s.name] = s.choices.at(static_cast<std::size_t>(x));
      return std::nullopt;
    }
    o << "parameter '" << s.name << "' = ";
    if (v.is_name())
      o << '"' << v.name() << '"';
    else
      o << x;
    o << " is not a choice; " << choice_list(s);
    return o.str();
  }
  if (v.is_name()) return "parameter '" + s.name + "' = \"" + v.name() + "\": expected a number";
  if (!(v.number() >= s.min && v.number() <= s.max)) {
    o << "parameter '" << s.name << "' = " << v.number() << " is out of range; expected " << s.min
      << " to " << s.max << (s.unit.empty() ? "" : " ") << s.unit;
    return o.str();
  }
  values[s.name] = v.number();
  return std::nullopt;
}

}  // namespace

std::optional<std::string> Params::resolve(const std::vector<ParamSpec>& specs,
                                           const ParamValues& overrides, Params* out) {
  out->values_.clear();
  out->choices_.clear();
  out->versions_.clear();
  out->index_.clear();
  for (const auto& s : specs) {
    if (s.choices.empty())
      out->values_[s.name] = s.default_value;
    else
      out->choices_[s.name] = s.default_choice();
  }
  for (const auto& [k, v] : overrides) {
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&k = k](const ParamSpec& s) { return s.name == k; });
    if (spec == specs.end()) {
      std::ostringstream o;
      o << "unknown parameter '" << k << "'; expected one of:";
      for (const auto& s : specs) o << ' ' << s.name;
      return o.str();
    }
    if (auto err = set_value(*spec, v, out->values_, out->choices_)) return err;
  }
  out->note_versions(specs);
  out->index_ = {out->values_.begin(), out->values_.end()};
  return std::nullopt;
}

double Params::get(std::string_view name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  if (choices_.count(name))
    throw std::logic_error("policy parameter " + std::string(name) +
                           " is a module choice: read its name with Params::choice");
  throw std::logic_error("undeclared policy parameter: " + std::string(name));
}

const std::string& Params::choice(std::string_view name) const {
  auto it = choices_.find(name);
  if (it == choices_.end())
    throw std::logic_error("undeclared module choice: " + std::string(name));
  return it->second;
}

Params Params::only(const std::vector<ParamSpec>& specs) const {
  Params out;
  for (const ParamSpec& s : specs) {
    if (!s.choices.empty()) {
      auto it = choices_.find(s.name);
      out.choices_[s.name] = it == choices_.end() ? s.default_choice() : it->second;
      continue;
    }
    auto it = values_.find(s.name);
    out.values_[s.name] = it == values_.end() ? s.default_value : it->second;
  }
  out.note_versions(specs);
  out.index_ = {out.values_.begin(), out.values_.end()};
  return out;
}

void Params::note_versions(const std::vector<ParamSpec>& specs) {
  versions_.clear();
  for (const ParamSpec& s : specs) {
    const auto it = choices_.find(s.name);
    if (it == choices_.end()) continue;
    const int i = s.choice_index(it->second);
    if (i >= 0 && static_cast<std::size_t>(i) < s.choice_versions.size())
      versions_[s.name] = s.choice_versions[static_cast<std::size_t>(i)];
  }
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
