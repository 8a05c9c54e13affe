#!/usr/bin/env bash
# Call 9 (carry build-carry/s43p.txz: Z's library = main at 3f2647d's kernels): the package on
# it and bench/backward.py against cuDNN at d = 64 and 128 (FA4 would need three calls).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r9; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s43p.txz
scripts/package_per_library.sh $R Z > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
(PYTHONPATH=/tmp/pkg-Z timeout 100 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --repeats 2 > $R/backward-py-cudnn.log 2>&1); echo "backward.py rc=$? at ${SECONDS}s"
cat $R/backward-py-cudnn.log; tar czf $OUT/r9.tgz -C $R .
