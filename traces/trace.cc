#include "traces/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

namespace faultline::traces {

const char* event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kFaultStart:
      return "fault_start";
    case EventKind::kFaultEnd:
      return "fault_end";
    case EventKind::kFault:
      return "fault";
    case EventKind::kNodeJoin:
      return "node_join";
  }
  return "?";
}

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::kNode:
      return "node";
    case Scope::kRack:
      return "rack";
    case Scope::kSwitch:
      return "switch";
    case Scope::kJob:
      return "job";
  }
  return "?";
}

const char* pairing_name(Pairing p) {
  switch (p) {
    case Pairing::kByCategory:
      return "by_category";
    case Pairing::kFifo:
      return "fifo";
    case Pairing::kLifo:
      return "lifo";
  }
  return "?";
}

bool parse_event_kind(std::string_view s, EventKind* out) {
  for (EventKind k :
       {EventKind::kFaultStart, EventKind::kFaultEnd, EventKind::kFault, EventKind::kNodeJoin})
    if (s == event_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

bool parse_scope(std::string_view s, Scope* out) {
  for (Scope k : {Scope::kNode, Scope::kRack, Scope::kSwitch, Scope::kJob})
    if (s == scope_name(k)) {
      *out = k;
      return true;
    }
  if (s == "machine") {
    *out = Scope::kNode;
    return true;
  }
  return false;
}

bool parse_pairing(std::string_view s, Pairing* out) {
  for (Pairing k : {Pairing::kByCategory, Pairing::kFifo, Pairing::kLifo})
    if (s == pairing_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

namespace {
std::uint64_t hash_text(std::string_view s) { return std::hash<std::string_view>{}(s); }
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  return (h ^ v) * 0x9E3779B97F4A7C15ull + (h >> 29);
}
}  // namespace

void Trace::Index::insert(std::uint64_t h, std::int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(16, old.size() * 2), Slot{});
    count_ = 0;
    for (const Slot& s : old)
      if (s.id >= 0) insert(s.hash, s.id);
  }
  std::size_t i = h & (slots_.size() - 1);
  while (slots_[i].id >= 0) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = {h, id};
  ++count_;
}

std::int32_t Trace::intern_node(std::string_view name) {
  const std::uint64_t h = hash_text(name);
  std::int32_t id = node_index_.find(
      h, [&](std::int32_t i) { return nodes[static_cast<std::size_t>(i)] == name; });
  if (id >= 0) return id;
  id = static_cast<std::int32_t>(nodes.size());
  nodes.emplace_back(name);
  node_index_.insert(h, id);
  return id;
}

std::int32_t Trace::intern_category(std::string_view level, std::string_view cls,
                                    std::string_view desc) {
  const std::uint64_t h = mix(mix(hash_text(level), hash_text(cls)), hash_text(desc));
  std::int32_t id = category_index_.find(h, [&](std::int32_t i) {
    const Category& c = categories[static_cast<std::size_t>(i)];
    return c.level == level && c.cls == cls && c.desc == desc;
  });
  if (id >= 0) return id;
  id = static_cast<std::int32_t>(categories.size());
  categories.push_back({std::string(level), std::string(cls), std::string(desc)});
  category_index_.insert(h, id);
  return id;
}

std::int32_t Trace::intern_group(std::string_view name) {
  const std::uint64_t h = hash_text(name);
  std::int32_t id = group_index_.find(
      h, [&](std::int32_t i) { return groups[static_cast<std::size_t>(i)] == name; });
  if (id >= 0) return id;
  id = static_cast<std::int32_t>(groups.size());
  groups.emplace_back(name);
  group_index_.insert(h, id);
  return id;
}

std::int32_t Trace::add_attributes(Attributes a) {
  attrs.push_back(std::move(a));
  return static_cast<std::int32_t>(attrs.size() - 1);
}

void Trace::sort_by_time() {
  if (sorted_by_time()) return;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.time_s < b.time_s; });
}

bool Trace::sorted_by_time() const {
  for (std::size_t i = 1; i < events.size(); ++i)
    if (events[i].time_s < events[i - 1].time_s) return false;
  return true;
}

std::pair<double, double> Trace::span() const {
  if (events.empty()) return {0, 0};
  double lo = events.front().time_s, hi = lo;
  for (const Event& e : events) {
    lo = std::min(lo, e.time_s);
    hi = std::max(hi, e.time_s);
  }
  return {lo, hi};
}

std::pair<double, double> Trace::observation_window() const { return window ? *window : span(); }

PairingResult pair_faults(const Trace& t) { return pair_faults(t, t.pairing); }

PairingResult pair_faults(const Trace& t, Pairing p) {
  PairingResult r;
  const std::size_t n = t.events.size();
  std::vector<std::uint32_t> order;
  const bool sorted = t.sorted_by_time();
  if (!sorted) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return t.events[a].time_s < t.events[b].time_s;
    });
  }
  // Open faults per node: indices into r.faults. Most nodes have zero or one open.
  std::vector<std::vector<std::uint32_t>> open(t.nodes.size());
  r.faults.reserve(n / 2 + 1);
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = t.events[sorted ? i : order[i]];
    if (e.node < 0 || static_cast<std::size_t>(e.node) >= open.size()) continue;
    switch (e.kind) {
      case EventKind::kFaultStart:
        open[e.node].push_back(static_cast<std::uint32_t>(r.faults.size()));
        r.faults.push_back({e.time_s, NAN, e.node, e.category, e.group, e.scope, e.line});
        break;
      case EventKind::kFault: {
        FaultSpan s{e.time_s, NAN, e.node, e.category, e.group, e.scope, e.line};
        if (!std::isnan(e.duration_s)) s.end_s = e.time_s + e.duration_s;
        r.faults.push_back(s);
        break;
      }
      case EventKind::kFaultEnd: {
        auto& o = open[e.node];
        if (o.empty()) {
          ++r.unmatched_ends;
          if (r.unmatched_lines.size() < 10) r.unmatched_lines.push_back(e.line);
          break;
        }
        std::size_t pick = p == Pairing::kLifo ? o.size() - 1 : 0;
        if (p == Pairing::kByCategory) {
          for (std::size_t k = 0; k < o.size(); ++k)
            if (r.faults[o[k]].category == e.category) {
              pick = k;
              break;
            }
        }
        r.faults[o[pick]].end_s = e.time_s;
        o.erase(o.begin() + static_cast<std::ptrdiff_t>(pick));
        break;
      }
      case EventKind::kNodeJoin:
        break;
    }
  }
  for (const auto& o : open) r.open += o.size();
  // Starts were appended in time order already.
  return r;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Whole numbers as integers ("300000", not "3e+05"); the rest in the shortest form
  // that reads back exactly.
  if (v == std::trunc(v) && std::fabs(v) < 1e15 && !(v == 0 && std::signbit(v))) {
    auto res = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    return std::string(buf, res.ptr);
  }
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace faultline::traces
