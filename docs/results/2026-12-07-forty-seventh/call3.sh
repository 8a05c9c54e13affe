#!/usr/bin/env bash
# call 3: d = 256's default kernel with the 16-byte row stores (branch d256-rows; a BF16
# d = 256 build in build-stage/pack/r256.tar.xz): its GPU tests, memcheck and racecheck on
# two cases, then main (the full build's benchmark) and the branch alternating, two passes.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack/r256.tar.xz)
GPU_TEST_SHARDS=14 TEST_TIMEOUT=150 scripts/gpu_tests.sh build-stage/r256 $OUT/tests-r256.log > /dev/null; echo "tests rc=$?"
grep -hE "^\[  (PASSED|FAILED)" $OUT/tests-r256.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-r256.log | head
F='Shapes/ForwardGpuTest.MatchesReference/bf16_d256_full_b1_q300_k8250_h2_kv1:Shapes/ForwardGpuTest.MatchesReference/bf16_d256_full_b2_q113_k203_h4_kv1'
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool build-stage/r256/tests/warpflash_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/$tool-r256.log 2>&1; echo "$tool rc=$?"; tail -n 2 $OUT/$tool-r256.log
done
A="--dtypes bf16 --head-dims 256 --seqlens 2048,4096,8192,16384 --causal both --iters 50"
for rep in 1 2; do
  for b in main r256; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A | grep -E '^bf16'; done
done 2>&1 | tee $OUT/timing.log | tail -0
echo done
