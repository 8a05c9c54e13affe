#!/usr/bin/env bash
# Calls 6 and 7, run inline on call 5's warm machine (after a call that copied
# build-carry/cu13.partaa to /tmp): call 6 (carry build-carry/cu13.partab, build-carry/fa4w)
# installs FA4 b36 and runs bench/backward.py on F's package against cuDNN and FA4; call 7
# profiles F's and D's d = 64 backward at 16k (ncu, SourceCounters).
R=/tmp/r6; mkdir -p $R /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build-carry/fa4w/*.whl > $R/pip.log 2>&1
cat /tmp/cu13.partaa build-carry/cu13.partab | tar xJf - -C /tmp/site
export PYTHONPATH=/tmp/pkg-F:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
timeout 300 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --repeats 3 2>&1 | grep -v Warning | grep -v exe_args > $R/backward-py-fa4-F.log
# call 7
R=/tmp/r7; mkdir -p $R
for b in F D; do
  timeout 100 ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:backward_kernel --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --export $R/$b-d64-16k \
    build-stage/$b/bench/warpflash_bench --backward --head-dims 64 --seqlens 16384 --causal 0 --dtypes bf16 --warmup 1 --iters 1 > $R/$b.log 2>&1
  ncu --import $R/$b-d64-16k.ncu-rep --page details --print-details all > $R/$b-d64-16k-details.txt 2>&1
  ncu --import $R/$b-d64-16k.ncu-rep --page source --print-source sass --csv > $R/$b-d64-16k-sass.csv 2>&1
done
