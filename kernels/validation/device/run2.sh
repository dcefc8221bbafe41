#!/usr/bin/env bash
set -u
B=/tmp/b
cmake -S .dev -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build $B -j16 --target faultline-probe > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
P=$(find $B -name faultline-probe -type f | head -1)
for i in 1 2; do
  $P hbm > $OUT/hbm_$i.json; echo "hbm $i exit $?"
  $P pcie > $OUT/pcie_$i.json; echo "pcie $i exit $?"
  python3 .dev/ref.py > $OUT/ref_$i.json; cat $OUT/ref_$i.json
done
$P gemm > $OUT/gemm.json; echo "gemm exit $?"
python3 - <<'PY'
import json,os
o=os.environ['OUT']
for i in (1,2):
  h=json.load(open(f'{o}/hbm_{i}.json'))['metrics']; r=json.load(open(f'{o}/ref_{i}.json')); p=json.load(open(f'{o}/pcie_{i}.json'))['metrics']
  print(i,'hbm_read',round(h['hbm_bandwidth_gbps']),'hbm_copy',round(h['hbm_copy_gbps']),'torch d2d r+w',round(r['d2d_copy_gbps_read_plus_write']),
        'ratio copy',round(h['hbm_copy_gbps']/r['d2d_copy_gbps_read_plus_write'],3),'ratio read',round(h['hbm_bandwidth_gbps']/r['d2d_copy_gbps_read_plus_write'],3),
        'pcie h2d',round(p['pcie_h2d_gbps'],1),'torch h2d',round(r['h2d_pinned_gbps'],1),'d2h',round(p['pcie_d2h_gbps'],1),'torch d2h',round(r['d2h_pinned_gbps'],1),
        'torch bf16',round(r['matmul_bf16_16384_tflops'],1))
g=json.load(open(f'{o}/gemm.json'))['metrics']; print('probe gemm bf16',round(g['gemm_bf16_tflops'],1),'its cublas',round(g['gemm_bf16_baseline_tflops'],1))
PY
