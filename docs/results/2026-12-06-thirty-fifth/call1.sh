#!/usr/bin/env bash
# Call 1 (carry build-carry/stage-tests-c.txz, stage-slot.txz, stage-t2k.txz): every GPU
# test of main's kernels (the CI clone's build of 8ec5304's code, library C), memcheck and
# racecheck on FP8 cases of the landed kernels; the thirty-fourth session's slot
# measurement (dense_plain_loops.py on C, P64, P256, three passes); FP8 d = 128's long
# tiles from 2k keys (T2k = C with kFp8LongMinSeqlenK = 2048) against C, two passes.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
TESTS_LIB=C \
SANITIZE='*/e4m3_d64_varlen_causal:*/e4m3_d128_window_causal:*/e4m3_d256_block_scales_with_descales_window:*/e4m3_d256_long_keys_causal_gqa:*/e4m3_d128_long_keys_varlen_causal' \
  bash docs/results/2026-12-05-thirty-third/round.sh
S=$OUT/slot; mkdir -p $S
scripts/package_per_library.sh $S C P64 P256 T2k
for pass in 1 2 3; do
  for n in C P64 P256; do
    PYTHONPATH=/tmp/pkg-$n timeout 120 python3 docs/results/2026-12-05-thirty-fourth/dense_plain_loops.py > $S/plain-$n-$pass.log 2>&1
    echo "plain $n pass $pass rc=$?"
  done
  [ $pass = 3 ] && break
  for n in C T2k; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n timeout 120 python3 fp8.py --head-dims 128 --seqlens 1024,2048,4096 --iters 30) > $S/fp8-$n-$pass.log 2>&1
    echo "fp8 $n pass $pass rc=$?"
  done
done
paste $S/plain-C-1.log $S/plain-P64-1.log $S/plain-P256-1.log
for f in $S/fp8-*-1.log; do echo "== $f"; grep -v '^#' $f | head -12; done
