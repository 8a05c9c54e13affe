#!/usr/bin/env bash
# call 1b (the device time left after failed starts): main's full build's GPU tests alone
# (every head dim, BF16, FP16, FP8, the new tile-order test), then memcheck on the tile-order
# test if time is left. Logs straight into $OUT, so a timeout still returns them.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack5/head.tar.xz)
GPU_TEST_SHARDS=16 TEST_TIMEOUT=${TEST_TIMEOUT:-280} scripts/gpu_tests.sh build-stage/head $OUT/tests-head.log > /dev/null; echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $OUT/tests-head.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-head.log | head
grep -E "ForwardTileOrderGpu" $OUT/tests-head.log | head -3
if [ $SECONDS -lt ${MEMCHECK_BEFORE:-250} ]; then
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build-stage/head/tests/warpflash_gpu_tests --gtest_brief=1 \
    --gtest_filter='ForwardTileOrderGpu.*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? at ${SECONDS}s"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3
fi
gzip -f $OUT/tests-head.log
