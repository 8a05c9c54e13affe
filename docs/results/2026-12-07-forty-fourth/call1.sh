#!/usr/bin/env bash
# Call 1 (carry build-carry/s44a.txz and s44t.txz): M = main (df3f430's kernels); variant libraries of M with
# single objects replaced, for the C++ benchmark in rotating order (no GPU tests yet):
#   L1: backward d = 64 one exponential in 3 on the FMA pipe, d = 128 one in 4;
#       forward d = 64 (both instances) one in 4, e4m3 d = 64 one in 4
#   L2: backward d = 64 one in 2, d = 128 one in 2; forward d = 64 one in 3, e4m3 d = 64 one in 2
#   Q:  backward d = 64 with two dQ buffers (one exponential in 4 as main)
#   Q3: Q with one exponential in 3
# and T = M with the candidates at d = 64 (forward one exponential in 4, BF16 and FP16, both
# instances; backward two dQ buffers, BF16 and FP16): every GPU test.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r1; mkdir -p $R
save() { tar czf $OUT/r1.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s44a.txz; tar xJf build-carry/s44t.txz
S=build-stage
bwd() { timeout 90 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
fwd() { timeout 90 $S/$1/bench/warpflash_bench --dtypes bf16 --causal both --iters 50 --warmup 10 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
timing() {  # timing PASS ORDER...
  local pass=$1; shift
  for b in "$@"; do echo "== $b pass $pass"; bwd $b; done >> $R/bwd.log 2>&1
  for b in "$@"; do echo "== $b pass $pass"; fwd $b; done >> $R/fwd.log 2>&1
  echo "timing pass $pass done at ${SECONDS}s"; save
}
timing 1 M L1 L2 Q Q3
GPU_TEST_SHARDS=8 TEST_TIMEOUT=240 scripts/gpu_tests.sh $S/T $R/tests-T.log; echo "T tests rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED" $R/tests-T.log | sed -E 's/, where.*//' | head -20; save
[ $SECONDS -lt 250 ] && timing 2 Q3 Q L2 L1 M
echo "done at ${SECONDS}s"
