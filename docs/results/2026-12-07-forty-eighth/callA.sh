#!/usr/bin/env bash
# call A: the full build's GPU tests on main's kernels (686abd3's binaries; 108dbcb after it
# changes no kernel's SASS), then d = 256 non-causal / causal 2k-16k, the library before the
# row stores (main/) and main's (full/) alternating, four passes.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack/full-686abd3.tar.xz && tar xJf pack/r256.tar.xz main)
t0=$(date +%s)
GPU_TEST_SHARDS=14 TEST_TIMEOUT=300 scripts/gpu_tests.sh build-stage/full $OUT/tests-full.log > /dev/null; echo "tests full rc=$? in $(( $(date +%s) - t0 )) s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $OUT/tests-full.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-full.log | head
gzip $OUT/tests-full.log
A="--dtypes bf16 --head-dims 256 --seqlens 2048,4096,8192,16384 --causal both --iters 50"
for rep in 1 2 3 4; do
  for b in main full; do
    [ $rep = 2 -o $rep = 4 ] && b=$([ $b = main ] && echo full || echo main)
    echo "== $b rep $rep" >> $OUT/timing.log
    build-stage/$b/bench/warpflash_bench $A >> $OUT/timing.log 2>&1
  done
done
echo "timing done"; grep -c "^bf16" $OUT/timing.log
