#!/usr/bin/env bash
# Thirtieth session, call 1: verify the landed build (36ebaba/74f6051) whole; seed at the margin;
# sanitizers on fp16 pre/post and sink cases; per-kernel durations (pre / main / post) of the backward.
set -uo pipefail
S=build-stage; B=$S/build-base64; F=$S/build-full; N=$S/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.log
T='Backward/BackwardGpuTest.MatchesReference/bf16_d64_deterministic_gqa_causal'
for b in $B $F; do for seed in 1839544887 fresh fresh; do
  if [ $seed = fresh ]; then unset WARPFLASH_TEST_SEED; else export WARPFLASH_TEST_SEED=$seed; fi
  echo "$b seed $seed: $($b/tests/warpflash_gpu_tests --gtest_brief=1 --gtest_filter=$T 2>&1 | grep -E 'max abs|error|PASSED|FAILED|seed' | sed -E 's/, where.*//' | tr '\n' ' ')"
done; done 2>&1 | tee $OUT/seed.log
unset WARPFLASH_TEST_SEED
GTEST_FILTER="*Prepost*:Backward*" GPU_TEST_SHARDS=14 TEST_TIMEOUT=150 scripts/gpu_tests.sh $F $OUT/tests-final.log; echo "final tests (full build) rc=$?"
grep -E "^\[  FAILED" $OUT/tests-final.log | sed -E 's/, where.*//' | head -12
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $F/tests/warpflash_gpu_tests --gtest_brief=1 \
    --gtest_filter='*Prepost*fp16*:Backward/*fp16_d256_sinks_gqa:Backward/*bf16_d192_deterministic_sinks_gqa:Backward/*fp16_d64_deterministic_sinks_gqa' > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; tail -n 2 $OUT/$tool.log
done
# Per-kernel durations of one backward call (pre, main, post), ours, d = 64 and 128, 1k and 16k.
for p in "64 1024 0" "64 1024 1" "64 16384 0" "128 1024 0" "128 1024 1" "128 16384 0"; do set -- $p
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_shared_mem \
    --launch-skip 12 --launch-count 3 $N/bench/warpflash_bench --backward --dtypes bf16 --head-dims $1 --seqlens $2 --causal $3 --iters 2 --warmup 1 > $OUT/ncu-$1-$2-$3.log 2>&1
  echo "== d$1 s$2 causal$3"; grep -E "^  [a-z_]+.*\(|gpu__time_duration|launch__grid_size" $OUT/ncu-$1-$2-$3.log | sed -E 's/ +/ /g' | head -12
done
bench() { timeout 60 $1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 "${@:2}" | grep -E '^bf16'; }
for r in 1 2; do for b in $B $N; do echo "== $b"; bench $b --head-dims 64 --seqlens 1024,2048,8192,16384; done; done 2>&1 | tee $OUT/timing.log
bench $N --head-dims 128 --seqlens 1024,2048,8192,16384 | tee -a $OUT/timing.log
