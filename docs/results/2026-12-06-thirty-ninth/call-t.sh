#!/usr/bin/env bash
# Call T of the thirty-ninth session (carry build-carry/tests39.txz: gpu_tests_N, the GPU
# tests of N = main with `../2026-12-06-thirty-eighth/split-softmax-around-pv-wait.patch`,
# linked by its CI run `.ci/run` on a clean clone): the whole GPU suite (8 shards), then
# memcheck and racecheck on forward cases of d = 128, 192 and 256 of the changed kernels.
set -uo pipefail
R=/tmp/rt; mkdir -p $R
save() { tar czf $OUT/t.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/tests39.txz
bin=build-stage/tests/gpu_tests_N
left=$(( 430 - SECONDS ))
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout $left $bin --gtest_brief=1 > $R/tests.shard$i 2>&1 &
done
wait
cat $R/tests.shard* > $R/tests-N.log; rm $R/tests.shard*
echo "suite at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-N.log | sort | uniq -c | head -30
save
f='Shapes/ForwardGpuTest.*/bf16_d128_causal_b2_q113_k203_h4_kv1:Features/ForwardFeaturesGpuTest.*/fp16_d256_window_both_sides:Features/ForwardFeaturesGpuTest.*/bf16_d192*varlen_causal_gqa'
for tool in memcheck racecheck; do
  left=$(( 570 - SECONDS )); [ $left -lt 15 ] && { echo "no time for $tool"; continue; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 3 $R/$tool.log
done
save
