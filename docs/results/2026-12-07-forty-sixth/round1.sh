#!/usr/bin/env bash
# round 1: P through shared memory at d=64 192x192 (wide) vs base 192x128
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
GPU_TEST_SHARDS=8 scripts/gpu_tests.sh build-stage/wide $OUT/tests-wide.log; echo "tests rc=$?"
grep -E "FAILED" $OUT/tests-wide.log | head -20
F='Shapes/ForwardGpuTest.MatchesReference/bf16_d64_full_b1_q1000_k1000_h2_kv1:Shapes/ForwardGpuTest.MatchesReference/bf16_d64_full_b2_q129_k257_h16_kv2_strided:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d64_varlen_full_unequal'
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool build-stage/wide/tests/warpflash_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $OUT/$tool.log 2>&1; echo "$tool rc=$?"; tail -3 $OUT/$tool.log
done
A="--dtypes bf16 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 --causal both --iters 50"
for rep in 1 2; do for b in base wide; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A | grep -E '^bf16'; done; done
