#!/usr/bin/env bash
# ncu source counters of the new d=192 kernel (b192n) at 1k, non-causal and causal.
set -u
REAL_OUT=$OUT; OUT=/tmp/ncu46b; mkdir -p $OUT
cd "$(dirname "$0")/.."
S="--section SourceCounters --section WarpStateStats --section SpeedOfLight --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active"
for c in 0 1; do
  timeout 120 ncu --clock-control none $S -k regex:forward_kernel --launch-skip 2 --launch-count 1 -o $OUT/new-d192-c$c \
    build-stage/b192n/bench/warpflash_bench --dtypes bf16 --head-dims 192 --seqlens 1024 --causal $c --warmup 1 --iters 1 > $OUT/new-d192-c$c.log 2>&1
  ncu --import $OUT/new-d192-c$c.ncu-rep --page source --print-source sass --csv > $OUT/new-d192-c$c-sass.csv 2>/dev/null
  ncu --import $OUT/new-d192-c$c.ncu-rep --page details > $OUT/new-d192-c$c-details.txt 2>/dev/null
  grep -E "Duration|sm__cycles_active.avg|hmma|issue_active" $OUT/new-d192-c$c-details.txt | head -5
done
tar czf $REAL_OUT/ncu46b.tgz -C $OUT --exclude="*.ncu-rep" .
