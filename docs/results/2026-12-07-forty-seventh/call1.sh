#!/usr/bin/env bash
# call 1: every GPU test of a full build of main (7033e4e's kernels); the d = 192 build of
# branch d192v128-rows (d = 192 / 128 in 16-byte rows); memcheck and racecheck on d = 192
# and d = 192 / 128 cases. The binaries travel in build-stage/pack/bins.tar.xz.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack/bins.tar.xz)
t0=$(date +%s)
GPU_TEST_SHARDS=14 TEST_TIMEOUT=300 scripts/gpu_tests.sh build-stage/ci $OUT/tests-full.log > /dev/null; echo "tests full rc=$? in $(( $(date +%s) - t0 )) s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $OUT/tests-full.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-full.log | head
t0=$(date +%s)
GPU_TEST_SHARDS=14 TEST_TIMEOUT=150 scripts/gpu_tests.sh build-stage/rows $OUT/tests-rows.log > /dev/null; echo "tests rows rc=$? in $(( $(date +%s) - t0 )) s"
grep -hE "^\[  (PASSED|FAILED)" $OUT/tests-rows.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-rows.log | head
S='Shapes/ForwardGpuTest.MatchesReference/bf16_d192_full_b2_q113_k203_h4_kv1:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d192_varlen_full_unequal:Shapes/ForwardGpuTest.MatchesReference/bf16_d192_causal_b1_q203_k113_h8_kv2'
V='Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d192_v128_varlen_full_unequal:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d192_v128_seqused_dense:Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d192_v128_window_causal'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool build-stage/rows/tests/warpflash_gpu_tests --gtest_filter="$S:$V" --gtest_brief=1 > $OUT/$tool.log 2>&1; echo "$tool rc=$?"; tail -n 2 $OUT/$tool.log
done
