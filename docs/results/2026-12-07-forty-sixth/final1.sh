#!/usr/bin/env bash
# final call 1: every GPU test of the CI build of the landed commit, then d = 192 main (b192)
# against the final library (b192f), C++ benchmark, two passes alternating.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
GPU_TEST_SHARDS=12 TEST_TIMEOUT=240 scripts/gpu_tests.sh build-stage/ci $OUT/tests-full.log > /dev/null; echo "tests rc=$?"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $OUT/tests-full.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $OUT/tests-full.log | head
A192="--dtypes bf16 --head-dims 192 --seqlens 512,1024,2048,4096,8192 --causal both --iters 50"
for rep in 1 2; do for b in b192 b192f; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A192 | grep -E '^bf16'; done; done
