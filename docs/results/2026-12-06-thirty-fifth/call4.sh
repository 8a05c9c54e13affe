#!/usr/bin/env bash
# The lean call, once device time ran short (failed starts took most of it): carry
# build-carry/stage-slot.txz, stage-t2k.txz, stage-nslot.txz, stage-testsn.txz.
# 1. Which 16-bit plain loop gives its slot to FP8 d = 256's long tiles: dense_plain_loops.py
#    on C (main), P64 (d = 64's short causal kernel general-only), P256 (d = 256's default
#    kernel general-only), two passes; fp8_points.py on C and N64 (P64 with
#    fp8-d256-long.patch's kernel and dispatch), two passes, and T2k (C with d = 128's
#    long FP8 tiles from 2k keys), one.
# 2. The GPU tests of what the landing candidate changes (N64, or N256 = P256 with the patch,
#    whichever slot lost less in 1): the 16-bit forward at the freed plain loop's head dim
#    and FP8 d = 256, 4 shards.
set -uo pipefail
# TIMING_ONLY=1: part 1 only (the device time left).
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
for stage in build-carry/stage*.txz; do tar xJf $stage; done
S=$OUT/slot; mkdir -p $S
scripts/package_per_library.sh $S C P64 P256 T2k N64
for pass in 1 2; do
  for n in C P64 P256; do
    PYTHONPATH=/tmp/pkg-$n timeout 40 python3 docs/results/2026-12-05-thirty-fourth/dense_plain_loops.py > $S/plain-$n-$pass.log 2>&1
    echo "plain $n pass $pass rc=$?"
  done
  for n in C N64 T2k; do
    [ $n = T2k ] && [ $pass = 2 ] && continue
    PYTHONPATH=/tmp/pkg-$n timeout 40 python3 docs/results/2026-12-06-thirty-fifth/fp8_points.py > $S/fp8-$n-$pass.log 2>&1
    echo "fp8 $n pass $pass rc=$?"
  done
done
paste $S/plain-C-1.log $S/plain-P64-1.log $S/plain-P256-1.log
paste $S/fp8-C-1.log $S/fp8-N64-1.log $S/fp8-T2k-1.log
[ "${TIMING_ONLY:-0}" = 1 ] && exit 0
# The candidate whose plain-loop problems lost less (geomean over both passes' points of
# its head dim).
pick=$(python3 - "$S" <<'PY'
import math, re, sys
def rates(n, d):
    out = []
    for p in (1, 2):
        try:
            out += [float(x) for x in re.findall(rf"d {d} causal .*: ([0-9.]+) TFLOP/s", open(f"{sys.argv[1]}/plain-{n}-{p}.log").read())]
        except OSError:
            pass
    return out
loss = {}
for n, d in (("P64", 64), ("P256", 256)):
    c, r = rates("C", d), rates(n, d)
    k = min(len(c), len(r))
    loss[n] = math.exp(sum(math.log(r[i] / c[i]) for i in range(k)) / max(k, 1)) if k else 0.0
    print(f"{n} over C: {loss[n]:.3f} ({k} points)", file=sys.stderr)
print("N64" if loss["P64"] >= loss["P256"] else "N256")
PY
)
echo "candidate: $pick"
declare -A filter=([N64]='Shapes/ForwardGpuTest.*d64*:Fp8/Fp8ForwardGpuTest.*d256*'
                   [N256]='Shapes/ForwardGpuTest.*d256*:Fp8/Fp8ForwardGpuTest.*d256*')
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 100 build-stage/tests/gpu_tests_$pick --gtest_brief=1 \
    --gtest_filter="${filter[$pick]}" > $S/tests-$pick.shard$i 2>&1 &
done
wait
cat $S/tests-$pick.shard* > $S/tests-$pick.log; rm $S/tests-$pick.shard*
echo "tests $pick:"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|ms total' $S/tests-$pick.log | head -20
