#!/usr/bin/env bash
# Call 8 (carry build-carry/s43z.txz): Z = F (main at 4ea3198) with d = 64's backward (BF16 and
# FP16) computing one exponential in four on the FMA pipe (WARPFLASH_EXP2_FMA_EVERY=4), its GPU
# tests and benchmark, and F's benchmark. The backward GPU tests of Z, memcheck on one d = 64
# case, then the C++ backward benchmark F / Z at d = 64, four passes in rotating order.
set -uo pipefail
R=/tmp/r8; mkdir -p $R
save() { tar czf $OUT/r8.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s43z.txz
S=build-stage
GTEST_FILTER='Prepost/*:Backward*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=200 scripts/gpu_tests.sh $S/Z $R/tests-Z.log; echo "Z backward tests rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED" $R/tests-Z.log | sed -E 's/, where.*//' | head -12; save
bench() { timeout 60 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for pass in 1 2 3 4; do
  if [ $((pass % 2)) = 1 ]; then order="F Z"; else order="Z F"; fi
  for b in $order; do echo "== $b pass $pass"; bench $b; done >> $R/timing.log 2>&1
  echo "timing pass $pass done at ${SECONDS}s"; save
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $S/Z/tests/warpflash_gpu_tests --gtest_brief=1 \
  --gtest_filter='Backward/*bf16_d64_causal_window:Backward/*fp16_d64_gqa_causal' > $R/Z-memcheck.log 2>&1
echo "Z memcheck rc=$? at ${SECONDS}s"; tail -n 2 $R/Z-memcheck.log; save
