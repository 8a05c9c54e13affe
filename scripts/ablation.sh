#!/usr/bin/env bash
# The FlashAttention-3 ablation (paper's Table 2) at d=128 bf16, seqlen 8k and 16k: the full
# kernel and builds with techniques compiled out (-DWARPFLASH_ABLATE=...), one after the
# other on the same GPU.
#   scripts/ablation.sh build build-ablate-pingpong build-ablate-intra_warpgroup_overlap ...
set -uo pipefail
cd "$(dirname "$0")/.."
for dir in "$@"; do
  ablate=$(grep -s '^WARPFLASH_ABLATE:' "$dir/CMakeCache.txt" | cut -d= -f2)
  echo "== $dir (compiled out: ${ablate:-nothing})"
  "$dir/bench/warpflash_bench" --dtypes bf16 --head-dims 128 --seqlens 8192,16384 --causal both --iters 50 \
    | grep -E '^bf16'
done
