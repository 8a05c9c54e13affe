#!/usr/bin/env bash
# The benchmark command (Hopper GPU): set-up, build, the C++ benchmark of the kernels, then,
# when PyTorch is installed, the Python package on that build and bench/benchmark.py:
# warpflash, PyTorch SDPA's cuDNN and FA2 backends and FlexAttention timed side by side in
# one run (the numbers in docs/benchmarks.md). Results go to bench-results/ (CSVs, log,
# plots); extra arguments go to both benchmarks, e.g.
#   ./scripts/bench.sh --head-dims 128 --seqlens 8192
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=ON
results=${RESULTS:-bench-results}
mkdir -p "$results"
build/bench/warpflash_bench --csv "$results/warpflash.csv" "$@"
if python3 -c "import torch" 2>/dev/null; then
  echo "bench: installing the Python package on build/src/libwarpflash.a"
  WARPFLASH_PREBUILT_LIB=build/src/libwarpflash.a python3 -m pip install --no-build-isolation --no-deps \
    --quiet --disable-pip-version-check . > "$results/pip-install.log" 2>&1 ||
    { cat "$results/pip-install.log" >&2; exit 1; }
  python3 bench/benchmark.py --csv "$results/benchmark.csv" --plot-dir "$results" \
    --title "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F)" "$@" |
    tee "$results/benchmark.log"
else
  echo "PyTorch not found: skipping the comparison with cuDNN, FA2 and FlexAttention"
fi
