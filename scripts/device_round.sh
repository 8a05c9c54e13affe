#!/usr/bin/env bash
# One device call of a development round (kept in the repo so runs are reproducible):
#   GPU tests, SASS check and a C++ benchmark point with its cuDNN/FA2 comparison
#   (gpu_check.sh); the ablation builds given as arguments; the Python package built and
#   tested; the wrapper-overhead check; and the side-by-side Python benchmark over the
#   paper grid and Llama shapes, with plots. Everything is packed into $OUT/results.tgz
#   (the device tool brings back only a few files).
set -uo pipefail  # each step has a time limit: a hang costs minutes, not the whole call
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
results=$(mktemp -d)
TEST_TIMEOUT=150 BENCH_TIMEOUT=90 BENCH_ARGS="--dtypes bf16 --head-dims 128 --seqlens 8192" scripts/gpu_check.sh build "$results" > "$results/check.log" 2>&1
echo "gpu_check rc=$?"
grep -E "PASSED|FAILED|HGMMA" "$results/check.log" | head -20
[ $# -gt 0 ] && scripts/ablation.sh build "$@" > "$results/ablation.log" 2>&1
if python3 -c "import torch" 2>/dev/null; then
  WARPFLASH_PREBUILT_LIB=build/src/libwarpflash.a python3 -m pip install --no-build-isolation --no-deps -q . \
    > "$results/pip.log" 2>&1 || { echo "pip install failed"; tail -20 "$results/pip.log"; }
  (cd tests/python && timeout 400 python3 -m pytest -q . > "$results/pytest.log" 2>&1)
  echo "pytest rc=$?"; tail -n 6 "$results/pytest.log"
  timeout 120 python3 bench/overhead.py > "$results/overhead.log" 2>&1; echo "overhead rc=$?"; tail -n 5 "$results/overhead.log"
  timeout 420 python3 bench/benchmark.py --csv "$results/benchmark.csv" --plot-dir "$results" \
    --title "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F)" > "$results/benchmark.log" 2>&1
  echo "benchmark rc=$?"; grep -E "geomean|^llama" "$results/benchmark.log"
fi
[ -f "$results/ablation.log" ] && cat "$results/ablation.log"
tar czf "${OUT:-.}/results.tgz" -C "$results" .
