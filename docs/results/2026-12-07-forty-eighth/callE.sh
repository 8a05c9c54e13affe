#!/usr/bin/env bash
# call E: the landed causal sections (a6ee856, the full build: new/): 1. d = 96 causal
# 4k-16k (the other head dim whose plan changes), main's kernels (full/, 686abd3) and new/,
# one pass each (the device time left). 2. The full build's causal and window GPU tests
# (the problems whose tiles the scheduler orders by sections), 16 shards.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack/full-686abd3.tar.xz full/bench && tar xJf pack4/new-a6ee856.tar.xz)
for b in full new full new; do
  echo "== $b" >> $OUT/timing.log
  build-stage/$b/bench/warpflash_bench --dtypes bf16 --head-dims 96 --seqlens 4096,8192,16384 --causal 1 --iters 30 --warmup 5 >> $OUT/timing.log 2>&1
done
echo "timing done at ${SECONDS}s"
GTEST_FILTER='*causal*:*Causal*:*window*:*Window*' GPU_TEST_SHARDS=16 TEST_TIMEOUT=$((200 - SECONDS)) scripts/gpu_tests.sh build-stage/new $OUT/tests-new.log > /dev/null; echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $OUT/tests-new.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-new.log | head
gzip $OUT/tests-new.log
