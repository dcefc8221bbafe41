#include "policies/api/event.h"

namespace faultline {

StackSignatures::StackSignatures(const std::vector<std::string>& by_slot) {
  by_slot_.reserve(by_slot.size());
  for (const auto& s : by_slot) by_slot_.push_back(intern(s));
}

StackSignatures::StackSignatures(std::size_t slots, std::string_view signature) {
  by_slot_.assign(slots, intern(signature));
}

std::uint32_t StackSignatures::intern(std::string_view signature) {
  for (std::uint32_t i = 0; i < signatures_.size(); ++i)
    if (signatures_[i] == signature) return i;
  signatures_.emplace_back(signature);
  return static_cast<std::uint32_t>(signatures_.size() - 1);
}

std::vector<std::string> StackSignatures::strings() const {
  std::vector<std::string> out;
  out.reserve(by_slot_.size());
  for (std::uint32_t id : by_slot_) out.push_back(signatures_[id]);
  return out;
}

}  // namespace faultline
