#!/usr/bin/env bash
# call 1: verification of main's kernels (HEAD: the forty-eighth's causal last-section merge,
# a6ee856, and c93da9e's host change). 1. The full build's GPU tests (every head dim, BF16,
# FP16, FP8), with the new tile-order test (dynamic order with merged sections against the
# static order, bitwise). 2. memcheck on the tile-order test and causal GQA reference
# cases, racecheck on the latter. The Python packages of main's library and of X (main's kernels, two
# host thresholds: d = 64 causal 2k on the 192-row kernel, d = 128 causal on 128 x 128
# tiles at every length) are built meanwhile for call 2.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
R=/tmp/peers; mkdir -p $R
(cd build-stage && tar xJf pack5/head.tar.xz && tar xJf pack5/libs.tar.xz)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
(scripts/package_per_library.sh $R head x > $R/package.log 2>&1; echo "package rc=$?" >> $R/package.log) &
GPU_TEST_SHARDS=15 TEST_TIMEOUT=320 scripts/gpu_tests.sh build-stage/head $R/tests-head.log > /dev/null; echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $R/tests-head.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $R/tests-head.log | head
grep -E "ForwardTileOrderGpu" $R/tests-head.log | head -3
T=build-stage/head/tests/warpflash_gpu_tests
CASES='Shapes/ForwardGpuTest.MatchesReference/bf16_d128_gqa_causal*:Shapes/ForwardGpuTest.MatchesReference/fp16_d192_v128_gqa8_causal*'
for tool in memcheck racecheck; do
  filter=$CASES; [ $tool = memcheck ] && filter="ForwardTileOrderGpu.*:$CASES"
  [ $tool = racecheck ] && [ $SECONDS -gt ${RACECHECK_BEFORE:-330} ] && { echo "racecheck skipped (time)"; continue; }
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$filter" \
    > $R/san-$tool.log 2>&1; echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/san-$tool.log | head -4
done
wait; cat $R/package.log | tail -2
# Time left: one pass of X against main at the points it changes (call 2 repeats them).
if [ $SECONDS -lt ${QUICK_BEFORE:-380} ]; then
  for lib in head x; do
    (cd bench && PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 70 python3 benchmark.py --impls warpflash,fa3 --workloads paper \
      --dtypes bf16 --head-dims 64,128 --seqlens 2048,8192 --causal 1 --repeats 2 > $R/quick-$lib.log 2>&1)
    echo "quick $lib at ${SECONDS}s"
  done
  grep -hE "^paper" $R/quick-*.log
fi
cd $R && gzip -f tests-head.log && tar czf $OUT/call1-logs.tgz *.log *.gz
