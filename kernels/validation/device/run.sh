#!/usr/bin/env bash
# One device call: build kernels/ for sm_90, ctest -L gpu, every probe, failure paths.
set -u
B=/tmp/b
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
nvcc --version | tail -2; g++ --version | head -1; cmake --version | head -1
cmake -S .dev -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/configure.log 2>&1 || { tail -40 $OUT/configure.log; exit 1; }
grep -E "kernels|NCCL|nccl" $OUT/configure.log | head -5
SECONDS=0
cmake --build $B -j16 > $OUT/build.log 2>&1 || { grep -m20 -E "error" $OUT/build.log; tail -20 $OUT/build.log; exit 1; }
echo "build ${SECONDS}s"
SECONDS=0
(cd $B && ctest -L gpu --timeout 150 --output-on-failure > $OUT/ctest_gpu.log 2>&1)
echo "ctest -L gpu ${SECONDS}s"
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu.log
P=$(find $B -name faultline-probe -type f | head -1)
for p in env gemm hbm pcie p2p nccl; do
  SECONDS=0
  timeout 150 $P $p > /tmp/p_$p.json 2>/tmp/p_$p.err; rc=$?
  echo "== $p exit $rc ${SECONDS}s"; head -c 1200 /tmp/p_$p.json; echo; tail -2 /tmp/p_$p.err
done
echo "== missing device"; timeout 60 $P gemm --device 7 > /tmp/p_missing.json 2>&1; echo "exit $?"; head -c 400 /tmp/p_missing.json; echo
echo "== bit flip"; timeout 120 $P gemm --inject bitflip > /tmp/p_inject.json 2>&1; echo "exit $?"; head -c 600 /tmp/p_inject.json; echo
cat /tmp/p_*.json > $OUT/probes.jsonl 2>/dev/null
nvidia-smi -q | head -60 > $OUT/nvidia-smi.txt
