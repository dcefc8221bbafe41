#pragma once

// FAULTLINE_HD marks small inline functions that both the CPU-side library (compiled by g++) and
// the CUDA kernels (compiled by nvcc) use, so that the arithmetic a kernel applies on the GPU is
// the very code the CPU unit tests check: checksum tolerances, pattern generators, bit-flip choice.

#if defined(__CUDACC__)
#define FAULTLINE_HD __host__ __device__
#else
#define FAULTLINE_HD
#endif
