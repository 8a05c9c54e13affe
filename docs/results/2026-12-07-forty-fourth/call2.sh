#!/usr/bin/env bash
# Call 2 (carry build-carry/s44b.txz: the libraries M, L1, L2; L1 / L2 also with e4m3 d = 128
# computing one exponential in 4 / 3 on the FMA pipe): the package on each and bench/fp8.py at
# d = 64 and 128 (warpflash only), two passes in rotating order.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r2; mkdir -p $R
save() { tar czf $OUT/r2.tgz -C $R .; }
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
tar xJf build-carry/s44b.txz
scripts/package_per_library.sh $R M L1 L2 > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
for pass in 1 2; do
  if [ $pass = 1 ]; then order="M L1 L2"; else order="L2 L1 M"; fi
  for b in $order; do
    echo "== $b pass $pass" >> $R/fp8.log
    (PYTHONPATH=/tmp/pkg-$b timeout 90 python3 bench/fp8.py --head-dims 64,128 --iters 30 >> $R/fp8.log 2>&1)
  done
  echo "fp8 pass $pass at ${SECONDS}s"; save
done
