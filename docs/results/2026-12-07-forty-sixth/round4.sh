#!/usr/bin/env bash
# round 4: 16-byte O stores after a quad transpose (b192s) against the per-pair stores (b192n)
set -u
cd "$(dirname "$0")/.."
GPU_TEST_SHARDS=8 scripts/gpu_tests.sh build-stage/b192s $OUT/tests-b192s.log > /dev/null; echo "tests b192s rc=$?"
grep -hE "^\[  (PASSED|FAILED)" $OUT/tests-b192s.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
A192="--dtypes bf16 --head-dims 192 --seqlens 512,1024,2048,4096 --causal both --iters 50"
for rep in 1 2 3; do for b in b192n b192s; do echo "== $b rep $rep"; build-stage/$b/bench/warpflash_bench $A192 | grep -E '^bf16'; done; done
