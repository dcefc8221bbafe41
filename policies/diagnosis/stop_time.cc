#include "policies/diagnosis/stop_time.h"

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

}  // namespace faultline::policies
