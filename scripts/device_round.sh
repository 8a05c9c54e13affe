#!/usr/bin/env bash
# One device call of a development round (kept in the repo so the runs are reproducible):
# GPU tests + benchmark + cuDNN/FA2 comparison (gpu_check.sh), the ablation builds given as
# arguments, the Python package's tests and the wrapper-overhead check. Everything is
# packed into $OUT/results.tgz (the device tool brings back only a few files).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
results=$(mktemp -d)
scripts/gpu_check.sh build "$results" > "$results/check.log" 2>&1
echo "gpu_check rc=$?"
grep -E "PASSED|FAILED|HGMMA" "$results/check.log" | head -20
[ $# -gt 0 ] && scripts/ablation.sh build "$@" > "$results/ablation.log" 2>&1
if python3 -c "import torch" 2>/dev/null; then
  WARPFLASH_PREBUILT_LIB=build/src/libwarpflash.a python3 -m pip install --no-build-isolation --no-deps -q . \
    > "$results/pip.log" 2>&1 || { echo "pip install failed"; tail -20 "$results/pip.log"; }
  (cd tests/python && timeout 400 python3 -m pytest -q . > "$results/pytest.log" 2>&1)
  echo "pytest rc=$?"; tail -n 12 "$results/pytest.log"
  timeout 120 python3 bench/overhead.py > "$results/overhead.log" 2>&1; echo "overhead rc=$?"; cat "$results/overhead.log"
fi
[ -f "$results/ablation.log" ] && cat "$results/ablation.log"
grep -E "geomean|^bf16 +128 +[01] +(8192|16384)" "$results/compare.log"
tar czf "${OUT:-.}/results.tgz" -C "$results" .
