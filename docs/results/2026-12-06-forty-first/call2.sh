#!/usr/bin/env bash
# Call 2 (carry build-carry/s41a.txz): the backward's linear mask (B = A, the CI library of
# 612ad2e, with the twelve backward objects of the change; C = B with dO released after dV,
# BF16 d = 64 and 128 only): the backward C++ benchmark A / B / C in turn (three passes, BF16
# d = 64 / 128, causal and not, 1k-16k), then the backward GPU tests (every dtype and head
# dim, the new mask cases) and memcheck / racecheck on a subset, on B2 = B with the dO release
# in every narrow-form kernel (d = 64, 96, 128; BF16 and FP16).
set -uo pipefail
R=/tmp/r2; mkdir -p $R
save() { tar czf $OUT/r2.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s41a.txz
S=build-stage
bench() { timeout 90 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for pass in 1 2 3; do
  case $pass in 1) order="A B C";; 2) order="C B A";; 3) order="B C A";; esac
  for b in $order; do echo "== $b pass $pass"; bench $b; done
done > $R/timing.log 2>&1
echo "timing done at ${SECONDS}s"; save
GTEST_FILTER='Prepost/*:Backward*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=200 scripts/gpu_tests.sh $S/B2 $R/tests-B2.log; echo "B2 backward tests rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED" $R/tests-B2.log | sed -E 's/, where.*//' | head -12; save
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $S/B2/tests/warpflash_gpu_tests --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d64_causal_window:Backward/*bf16_d128_chunk_causal:Backward/*fp16_d64_window_left_only:Backward/*bf16_d128_causal_more_queries:Backward/*fp16_d96_window_right_only' > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 2 $R/$tool.log
done
save
