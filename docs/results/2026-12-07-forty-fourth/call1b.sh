#!/usr/bin/env bash
# Call 1b (carry build-carry/s44a.txz; call 1 cut to what a short device window holds): one
# timing pass of the C++ benchmark over M, L1, L2, Q, Q3 (see call1.sh): the forward at d = 64
# first, then the backward at d = 64 and 128; a second forward pass if time is left.
set -uo pipefail
R=/tmp/r1; mkdir -p $R
save() { tar czf $OUT/r1.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s44a.txz
S=build-stage
bwd() { timeout 60 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 20 --warmup 5 --head-dims 64,128 --seqlens 1024,4096,16384 | grep -E '^bf16'; }
fwd() { timeout 60 $S/$1/bench/warpflash_bench --dtypes bf16 --causal both --iters 50 --warmup 10 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for b in M L1 L2; do echo "== $b pass 1"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass 1 at ${SECONDS}s"; save
for b in M L1 L2 Q Q3; do echo "== $b pass 1"; bwd $b; done >> $R/bwd.log 2>&1; echo "bwd pass 1 at ${SECONDS}s"; save
for b in L2 L1 M; do echo "== $b pass 2"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass 2 at ${SECONDS}s"; save
[ $SECONDS -lt 200 ] && { for b in Q3 Q L2 L1 M; do echo "== $b pass 2"; bwd $b; done >> $R/bwd.log 2>&1; echo "bwd pass 2 at ${SECONDS}s"; save; }
echo "done at ${SECONDS}s"
