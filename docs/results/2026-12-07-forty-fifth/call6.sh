#!/usr/bin/env bash
# Call 6 (carry build-carry/s45a.txz): Nsight Compute of the forward at BF16 d = 64, 16k
# non-causal, on LM (main) and LA (one exponential in 4 on the FMA pipe): is the forward's
# consumer bound by issue slots or by the MUFU pipe (perf-notes, forty-fifth section)?
# Launches 3-5 of the forward kernel (after the spot check's small problems); the longest is
# the 16k problem.
set -uo pipefail
R=/tmp/r6; mkdir -p $R
save() { tar czf $OUT/r6.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s45a.txz
for b in LM LA; do
  timeout 200 ncu --clock-control none -k regex:forward_kernel --launch-skip 2 --launch-count 3 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section SourceCounters --export $R/$b-fwd-d64-16k \
    build-stage/$b/bench/warpflash_bench --head-dims 64 --seqlens 16384 --causal 0 --dtypes bf16 --warmup 1 --iters 1 > $R/$b.log 2>&1
  echo "$b ncu rc=$? at ${SECONDS}s"
  ncu --import $R/$b-fwd-d64-16k.ncu-rep --page details --print-details all > $R/$b-details.txt 2>&1
  ncu --import $R/$b-fwd-d64-16k.ncu-rep --page raw --csv --metrics gpu__time_duration.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active > $R/$b-raw.csv 2>&1
  rm -f $R/$b-fwd-d64-16k.ncu-rep; save
done
grep -E "Duration|Issue Slots Busy|Issued Ipc|No Eligible|XU|Pipe" $R/LM-details.txt | head -30
echo "done at ${SECONDS}s"
