// libFuzzer target: the oobleck reader (and what runs on what it reads).
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  faultline::traces::fuzz::run(data, size, faultline::traces::Format::kOobleck);
  return 0;
}
