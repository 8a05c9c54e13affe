#!/usr/bin/env bash
# Source-level ncu (SourceCounters, --clock-control none) of ours and FA3 at the points
# where FA3 leads most: BF16 d=192 1k (causal and not), d=64 causal 2k.
set -u
REAL_OUT=$OUT; OUT=/tmp/ncu46; mkdir -p $OUT
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
S="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active"
prof() { # name d causal seqlen build
  timeout 120 ncu --clock-control none $S -k regex:forward_kernel --launch-skip 2 --launch-count 1 -o $OUT/ours-d$2-c$3-$4 \
    build-stage/$5/bench/warpflash_bench --dtypes bf16 --head-dims $2 --seqlens $4 --causal $3 --warmup 1 --iters 1 > $OUT/ours-d$2-c$3-$4.log 2>&1
  echo "ours d$2 c$3 $4 rc=$?"
  (cd bench && PYTHONPATH=/tmp/site3 timeout 120 ncu --clock-control none $S -k regex:device_kernel --launch-skip 3 --launch-count 1 -o $OUT/fa3-d$2-c$3-$4 \
    python3 fp8_profile.py fa3 $2 $3 $4 bf16 > $OUT/fa3-d$2-c$3-$4.log 2>&1); echo "fa3 d$2 c$3 $4 rc=$?"
  for who in ours fa3; do
    ncu --import $OUT/$who-d$2-c$3-$4.ncu-rep --page source --print-source sass --csv > $OUT/$who-d$2-c$3-$4-sass.csv 2>/dev/null
    ncu --import $OUT/$who-d$2-c$3-$4.ncu-rep --page details > $OUT/$who-d$2-c$3-$4-details.txt 2>/dev/null
    grep -E "Duration|sm__cycles_active|hmma|issue_active" $OUT/$who-d$2-c$3-$4-details.txt | head -8
  done
}
prof x 192 0 1024 b192
prof x 192 1 1024 b192
prof x 64 1 2048 base
tar czf $REAL_OUT/ncu46.tgz -C $OUT --exclude="*.ncu-rep" . && ls -la $REAL_OUT
