#!/usr/bin/env bash
# Prepared for the next session (carry build-carry/stage-next37.txz and FA3's wheel
# .whl/fa3_fwd-0.0.3-*.whl): one call, about 6 minutes.
# 1. Issue 19: where causal d = 128 loses to FA3, 4k / 8k / 16k (0.92 / 0.88 / 0.93x on an
#    H100): ncu of one launch each (--clock-control none), ours (M = main's CI build,
#    8700d37) and FA3's, BF16, the paper's workload.
# 2. The FP8 long-key cases' relative L2 error over 40 seeds (next-fp8-seeds.sh).
set -uo pipefail
here=docs/results/2026-12-06-thirty-sixth
export PYTHONUNBUFFERED=1
tar xJf build-carry/stage-next37.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > /dev/null 2>&1
mkdir -p $OUT/ncu /tmp/logs
scripts/package_per_library.sh /tmp/logs M
for seqlen in 4096 8192 16384; do
  for impl in warpflash fa3; do
    (cd bench && PYTHONPATH=/tmp/pkg-M:/tmp/site timeout 120 ncu --clock-control none \
      --kernel-name regex:'forward_kernel|Fwd' --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section LaunchStats --section SchedulerStats \
      --section Occupancy --section InstructionStats \
      --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,sm__cycles_elapsed.avg \
      python3 fp8_profile.py $impl 128 1 $seqlen bf16) > $OUT/ncu/$impl-$seqlen.log 2>&1
    echo "ncu $impl $seqlen rc=$?"
    grep -E 'Duration|hmma_cycles|sm__cycles|Issue Slots Busy|No Eligible|Registers Per' $OUT/ncu/$impl-$seqlen.log | head -8
  done
done
BIN=build-stage/tests/gpu_tests_M bash $here/next-fp8-seeds.sh
