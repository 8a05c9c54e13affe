#!/usr/bin/env bash
# The benchmark command (Hopper GPU): set-up, build, then warpflash and, when PyTorch is
# installed, PyTorch SDPA's cuDNN and FA2 backends in the same run. Results go to
# bench-results/ (CSV and logs); extra arguments go to both benchmarks, e.g.
#   ./scripts/bench.sh --head-dims 128 --seqlens 8192
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=ON
results=${RESULTS:-bench-results}
mkdir -p "$results"
build/bench/warpflash_bench --csv "$results/warpflash.csv" "$@"
if python3 -c "import torch" 2>/dev/null; then
  python3 bench/sdpa_baseline.py --csv "$results/sdpa.csv" --warpflash-csv "$results/warpflash.csv" "$@"
else
  echo "PyTorch not found: skipping the cuDNN / FA2 comparison"
fi
