#!/usr/bin/env bash
# Thirty-seventh session, call B (carry build-carry/stage-38.txz = N, the CI build of d0d3b23,
# and FA3's wheel):
# 1. Issue 19's stall breakdown: causal d = 128 BF16 at 8k and 4k, ours (SASS source
#    counters at 8k) and FA3's, ncu --clock-control none.
# 2. memcheck / racecheck on FP8 d = 256 cases (its kernel changed: eager rescaling).
# 3. As much of the GPU suite on N as the time leaves (4 shards).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rb; mkdir -p $R/ncu
save() { tar czf $OUT/b.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage-38.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > /dev/null 2>&1
scripts/package_per_library.sh $R N > $R/package.log 2>&1; echo "package rc=$?"
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for run in "warpflash 8192 src" "fa3 8192" "warpflash 4096" "fa3 4096"; do
  set -- $run
  extra=(); [ "${3:-}" = src ] && extra=(--section SourceCounters)
  (cd bench && PYTHONPATH=/tmp/pkg-N:/tmp/site timeout 60 ncu --clock-control none \
    --kernel-name regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis "${extra[@]}" \
    --metrics "$stalls",sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,sm__cycles_elapsed.avg \
    python3 fp8_profile.py $1 128 1 $2 bf16) > $R/ncu/$1-$2.log 2>&1
  echo "ncu $1 $2 rc=$? at ${SECONDS}s"; grep -E 'Duration|hmma_cycles' $R/ncu/$1-$2.log | head -3
  save
done
bin=build-stage/tests/gpu_tests_N
f='*/e4m3_d256_block_scales_odd_lengths:*/e4m3_d256_block_scales_gqa:*/e4m3_d256_window_causal:*/e4m3_d256_varlen_causal'
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 2 $R/$tool.log
done
save
left=$(( 560 - SECONDS ))
if [ $left -gt 60 ]; then
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $left $bin --gtest_brief=1 > $R/tests.shard$i 2>&1 &
  done
  wait
  cat $R/tests.shard* > $R/tests-N.log; rm $R/tests.shard*
  grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-N.log | head -30
  grep -c '^\[       OK\|OK \]' $R/tests-N.log
fi
save
