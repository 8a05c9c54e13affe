#!/usr/bin/env bash
# round 2: the epilogue's register store, one address per row (b192n) against main (b192)
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
GPU_TEST_SHARDS=8 scripts/gpu_tests.sh build-stage/b192n $OUT/tests-b192n.log; echo "tests rc=$?"
grep -E "FAILED" $OUT/tests-b192n.log | head -20
F='Shapes/ForwardGpuTest.MatchesReference/bf16_d192_full_b2_q113_k203_h4_kv1:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d192_varlen_full_unequal:Shapes/ForwardGpuTest.MatchesReference/bf16_d192_causal_b1_q203_k113_h8_kv2'
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool build-stage/b192n/tests/warpflash_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/$tool.log 2>&1; echo "$tool rc=$?"; tail -3 $OUT/$tool.log
done
A="--dtypes bf16 --head-dims 192 --seqlens 512,1024,2048,4096,8192,16384 --causal both --iters 50"
for rep in 1 2 3; do for b in b192 b192n; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A | grep -E '^bf16'; done; done
