#!/usr/bin/env bash
# Call 2 (carry build-carry/stage-slot.txz, stage-t2k.txz, stage-nslot.txz): which 16-bit
# plain loop gives its slot to FP8 d = 256's long tiles. dense_plain_loops.py on C (main),
# P64 (d = 64's short causal kernel general-only), P256 (d = 256's default kernel
# general-only), three passes; FP8 on C, T2k (C with kFp8LongMinSeqlenK = 2048: d = 128's
# long tiles from 2k) and N64 (P64 plus fp8-d256-long.patch's kernel and dispatch; N256 has
# the same FP8 kernels), two passes.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
for stage in build-carry/stage*.txz; do [ -f $stage ] && tar xJf $stage; done
S=$OUT/slot; mkdir -p $S
scripts/package_per_library.sh $S C P64 P256 T2k N64
for pass in 1 2 3; do
  for n in C P64 P256; do
    PYTHONPATH=/tmp/pkg-$n timeout 120 python3 docs/results/2026-12-05-thirty-fourth/dense_plain_loops.py > $S/plain-$n-$pass.log 2>&1
    echo "plain $n pass $pass rc=$?"
  done
  [ $pass = 3 ] && break
  for n in C T2k N64; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n timeout 150 python3 fp8.py --head-dims 128,256 --seqlens 1024,2048,4096,16384 --iters 30) > $S/fp8-$n-$pass.log 2>&1
    echo "fp8 $n pass $pass rc=$?"
  done
done
paste $S/plain-C-1.log $S/plain-P64-1.log $S/plain-P256-1.log
for f in $S/fp8-*-1.log; do echo "== $f"; grep -v '^#' $f | head -20; done
tar czf $OUT/slot.tgz -C $S . 
