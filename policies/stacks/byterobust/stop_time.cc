#include "policies/stacks/byterobust/stop_time.h"

#include <algorithm>

namespace faultline::policies {

namespace {
bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }
}  // namespace

CrashKind classify_crash(const std::string& sig, int exit_code) {
  for (const char* e : {"TypeError", "IndexError", "SyntaxError", "AttributeError", "KeyError",
                        "NameError", "ValueError: ", "AssertionError"})
    if (has(sig, e)) return CrashKind::kUserCode;
  if (has(sig, "NaN") || has(sig, "nan loss") || has(sig, "inf in")) return CrashKind::kNumeric;
  if (has(sig, "NET/IB") || has(sig, "ibv_") || has(sig, "mlx5") ||
      has(sig, "Network is unreachable"))
    return CrashKind::kNetwork;
  if (has(sig, "CUDA") || has(sig, "Xid") || has(sig, "NCCL") || has(sig, "cuda") ||
      has(sig, "ECC") || has(sig, "GPU"))
    return CrashKind::kMachine;
  if (has(sig, "Input/output error") || has(sig, "HDFS") || has(sig, "No space left") ||
      has(sig, "Killed") || has(sig, "OOM") || has(sig, "mount"))
    return CrashKind::kEnvironment;
  return exit_code == 0 ? CrashKind::kEnvironment : CrashKind::kUnknown;
}

std::vector<ProbeKind> test_plan(CrashKind kind) {
  switch (kind) {
    case CrashKind::kMachine:
      return {ProbeKind::kGpuDiag, ProbeKind::kIntraAllToAll, ProbeKind::kInterAllGather};
    case CrashKind::kNetwork:
      return {ProbeKind::kInterAllGather};
    case CrashKind::kNumeric:
      return {ProbeKind::kBitwise};
    case CrashKind::kUnknown:
      return {ProbeKind::kGpuDiag, ProbeKind::kInterAllGather};
    case CrashKind::kUserCode:
    case CrashKind::kEnvironment:
      return {};
  }
  return {};
}

void StopTimeTests::begin(CrashKind kind, MachineSet suspects) {
  plan_ = test_plan(kind);
  suspects_ = std::move(suspects);
}

RunProbe StopTimeTests::begin_nan(MachineSet everyone) {
  plan_.clear();
  suspects_ = std::move(everyone);
  nan_ = true;
  return RunProbe{ProbeKind::kBitwise, suspects_, deadline_,
                  "NaN: bit-wise alignment on every machine"};
}

std::optional<RunProbe> StopTimeTests::next(const std::string& why) {
  if (plan_.empty() || suspects_.empty()) return std::nullopt;
  const ProbeKind t = plan_.front();
  plan_.erase(plan_.begin());
  return RunProbe{t, suspects_, deadline_, why};
}

void StopTimeTests::forget(const MachineSet& left) {
  std::erase_if(suspects_,
                [&](MachineId m) { return std::find(left.begin(), left.end(), m) != left.end(); });
}

void StopTimeTests::forget_gone(const ClusterView& view) {
  std::erase_if(suspects_, [&](MachineId m) {
    return m < 0 || m >= view.machine_count() || view.slot_of(m) < 0;
  });
}

CrashKind CrashClassifier::operator()(const std::string& signature, int exit_code) {
  auto& memo = memo_[exit_code == 0 ? 1 : 0];
  auto it = memo.find(signature);
  if (it == memo.end()) it = memo.emplace(signature, classify_crash(signature, exit_code)).first;
  return it->second;
}

MachineSet named_and_neighbours(const ClusterView& view, SlotId slot) {
  const std::vector<SlotId> group = view.pp_group(slot);
  const auto at = std::find(group.begin(), group.end(), slot);
  std::array<SlotId, 3> near{slot, slot, slot};
  std::size_t n = 1;
  if (group.size() > 1 && at != group.end()) {
    const std::size_t i = static_cast<std::size_t>(at - group.begin());
    near[n++] = group[(i + group.size() - 1) % group.size()];
    near[n++] = group[(i + 1) % group.size()];
  } else {
    near[n++] = (slot + 1) % view.slots();
  }
  std::sort(near.begin(), near.begin() + n);
  n = static_cast<std::size_t>(std::unique(near.begin(), near.begin() + n) - near.begin());
  MachineSet out;
  out.reserve(n);
  for (std::size_t k = 0; k < n; ++k)
    if (view.machine_in(near[k]) != kNoMachine) out.push_back(view.machine_in(near[k]));
  return out;
}

}  // namespace faultline::policies
