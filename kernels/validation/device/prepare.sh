#!/usr/bin/env bash
# Assembles .dev/ (git-ignored) for a GPU machine that has CUDA and CMake but not Debian's
# packages: GoogleTest's source and nlohmann-json's headers are copied from this (Debian)
# machine, the wrapper CMakeLists builds kernels/ and tests/kernels alone.
# Then: device run with carry [".dev"], command "bash .dev/run.sh".
set -euo pipefail
cd "$(dirname "$0")/../../.."
rm -rf .dev && mkdir -p .dev/cmake .dev/include
cp -r /usr/src/googletest .dev/googletest
cp -r /usr/include/nlohmann .dev/include/
cp kernels/validation/device/CMakeLists.txt .dev/CMakeLists.txt
cp kernels/validation/device/FindGTest.cmake .dev/cmake/FindGTest.cmake
cp kernels/validation/device/run.sh .dev/run.sh
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
du -sh .dev
