#!/usr/bin/env bash
# call 1 of the fiftieth session: everything owed in one call, for a session whose device
# starts mostly fail. 1. Main's full build's GPU tests (every head dim, BF16, FP16, FP8;
# the forty-ninth's ForwardTileOrderGpu: merged last sections against the static order,
# bitwise). 2. memcheck on four causal reference cases (GQA, MQA, d = 192 / 128, 1200 x 8250) (the tile-order test's ~150
# launches of 2k-key problems would outlast the call under memcheck; the CPU test walks
# every tile index of its plans).
# 3. Time left: X against main (forty-ninth's x-thresholds.patch), FA3 in every run,
# alternating. Logs go straight to $OUT, so a timeout still returns them.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
R=$OUT
(cd build-stage && tar xJf pack5/head.tar.xz && tar xJf pack5/libs.tar.xz)
(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
 scripts/package_per_library.sh $R head x > $R/package.log 2>&1; echo "package rc=$?" >> $R/package.log) &
GPU_TEST_SHARDS=16 TEST_TIMEOUT=${TEST_TIMEOUT:-280} scripts/gpu_tests.sh build-stage/head $R/tests-head.log > /dev/null; echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $R/tests-head.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $R/tests-head.log | head
grep -E "ForwardTileOrderGpu" $R/tests-head.log | head -3
gzip -f $R/tests-head.log
T=build-stage/head/tests/warpflash_gpu_tests
CASES='Shapes/ForwardGpuTest.MatchesReference/bf16_d128_causal_b2_q113_k203_h4_kv1:Shapes/ForwardGpuTest.MatchesReference/bf16_d128_causal_b3_q600_k700_h16_kv4:Shapes/ForwardGpuTest.MatchesReference/fp16_d192_v128_causal_b3_q600_k700_h16_kv4:Shapes/ForwardGpuTest.MatchesReference/bf16_d64_causal_b2_q1200_k8250_h8_kv2'
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$CASES" > $R/san-memcheck.log 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san-memcheck.log | head -3
wait; tail -1 $R/package.log
cd bench
for lib in head x head x; do
  [ $SECONDS -gt ${AB_BEFORE:-470} ] && { echo "a/b $lib skipped (time)"; continue; }
  n=$(ls $R/ab-$lib-*.log 2>/dev/null | wc -l)
  PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 100 python3 benchmark.py --impls warpflash,fa3 --workloads paper,llama --dtypes bf16 \
    --head-dims 64,128 --seqlens 2048,8192,16384 --causal 1 --repeats 1 > $R/ab-$lib-$n.log 2>&1
  echo "$lib pass $n rc=$? at ${SECONDS}s"
done
grep -hE "^(warpflash|FA3) " $R/ab-head-0.log | head -4
