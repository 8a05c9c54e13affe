#!/usr/bin/env bash
# Thirty-fourth session, call 1 (carry ["build-carry/stage-c.txz", ".whl"]): FP8 B (main),
# M (general-mask-row-ends) and D (FP8 d = 256 at 128 x 128) in turn, non-causal and causal,
# two passes, then ncu of B and M at FP8 causal 16k d = 256 and 64, and D at d = 256.
set -uo pipefail
here=docs/results/2026-12-05-thirty-third
FP8_ARGS='--head-dims 64,128,256 --seqlens 512,1024,4096,16384 --causal both --iters 30' PASSES=2 \
  bash $here/round.sh B M D
mkdir -p $OUT/ncu
for run in B:256 M:256 D:256 B:64 M:64; do
  n=${run%:*}; d=${run#*:}
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 120 ncu --clock-control none \
    --kernel-name regex:'forward_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section SchedulerStats \
    --section InstructionStats python3 fp8_profile.py warpflash $d 1 16384) > $OUT/ncu/$n-d$d.log 2>&1
  echo "ncu $n d$d rc=$?"; grep -E 'Duration|Registers Per|Issue Slots Busy|Executed Ipc A|No Eligible' $OUT/ncu/$n-d$d.log | head -8
done
