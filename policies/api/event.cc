#include "policies/api/event.h"

#include <algorithm>

namespace faultline {

StackSignatures::StackSignatures(const std::vector<std::string>& by_slot) {
  std::vector<std::uint32_t> ids;
  ids.reserve(by_slot.size());
  for (const auto& s : by_slot) ids.push_back(intern(s));
  // The most common index fills; the others are listed.
  std::vector<std::size_t> count(signatures_.size(), 0);
  for (std::uint32_t i : ids) ++count[i];
  assign(by_slot.size(),
         static_cast<std::uint32_t>(std::max_element(count.begin(), count.end()) - count.begin()));
  for (std::size_t s = 0; s < ids.size(); ++s)
    if (ids[s] != fill_) others_.emplace_back(static_cast<std::uint32_t>(s), ids[s]);
}

StackSignatures::StackSignatures(std::size_t slots, std::string_view signature) {
  assign(slots, intern(signature));
}

std::uint32_t StackSignatures::id(std::size_t slot) const {
  auto it = std::lower_bound(others_.begin(), others_.end(),
                             std::make_pair(static_cast<std::uint32_t>(slot), 0u));
  return it != others_.end() && it->first == slot ? it->second : fill_;
}

void StackSignatures::set(std::size_t slot, std::uint32_t id) {
  const auto key = static_cast<std::uint32_t>(slot);
  auto it = std::lower_bound(others_.begin(), others_.end(), std::make_pair(key, 0u));
  const bool listed = it != others_.end() && it->first == key;
  if (id == fill_) {
    if (listed) others_.erase(it);
  } else if (listed) {
    it->second = id;
  } else {
    others_.insert(it, {key, id});
  }
}

std::uint32_t StackSignatures::intern(std::string_view signature) {
  for (std::uint32_t i = 0; i < signatures_.size(); ++i)
    if (signatures_[i] == signature) return i;
  signatures_.emplace_back(signature);
  return static_cast<std::uint32_t>(signatures_.size() - 1);
}

std::vector<std::string> StackSignatures::strings() const {
  std::vector<std::string> out(size_, signatures_[fill_]);
  for (const auto& [slot, i] : others_) out[slot] = signatures_[i];
  return out;
}

}  // namespace faultline
