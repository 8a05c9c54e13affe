#!/usr/bin/env bash
# Prepared for the next session (carry ["build-carry/stage-slot.txz"]): which 16-bit plain
# loop costs least to give up for FP8 d = 256's long tiles. Libraries: C = main at 8ec5304
# (CI's build), P64 = C with d = 64's short causal kernel general-only, P256 = C with
# d = 256's default kernel general-only (each: two instance objects and the dispatch table
# replaced in C's archive). Three passes, the libraries in turn.
set -uo pipefail
here=docs/results/2026-12-05-thirty-fourth
for stage in build-carry/stage*.txz; do [ -f $stage ] && tar xJf $stage; done
mkdir -p $OUT/slot
scripts/package_per_library.sh $OUT/slot C P64 P256
for pass in 1 2 3; do
  for n in C P64 P256; do
    PYTHONPATH=/tmp/pkg-$n timeout 120 python3 $here/dense_plain_loops.py > $OUT/slot/plain-$n-$pass.log 2>&1
    echo "plain $n pass $pass rc=$?"
  done
done
paste $OUT/slot/plain-C-1.log $OUT/slot/plain-P64-1.log $OUT/slot/plain-P256-1.log
