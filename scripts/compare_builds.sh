#!/usr/bin/env bash
# Times several builds of the kernels one after the other on the same GPU: the ablation
# (paper's Table 2, builds with -DWARPFLASH_ABLATE=...) and tile experiments (builds with
# -DWARPFLASH_TILES=...). Each build must contain the benchmark.
#   scripts/compare_builds.sh build build-ablate-pingpong build-tiles-d128-128x176 ...
# BENCH_ARGS picks the points (default: d=128 bf16, seqlen 8k and 16k, causal and not).
set -uo pipefail
cd "$(dirname "$0")/.."
BENCH_ARGS=${BENCH_ARGS:---dtypes bf16 --head-dims 128 --seqlens 8192,16384 --causal both}
for dir in "$@"; do
  ablate=$(grep -s '^WARPFLASH_ABLATE:' "$dir/CMakeCache.txt" | cut -d= -f2)
  tiles=$(grep -s '^WARPFLASH_TILES:' "$dir/CMakeCache.txt" | cut -d= -f2)
  echo "== $dir (compiled out: ${ablate:-nothing}; tiles: ${tiles:-default})"
  timeout 120 "$dir/bench/warpflash_bench" $BENCH_ARGS --iters 50 | grep -E '^(bf16|fp16)'
done
