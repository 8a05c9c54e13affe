#!/usr/bin/env bash
# Call 5 (carry build-carry/s43c.txz): F = main after 4ea3198 (two dS tiles at d = 64; all
# twelve backward objects rebuilt), its library, GPU tests and benchmark; Y = F with d = 64
# BF16's statistics loaded before the S^T wait and shuffled to their columns (FA4's form),
# its GPU tests and benchmark; D = main before (the forty-second's), its benchmark.
# Backward GPU tests of F and Y, memcheck / racecheck on F, the C++ backward benchmark
# D / F / Y in rotating order, the package on F and bench/backward.py against cuDNN.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r5; mkdir -p $R
save() { tar czf $OUT/r5.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s43c.txz
S=build-stage
for b in F Y; do
  GTEST_FILTER='Prepost/*:Backward*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=200 scripts/gpu_tests.sh $S/$b $R/tests-$b.log; echo "$b backward tests rc=$? at ${SECONDS}s"
  grep -E "^\[  FAILED" $R/tests-$b.log | sed -E 's/, where.*//' | head -12; save
done
bench() { timeout 90 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
timing() {  # timing PASS ORDER...
  local pass=$1; shift
  for b in "$@"; do echo "== $b pass $pass"; bench $b; done >> $R/timing.log 2>&1
  echo "timing pass $pass done at ${SECONDS}s"; save
}
timing 1 D F Y
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $S/F/tests/warpflash_gpu_tests --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d64_causal_window:Backward/*fp16_d64_gqa_causal:Backward/*bf16_d64_deterministic_gqa_causal:Backward/*bf16_d128_chunk_causal:Backward/*fp16_d96_window_right_only' > $R/F-$tool.log 2>&1
  echo "F $tool rc=$? at ${SECONDS}s"; tail -n 2 $R/F-$tool.log; save
done
timing 2 Y F D
timing 3 F D Y
scripts/package_per_library.sh $R F > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
(PYTHONPATH=/tmp/pkg-F timeout 150 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --repeats 2 > $R/backward-py-cudnn.log 2>&1); echo "backward.py rc=$? at ${SECONDS}s"
cat $R/backward-py-cudnn.log; save
echo "done at ${SECONDS}s"
