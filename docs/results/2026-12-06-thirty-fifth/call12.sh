#!/usr/bin/env bash
# Calls 1 and 2 in one (device starts were scarce): carry build-carry/stage-tests-c.txz,
# stage-slot.txz, stage-t2k.txz, stage-nslot.txz.
# 1. (last) Every GPU test of main's kernels (library C = the CI clone's build of 8ec5304's code),
#    memcheck and racecheck on three FP8 cases of the landed kernels.
# 2. (first) Which 16-bit plain loop gives its slot to FP8 d = 256's long tiles:
#    dense_plain_loops.py on C, P64 (d = 64's short causal kernel general-only), P256
#    (d = 256's default kernel general-only), two passes; FP8 d = 128 and 256 on C, T2k (C
#    with kFp8LongMinSeqlenK = 2048: d = 128's long tiles from 2k) and N64 (P64 with
#    fp8-d256-long.patch's kernel and dispatch), fp8_points.py, two passes.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
for stage in build-carry/stage*.txz; do tar xJf $stage; done
S=$OUT/slot; mkdir -p $S
scripts/package_per_library.sh $S C P64 P256 T2k N64
for pass in 1 2; do
  for n in C P64 P256; do
    PYTHONPATH=/tmp/pkg-$n timeout 60 python3 docs/results/2026-12-05-thirty-fourth/dense_plain_loops.py > $S/plain-$n-$pass.log 2>&1
    echo "plain $n pass $pass rc=$?"
  done
done
for pass in 1 2; do
  for n in C T2k N64; do
    PYTHONPATH=/tmp/pkg-$n timeout 60 python3 docs/results/2026-12-06-thirty-fifth/fp8_points.py > $S/fp8-$n-$pass.log 2>&1
    echo "fp8 $n pass $pass rc=$?"
  done
done
paste $S/plain-C-1.log $S/plain-P64-1.log $S/plain-P256-1.log
paste $S/fp8-C-1.log $S/fp8-T2k-1.log $S/fp8-N64-1.log
TESTS_LIB=C \
SANITIZE='*/e4m3_d64_varlen_causal:*/e4m3_d256_block_scales_with_descales_window:*/e4m3_d256_long_keys_causal_gqa' \
  bash docs/results/2026-12-05-thirty-third/round.sh
