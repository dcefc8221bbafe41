#!/usr/bin/env bash
# H100 call (issue 19): build, ctest -L gpu (10 tests, the kernel hang included), every probe with
# defaults, the failure paths, GEMM throughput against size, PyTorch references, and a
# two-process NCCL rendezvous on the one GPU (NCCL is expected to refuse two ranks on one GPU:
# this records how the probe reports it). Results are written to $OUT as they come.
set -u
B=/tmp/b
D=$(cd "$(dirname "$0")" && pwd)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvcc --version | tail -2; g++ --version | head -1; cmake --version | head -1; nproc; date -u; } | tee $OUT/machine.txt
cmake -S .dev -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
SECONDS=0
cmake --build $B -j16 > $OUT/build.log 2>&1 || { grep -m20 error $OUT/build.log; exit 1; }
echo "build ${SECONDS}s"
P=$(find $B -name faultline-probe -type f | head -1)
SECONDS=0
(cd $B && ctest -L gpu --timeout 150 --output-on-failure > $OUT/ctest_gpu.log 2>&1)
echo "ctest -L gpu ${SECONDS}s"
grep -E "Test +#|tests passed|tests failed|Skipped|SKIP" $OUT/ctest_gpu.log
for p in env gemm hbm pcie p2p nccl; do
  SECONDS=0
  timeout 150 $P $p > $OUT/probe_$p.json 2>$OUT/probe_$p.err; echo "== $p exit $? ${SECONDS}s"
done
SECONDS=0; timeout 60 $P gemm --device 7 > $OUT/missing.json 2>&1; echo "== missing device exit $? ${SECONDS}s"
SECONDS=0; timeout 120 $P gemm --inject bitflip > $OUT/bitflip.json 2>$OUT/bitflip.err; echo "== bitflip exit $? ${SECONDS}s"
SECONDS=0; timeout 60 $P gemm --inject hang --deadline 5 > $OUT/hang.json 2>$OUT/hang.err; echo "== hang exit $? ${SECONDS}s"
SECONDS=0; timeout 60 $P gemm --inject hang-kernel --deadline 8 > $OUT/hang_kernel.json 2>$OUT/hang_kernel.err; echo "== hang-kernel exit $? ${SECONDS}s"
SECONDS=0; timeout 60 $P gemm --size 4096 --duration 1 > $OUT/after_hang.json 2>/dev/null; echo "== probe right after the kernel hang exit $? ${SECONDS}s"
for n in 4096 8192 16384; do
  timeout 60 $P gemm --size $n --duration 1 > $OUT/gemm_$n.json 2>/dev/null; echo "== gemm size $n exit $?"
done
R=/tmp/rdv.$$; rm -f $R
SECONDS=0
timeout 40 $P nccl --rendezvous file:$R --rank 0 --nranks 2 --device 0 --deadline 20 > $OUT/nccl2p_r0.json 2>$OUT/nccl2p_r0.err & a=$!
timeout 40 $P nccl --rendezvous file:$R --rank 1 --nranks 2 --device 0 --deadline 20 > $OUT/nccl2p_r1.json 2>$OUT/nccl2p_r1.err & b=$!
wait $a; ra=$?; wait $b; rb=$?; echo "== nccl two processes, one GPU: exits $ra $rb ${SECONDS}s"
python3 - <<'PY'
import json,os,glob
o=os.environ['OUT']
for f in sorted(glob.glob(o+'/*.json')):
  try: j=json.load(open(f))
  except Exception as e: print(os.path.basename(f),'unparsable',e); continue
  m=j.get('metrics',{})
  keep={k:round(v,3) if isinstance(v,float) else v for k,v in m.items() if any(s in k for s in ('tflops','vs_baseline','gbps','gb_s','busbw','detected','injected'))}
  print(os.path.basename(f), j.get('verdict'), j.get('exit_code'), json.dumps(keep)[:600])
  for n in (j.get('notes') or [])[:3]: print('   note:', str(n)[:200])
PY
SECONDS=0
timeout 120 python3 $D/ref.py > $OUT/ref.json 2>$OUT/ref.err; echo "== ref.py exit $? ${SECONDS}s"; cat $OUT/ref.json; tail -2 $OUT/ref.err
nvidia-smi -q | head -60 > $OUT/nvidia-smi.txt
