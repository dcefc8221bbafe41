// faultline-probe: one GPU health probe per process, JSON on stdout, exit code = verdict.
// See probe_main.h for the program logic and `faultline-probe --help` for usage.

#include <filesystem>
#include <iostream>
#include <string_view>
#include <system_error>
#include <vector>

#include "kernels/probe_main.h"
#ifdef FAULTLINE_KERNELS_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

#ifndef FAULTLINE_KERNELS_THRESHOLDS_SOURCE
#define FAULTLINE_KERNELS_THRESHOLDS_SOURCE ""
#endif

int main(int argc, char** argv) {
  namespace fk = faultline::kernels;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  fk::ProgramEnvironment environment;
  environment.env = fk::process_env();
  std::error_code ec;
  environment.exe_path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) environment.exe_path = argv[0];
  environment.compiled_in_thresholds = FAULTLINE_KERNELS_THRESHOLDS_SOURCE;
#ifdef FAULTLINE_KERNELS_HAVE_CUDA
  auto backend = fk::make_cuda_backend();
#else
  auto backend = fk::make_no_cuda_backend();
#endif
  return fk::probe_main(args, *backend, std::cout, std::cerr, environment);
}
