#!/usr/bin/env bash
# Call 6 (carry build-carry/s41b.txz and FA3's wheel): ncu (--clock-control none) of BF16
# d = 192 at 1k, non-causal and causal, ours (M, main's kernels) and FA3's (0.77-0.85x of
# FA3 in call 5): active cycles and their spread over the SMs, the tensor pipe's share,
# issue activity, stall reasons per issue, DRAM bytes; for the next session's d = 192 work.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r6; mkdir -p $R/ncu
save() { tar czf $OUT/r6.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
if [ ! -d /tmp/pkg-M ]; then
  tar xJf build-carry/s41b.txz
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
  scripts/package_per_library.sh $R M > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
fi
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
prof() {  # prof IMPL CAUSAL SEQLEN
  (cd bench && PYTHONPATH=/tmp/pkg-M:/tmp/site timeout 90 ncu --clock-control none \
    --kernel-name regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics "$stalls",sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_elapsed.avg,smsp__issue_active.avg.per_cycle_active,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 fp8_profile.py $1 192 $2 $3 bf16) > $R/ncu/$1-c$2-$3.log 2>&1
  echo "ncu $1 causal=$2 $3 rc=$? at ${SECONDS}s"; grep -E 'Duration|hmma_cycles|sm__cycles_active.avg' $R/ncu/$1-c$2-$3.log | head -4
}
for c in 0 1; do prof warpflash $c 1024; prof fa3 $c 1024; save; done
