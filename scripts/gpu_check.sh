#!/usr/bin/env bash
# Every GPU test and the benchmark, in one call, on a Hopper machine:
#   scripts/gpu_check.sh [build-dir] [results-dir]
# The build (./scripts/build.sh) may come from another machine: the binaries link the CUDA
# runtime statically. Results and logs land in results-dir (default $OUT or gpu-results).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RESULTS=${2:-${OUT:-gpu-results}}
mkdir -p "$RESULTS"
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$RESULTS/gpu.txt"

echo "== SASS: tensor-core instructions and local memory in the forward kernels"
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass "$BUILD/bench/warpflash_bench" > "$RESULTS/sass.txt" 2>&1
  echo "HGMMA: $(grep -c HGMMA "$RESULTS/sass.txt")  local loads/stores (LDL/STL): $(grep -cE '\b(LDL|STL)\b' "$RESULTS/sass.txt")"
  # The softmax between the waits for S and for O += P V (intra-warpgroup overlap).
  python3 scripts/check_softmax_overlap.py "$RESULTS/sass.txt" > "$RESULTS/softmax_overlap.txt" || status=1
  grep -E "^FAIL" "$RESULTS/softmax_overlap.txt"
fi

echo "== GPU tests"
scripts/gpu_tests.sh "$BUILD" "$RESULTS/gpu_tests.log" || status=1

echo "== Benchmark: warpflash, then PyTorch SDPA (cuDNN, FA2) in the same run"
timeout ${BENCH_TIMEOUT:-300} "$BUILD/bench/warpflash_bench" --csv "$RESULTS/warpflash.csv" ${BENCH_ARGS:-} > "$RESULTS/bench.log" 2>&1 || status=1
tail -n 5 "$RESULTS/bench.log"
if python3 -c "import torch" 2>/dev/null; then
  python3 bench/sdpa_baseline.py --csv "$RESULTS/sdpa.csv" --warpflash-csv "$RESULTS/warpflash.csv" ${BENCH_ARGS:-} \
    2>&1 | tee "$RESULTS/compare.log" | tail -n 90
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
exit $status
