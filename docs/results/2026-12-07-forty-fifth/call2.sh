#!/usr/bin/env bash
# Call 2 (carry build-carry/s45a.txz, still on the machine of call 1): the package on the
# libraries LM, LA, LB (call1.sh) and bench/fp8.py at d = 64 and 128, two passes, rotating.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r2; mkdir -p $R
save() { tar czf $OUT/r2.tgz -C $R .; }
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
[ -d build-stage/libs ] || tar xJf build-carry/s45a.txz
scripts/package_per_library.sh $R LM LA LB > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
for pass in 1 2; do
  if [ $pass = 1 ]; then order="LM LA LB"; else order="LB LA LM"; fi
  for b in $order; do
    echo "== $b pass $pass" >> $R/fp8.log
    (PYTHONPATH=/tmp/pkg-$b timeout 90 python3 bench/fp8.py --head-dims 64,128 --iters 30 >> $R/fp8.log 2>&1)
  done
  echo "fp8 pass $pass at ${SECONDS}s"; save
done
