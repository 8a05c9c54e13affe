#!/usr/bin/env bash
# Prepared for the next session (carry build-carry/stage-next.txz). Two calls on one warm
# machine: PART=tests (1; the full suite took up to 250 s a shard on an H100), then
# PART=timing (2; about 6 minutes).
# 1. The GPU suite on main's kernels (gpu_tests_C2: the CI clone's build of cd95cd6, with
#    the 2100-key FP8 case), 4 shards; memcheck and racecheck on FP8 cases.
# 2. Whether d = 128's clustered kernel can give its slot to FP8 d = 256's long tiles:
#    dense_clustered.py and fp8_points.py on C2 (main), PC (C2 without the clustered
#    kernel: those problems take d = 128's long or default tiles) and NC (PC plus
#    fp8-d256-long.patch's kernel and dispatch, the short d = 256 plain loop kept) and NC2
#    (NC with d = 256's long tiles from 2k keys), in turn, three passes.
set -uo pipefail
here=docs/results/2026-12-06-thirty-fifth
if [ "${PART:-tests}" = tests ]; then
TESTS_LIB=C2 \
SANITIZE='*/e4m3_d64_varlen_causal:*/e4m3_d128_window_causal:*/e4m3_d256_block_scales_with_descales_window:*/e4m3_d128_mid_keys_causal_gqa' \
  bash docs/results/2026-12-05-thirty-third/round.sh
exit 0
fi
for stage in build-carry/stage*.txz; do tar xJf $stage; done
S=$OUT/next; mkdir -p $S
scripts/package_per_library.sh $S C2 PC NC NC2
for pass in 1 2 3; do
  for n in C2 PC NC NC2; do
    PYTHONPATH=/tmp/pkg-$n timeout 60 python3 $here/dense_clustered.py > $S/clustered-$n-$pass.log 2>&1
    PYTHONPATH=/tmp/pkg-$n timeout 60 python3 $here/fp8_points.py > $S/fp8-$n-$pass.log 2>&1
    echo "$n pass $pass done"
  done
done
for k in clustered fp8; do paste $S/$k-C2-1.log $S/$k-PC-1.log $S/$k-NC-1.log $S/$k-NC2-1.log; done
tar czf $OUT/next.tgz -C $S . && rm -rf $S
