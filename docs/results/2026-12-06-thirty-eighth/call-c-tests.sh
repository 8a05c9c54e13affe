#!/usr/bin/env bash
# (carry build-carry/stage38t.txz: gpu_tests_N) Call C, cut to what the device time left allows (failed machine starts took the rest):
# the forward GPU tests of the head dims whose kernels changed (BF16 / FP16 d = 128, 192,
# (192, 128), 256; decode and KV-cache attention included) on 0ad5afc's CI build N, 8
# shards, then memcheck and racecheck on one case each if time is left.
set -uo pipefail
R=/tmp/rc; mkdir -p $R
save() { tar czf $OUT/c.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage38t.txz
bin=build-stage/tests/gpu_tests_N
changed='Shapes/ForwardGpuTest.*d128*:Shapes/ForwardGpuTest.*d192*:Shapes/ForwardGpuTest.*d256*:Features/ForwardFeaturesGpuTest.*d128*:Features/ForwardFeaturesGpuTest.*d192*:Features/ForwardFeaturesGpuTest.*d256*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout ${TEST_LIMIT:-120} $bin --gtest_brief=1 --gtest_filter="$changed" > $R/tests.shard$i 2>&1 &
done
wait
cat $R/tests.shard* > $R/tests-N.log; rm $R/tests.shard*
echo "tests at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|Timeout|timed out' $R/tests-N.log | sort | uniq -c | head -30
save
f='Shapes/ForwardGpuTest.*/bf16_d128_causal_b2_q113_k203_h4_kv1:Shapes/ForwardGpuTest.*/fp16_d256_full_b2_q17_k17_h4_kv4'
for tool in memcheck racecheck; do
  left=$(( ${SAN_END:-170} - SECONDS )); [ $left -lt 15 ] && { echo "no time for $tool"; continue; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 3 $R/$tool.log
done
save
