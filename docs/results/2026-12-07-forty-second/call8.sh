#!/usr/bin/env bash
# Call 8 (carry build-carry/s42a.txz): the backward's dQ in fragment order with a bulk
# reduce-add (D = M, main's library, with the twelve backward objects and the pre/postprocess
# of the change): the backward GPU tests on D, a first timing pass, memcheck / racecheck on a
# subset, a second timing pass (the backward C++ benchmark, M / D in turn, BF16 d = 64 / 128,
# causal and not, 1k-16k; CUDA events, pre- and postprocess included). Each step's results
# are saved as it ends (the session's device time may end the call).
set -uo pipefail
R=/tmp/r8; mkdir -p $R
save() { tar czf $OUT/r8.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s42a.txz
S=build-stage
GTEST_FILTER='Prepost/*:Backward*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=200 scripts/gpu_tests.sh $S/D $R/tests-D.log; echo "D backward tests rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED" $R/tests-D.log | sed -E 's/, where.*//' | head -12; save
bench() { timeout 90 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
timing() {  # timing PASS ORDER...
  local pass=$1; shift
  for b in "$@"; do echo "== $b pass $pass"; bench $b; done >> $R/timing.log 2>&1
  echo "timing pass $pass done at ${SECONDS}s"; save
}
timing 1 M D
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $S/D/tests/warpflash_gpu_tests --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d64_causal_window:Backward/*bf16_d128_chunk_causal:Backward/*fp16_d96_window_right_only:Prepost/*bf16_d128*' > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 2 $R/$tool.log; save
done
timing 2 D M
