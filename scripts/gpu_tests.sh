#!/usr/bin/env bash
# Runs the GPU tests of a build as parallel shards: the CPU reference of the long shapes
# takes most of the time and leaves most cores idle in one process (4 shards: ~2 min on the
# 16-core H200 machine, over 200 s in one).
#   scripts/gpu_tests.sh BUILD LOG    (TEST_TIMEOUT per shard, default 300; GPU_TEST_SHARDS, default 4)
# Writes the shards' output to LOG, prints their summaries; non-zero if any shard failed.
set -uo pipefail
build=${1:?usage: scripts/gpu_tests.sh BUILD LOG}
log=${2:?usage: scripts/gpu_tests.sh BUILD LOG}
shards=${GPU_TEST_SHARDS:-4}
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-300}" \
    "$build/tests/warpflash_gpu_tests" --gtest_brief=1 > "$log.shard$i" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "GPU test shard $i of $shards failed (exit $rc; 124: timed out)"
    status=1
  fi
done
for ((i = 0; i < shards; ++i)); do cat "$log.shard$i"; rm -f "$log.shard$i"; done > "$log"
grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$log"
exit $status
