#pragma once

// The ProbeBackend of builds with CUDA: checks that a GPU is there (CUDA errors 35 and 100 mean
// "no GPU": verdict no_gpu, exit 3, in milliseconds), that the requested device exists and that
// this binary has kernels for it, then runs the probe (cuda_probes.h) and turns GPU failures into
// a fail verdict with the error in the notes.

#include <memory>

#include "kernels/cuda_util.h"
#include "kernels/probe_main.h"

namespace faultline::kernels {

std::unique_ptr<ProbeBackend> make_cuda_backend();

// What the CUDA runtime says about GPUs on this machine (for tests deciding whether to skip).
GpuPresence cuda_gpu_presence();

}  // namespace faultline::kernels
