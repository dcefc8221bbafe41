#!/usr/bin/env bash
# Second H100 call (issue 19): main with throughput judged only for burns as long as the
# calibrated ones; ctest -L gpu, then a 1 s and a default (5 s) burn at n = 16384.
set -u
B=/tmp/b5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
cmake -S .dev -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
SECONDS=0
cmake --build $B -j16 > $OUT/build.log 2>&1 || { grep -m20 error $OUT/build.log; exit 1; }
echo "build ${SECONDS}s"
P=$(find $B -name faultline-probe -type f | head -1)
SECONDS=0
(cd $B && ctest -L gpu --timeout 150 --output-on-failure > $OUT/ctest_gpu.log 2>&1)
echo "ctest -L gpu ${SECONDS}s"
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu.log
timeout 60 $P gemm --duration 1 > $OUT/gemm_16384_1s.json 2>/dev/null; echo "== gemm 16384 1 s exit $?"
timeout 90 $P gemm > $OUT/gemm_16384_5s.json 2>/dev/null; echo "== gemm 16384 5 s exit $?"
python3 - <<'PY'
import json,os
o=os.environ['OUT']
for f in ('gemm_16384_1s.json','gemm_16384_5s.json'):
  j=json.load(open(f'{o}/{f}')); m=j['metrics']
  print(f, j['verdict'], {k:round(v,3) for k,v in m.items() if k.endswith('vs_baseline') or (k.endswith('_tflops') and 'base' not in k)})
  print('   checks:', [c['name'] for c in j['checks'] if 'vs_baseline' in c['name'] or 'tflops' in c['name']])
  for n in j['notes'][:3]: print('   note:', n)
PY
