// An explicit registry of policy stacks by name.
//
// No static-initialisation magic: policies/builtin.cc registers the built-in stacks,
// and a user can register more before building a world. Backends build the policy a
// scenario names through this registry and never name a concrete policy themselves.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/api/policy.h"

namespace faultline {

class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Policy>(const Params&)>;

  // Registers `info.name`; a second registration of the same name replaces the first.
  void add(PolicyInfo info, Factory factory);
  const PolicyInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;
  // Builds a policy; requires `name` registered and `params` resolved against its info.
  std::unique_ptr<Policy> make(const std::string& name, const Params& params) const;

 private:
  struct Entry {
    PolicyInfo info;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace faultline
