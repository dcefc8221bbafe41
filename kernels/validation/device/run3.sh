#!/usr/bin/env bash
# Second H200 call: rebuild with the size-aware GEMM limit, ctest -L gpu, a hung probe caught by
# its deadline, and GEMM throughput against matrix size (the curve behind gemm_spec_min_size).
set -u
B=/tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cmake -S .dev -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
SECONDS=0
cmake --build $B -j16 > $OUT/build.log 2>&1 || { grep -m20 error $OUT/build.log; exit 1; }
echo "build ${SECONDS}s"
P=$(find $B -name faultline-probe -type f | head -1)
SECONDS=0
(cd $B && ctest -L gpu --timeout 150 --output-on-failure > $OUT/ctest_gpu.log 2>&1)
echo "ctest -L gpu ${SECONDS}s"
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu.log
SECONDS=0
timeout 60 $P gemm --inject hang --deadline 5 > $OUT/hang.json 2>$OUT/hang.err; echo "== hang exit $? after ${SECONDS}s"
head -c 700 $OUT/hang.json; echo
for n in 2048 4096 8192 16384; do
  timeout 60 $P gemm --size $n --duration 1 > $OUT/gemm_$n.json 2>/dev/null; echo "== gemm size $n exit $?"
done
python3 - <<'PY'
import json,os
o=os.environ['OUT']
for n in (2048,4096,8192,16384):
  m=json.load(open(f'{o}/gemm_{n}.json'))['metrics']
  print(n, {p: round(m.get(f'gemm_{p}_tflops',0),1) for p in ('bf16','fp16','tf32')},
        {p: round(m.get(f'gemm_{p}_vs_baseline',0),3) for p in ('bf16','fp16','tf32')})
PY
