#!/usr/bin/env bash
# Call A: E1 (K with the first Q, V with the first dO), E2 (PDL pre -> main -> post), E3 (dK/dV
# by TMA store): GPU tests and sanitizers of exp3 (E1+E2+E3), timing base / exp (E1+E2) / exp3.
set -uo pipefail
S=build-stage; X=$S/full/tests/warpflash_gpu_tests

nvidia-smi --query-gpu=name --format=csv,noheader
GTEST_FILTER='Prepost/*:Backward*:*split*:*Split*:*decode*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=150 scripts/gpu_tests.sh $S/full $OUT/tests-full.log; echo "full (bf16+fp16, every head dim) tests rc=$?"
grep -E "^\[  FAILED" $OUT/tests-full.log | sed -E 's/, where.*//' | head -12
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $X --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d128_causal_more_queries:Backward/*fp16_d64_gqa_causal:Backward/BackwardVarlenGpu.*:Backward/*fp16_d256_deterministic_sinks_gqa:Backward/*bf16_d192_v128_causal*:Backward/*fp16_d96_sinks_gqa' > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; tail -n 2 $OUT/$tool.log
done
bench() { timeout 60 $1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 "${@:2}" | grep -E '^bf16'; }
for r in 1 2; do for b in base exp exp3; do echo "== $b"; bench $S/$b --head-dims 64,128 --seqlens 1024,2048,8192,16384; done; done 2>&1 | tee $OUT/timing.log

