#!/usr/bin/env bash
# round 3: the final register-path epilogue: GPU tests of the d=256 and d=192 builds,
# sanitizers, and timing against main (b256, b192) in alternation.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
for b in b256n b192n; do
  GPU_TEST_SHARDS=8 scripts/gpu_tests.sh build-stage/$b $OUT/tests-$b.log > /dev/null; echo "tests $b rc=$?"
  grep -hE "^\[  (PASSED|FAILED)" $OUT/tests-$b.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
done
F='Shapes/ForwardGpuTest.MatchesReference/bf16_d256_full_b1_q300_k8250_h2_kv1:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d256_varlen_full_unequal'
for tool in memcheck racecheck; do
  timeout 250 compute-sanitizer --tool $tool build-stage/b256n/tests/warpflash_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/$tool-d256.log 2>&1; echo "$tool rc=$?"; tail -n 2 $OUT/$tool-d256.log
done
A256="--dtypes bf16 --head-dims 256 --seqlens 2048,4096,8192,16384 --causal both --iters 50"
A192="--dtypes bf16 --head-dims 192 --seqlens 512,1024,2048,4096 --causal both --iters 50"
for rep in 1 2 3; do
  for b in b256 b256n; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A256 | grep -E '^bf16'; done
  for b in b192 b192n; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A192 | grep -E '^bf16'; done
done
