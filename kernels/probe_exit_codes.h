// Exit codes of `faultline-probe`: the verdict, readable without parsing JSON. A skipped
// probe (nothing to test, e.g. p2p with one GPU) exits 0 like a pass. CUDA-free and
// header-only: the live agent (realexec/), which never links CUDA, reads them too.
#pragma once

namespace faultline::kernels {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoGpu = 3;
inline constexpr int kExitDeadline = 4;

}  // namespace faultline::kernels
