#!/usr/bin/env bash
# Call 1 of the fifty-first session (carry build-stage/pack6, ignored): head = main (50e97be),
# sc = main + the softcap's fixed reference max (branch softcap-fixed-max), x2 = sc + the
# narrowed host thresholds (x2-thresholds.patch). One bench pass first (softcap 30 at 8k:
# head vs sc; X2's points: head vs x2; window 4096 at 16k: head vs sc), then sc's forward GPU
# tests (the backward does not use the softmax that changed) until END (s; 430 for a
# session left with ~450 s of budget, 560 with a full call), memcheck on two cases (filter
# counted first), a second bench pass if time. Logs straight to $OUT.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
R=$OUT; END=${END:-430}
(cd build-stage && for p in head sc x2; do tar xJf pack6/$p.tar.xz; done)
B() {  # lib label bench-args...
  local lib=$1 label=$2; shift 2
  timeout 60 build-stage/$lib/bench/warpflash_bench --dtypes bf16 --iters 50 "$@" > $R/bench-$label-$lib.log 2>&1
  printf "%-14s %-4s " $label $lib; grep -E "^bf16" $R/bench-$label-$lib.log | awk '{printf "%s ", $NF}'
  grep -E "spot check|failed|non-finite" $R/bench-$label-$lib.log | head -2; echo
}
pass() {
  for lib in head sc; do B $lib softcap-$1 --head-dims 64,128 --seqlens 8192 --causal both --softcap 30; done
  for lib in head x2; do B $lib x-$1 --head-dims 64,128 --seqlens 2048,8192,16384 --causal 1; done
  for lib in head sc; do B $lib window-$1 --head-dims 128 --seqlens 16384 --causal 1 --window-left 4096; done
}
pass 1; echo "pass 1 done at ${SECONDS}s"
T=build-stage/sc/tests/warpflash_gpu_tests
pids=()
for i in $(seq 0 15); do
  GTEST_TOTAL_SHARDS=16 GTEST_SHARD_INDEX=$i timeout $((END - 60 - SECONDS)) $T --gtest_brief=1 \
    --gtest_filter='-Backward/*:Prepost/*' > $R/tests-sc.shard$i 2>&1 & pids+=($!)
done
rcs=""; for p in "${pids[@]}"; do wait $p; rcs="$rcs $?"; done
echo "tests at ${SECONDS}s, shard exits:$rcs"
cat $R/tests-sc.shard* > $R/tests-sc.log; rm $R/tests-sc.shard*
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $R/tests-sc.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $R/tests-sc.log | head -12; gzip -f $R/tests-sc.log
CASES='Features/ForwardFeaturesGpuTest.MatchesReference/bf16_d128_softcap44_low_scores:Shapes/ForwardGpuTest.MatchesReference/bf16_d128_causal_b3_q600_k700_h16_kv4'
if [ $((END - SECONDS)) -gt 50 ]; then
  echo "memcheck cases: $($T --gtest_list_tests --gtest_filter="$CASES" | grep -c '^  ') (want 2)"
  timeout $((END - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$CASES" > $R/san-memcheck.log 2>&1
  echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED" $R/san-memcheck.log | head -2
fi
[ $((END - SECONDS)) -gt 140 ] && pass 2
echo "end at ${SECONDS}s"
