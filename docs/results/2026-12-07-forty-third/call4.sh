#!/usr/bin/env bash
# Call 4 (run inline on call 3's warm machine; call 3's FA4 profiles caught its preprocess):
# Nsight Compute of FA4's main backward kernel only (regex BackwardSm90) at d = 64, 16k
# non-causal and 1k causal.
R=/tmp/r4; mkdir -p $R; export PYTHONPATH=/tmp/pkg-D:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
for p in "fa4-d64-16k 64 0 16384" "fa4-d64-1k-causal 64 1 1024"; do
  set -- $p
  (cd bench && timeout 120 ncu --clock-control none --kernel-name regex:'BackwardSm90' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
    --export $R/$1 python3 backward_profile.py fa4 $2 $3 $4 > $R/$1.log 2>&1); echo "$1 rc=$?"
  ncu --import $R/$1.ncu-rep --page details --print-details all > $R/$1-details.txt 2>&1
  ncu --import $R/$1.ncu-rep --page source --print-source sass --csv > $R/$1-sass.csv 2>&1
done
tar czf $OUT/r4.tgz -C $R .
