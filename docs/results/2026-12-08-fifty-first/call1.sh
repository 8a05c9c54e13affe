#!/usr/bin/env bash
# Call 1 of the fifty-first session (one call, for a device that rarely starts; carry
# build-stage/pack6, ignored): head = main (50e97be), sc = main + the softcap's fixed
# reference max (softmax.h fix_max), x2 = sc + the narrowed host thresholds
# (x2-thresholds.patch: d = 64 causal from 1k on 192 x 128; d = 128 square causal on 128 x 128).
# 1. sc's full GPU tests (16 shards): main's kernels after the last-section merge, and SC.
# 2. C++ bench, alternated (memcheck on two cases, filter counted first, after pass 1): softcap 30 at 8k (head, sc), X's points (head, x2), window
#    4096 at 16k (head, sc: the general loop without softcap). Logs straight to $OUT.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
R=$OUT
(cd build-stage && for p in head sc x2; do tar xJf pack6/$p.tar.xz; done)
GPU_TEST_SHARDS=16 TEST_TIMEOUT=${TEST_TIMEOUT:-290} scripts/gpu_tests.sh build-stage/sc $R/tests-sc.log > /dev/null
echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $R/tests-sc.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $R/tests-sc.log | head -12
gzip -f $R/tests-sc.log
memcheck() {
  T=build-stage/sc/tests/warpflash_gpu_tests
  CASES='Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d128_softcap44_low_scores:Shapes/ForwardGpuTest.MatchesReference/bf16_d128_causal_b3_q600_k700_h16_kv4'
  echo "memcheck cases: $($T --gtest_list_tests --gtest_filter="$CASES" | grep -c '^  ') (want 2)"
  timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$CASES" > $R/san-memcheck.log 2>&1
  echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED" $R/san-memcheck.log | head -2
}
B() {  # lib label bench-args...
  local lib=$1 label=$2; shift 2
  timeout 60 build-stage/$lib/bench/warpflash_bench --dtypes bf16 --iters 50 "$@" > $R/bench-$label-$lib.log 2>&1
  printf "%-14s %-4s " $label $lib; grep -E "^bf16" $R/bench-$label-$lib.log | awk '{printf "%s ", $NF}'
  grep -E "spot check|failed|non-finite" $R/bench-$label-$lib.log | head -2; echo
}
for pass in 1 2 3; do
  [ $pass = 2 ] && memcheck
  [ $SECONDS -gt ${BENCH_BEFORE:-520} ] && { echo "pass $pass skipped (time)"; continue; }
  for lib in head sc; do B $lib softcap-$pass --head-dims 64,128 --seqlens 8192 --causal both --softcap 30; done
  for lib in head x2; do B $lib x-$pass --head-dims 64,128 --seqlens 2048,8192,16384 --causal 1; done
  for lib in head sc; do B $lib window-$pass --head-dims 128 --seqlens 16384 --causal 1 --window-left 4096; done
done
