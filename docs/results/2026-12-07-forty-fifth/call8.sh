#!/usr/bin/env bash
# Call 8 (carry build-carry/s45d.txz): lazy rescaling of O at BF16 d = 64 (LZ: the forward's
# two d = 64 BF16 objects with kLazyRescale, branch exp45c) against F (main): the ncu of call
# 6 makes the forward's softmax phase bound by its warp's issue, and O's rescale is 34 of the
# loop's 447 instructions a block. C++ benchmark in rotating order, three passes; then LZ's
# forward GPU tests.
set -uo pipefail
R=/tmp/r8; mkdir -p $R
save() { tar czf $OUT/r8.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s45d.txz
S=build-stage
fwd() { timeout 40 $S/$1/bench/warpflash_bench --dtypes bf16 --causal both --iters 40 --warmup 10 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for pass in 1 2 3; do
  case $pass in 1) order="F LZ";; 2) order="LZ F";; 3) order="F LZ";; esac
  for b in $order; do echo "== $b pass $pass"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass $pass at ${SECONDS}s"; save
done
GTEST_FILTER='*Forward*:*Features*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=120 scripts/gpu_tests.sh $S/LZ $R/tests-LZ.log > $R/tests-LZ.summary 2>&1
echo "LZ tests rc=$? at ${SECONDS}s"; grep -E "^\[  FAILED" $R/tests-LZ.log | sed -E 's/, where.*//' | head -10; gzip -f $R/tests-LZ.log; save
echo "done at ${SECONDS}s"
