#!/usr/bin/env bash
# Thirty-fourth session, call 2 (carry ["build-carry/stage-n.txz", ".whl"]): N (the kernels of
# fp8-d256-long.patch on what landed) the GPU tests of FP8 and of the 16-bit d = 256 forward, memcheck and racecheck on a case of the new kernel; then
# B (main) against N: the FP8 table once, 16-bit d = 256's short problems (dense_d256.py)
# once, the libraries in turn (the device time left allowed no more).
set -uo pipefail
here=docs/results/2026-12-05-thirty-fourth
TESTS_LIB=N TEST_FILTER_N='*Fp8*:*e4m3*:*Forward*bf16_d256*:*Forward*fp16_d256*' \
SANITIZE='*/e4m3_d256_long_keys_causal_gqa' \
FP8_ARGS='--head-dims 64,128,256 --seqlens 1024,4096,16384 --causal both --iters 30' PASSES=1 \
  bash docs/results/2026-12-05-thirty-third/round.sh B N
mkdir -p $OUT/dense
for pass in 1; do
  for n in B N; do
    PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 100 python3 $here/dense_d256.py > $OUT/dense/dense-$n-$pass.log 2>&1
    echo "dense $n pass $pass rc=$?"
  done
done
paste $OUT/dense/dense-B-1.log $OUT/dense/dense-N-1.log
