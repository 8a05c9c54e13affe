#!/usr/bin/env bash
# call 2 (right after call 1, the machine warm): 1. d = 96 causal 4k-16k, the other head dim
# whose plan the last-section merge changes (the model: +3-4%): the library before it
# (full/, 686abd3) and main's (head/), C++ benchmark, alternating, two passes. 2. X against
# main, alternating, two passes, FA3 beside: d = 64 causal 1k-4k (X: 2k on the 192-row
# kernel) and d = 128 causal 4k-16k and Llama-3-8B (X: 128 x 128 tiles at 8k-16k).
# 3. ncu of d = 64 causal 2k: main (128 x 128, two consumer warpgroups), X (192 x 128,
# three) and FA3 (192 x 128); of d = 128 causal 8k: main (128 x 160), X and FA3 (128 x 128).
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
R=/tmp/peers; mkdir -p $R/ncu
if [ ! -d /tmp/pkg-x ]; then  # a fresh machine
  (cd build-stage && tar xJf pack5/head.tar.xz && tar xJf pack5/libs.tar.xz)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
  scripts/package_per_library.sh $R head x > $R/package.log 2>&1
fi
(cd build-stage && tar xJf pack5/full-bench.tar.xz)  # full/bench: 686abd3, before the merge
for b in full head head full; do
  echo "== $b" >> $R/d96.log
  build-stage/$b/bench/warpflash_bench --dtypes bf16 --head-dims 96 --seqlens 4096,8192,16384 --causal 1 --iters 30 --warmup 5 >> $R/d96.log 2>&1
done
echo "d96 done at ${SECONDS}s"
cd bench
for rep in 1 2; do
  libs="head x"; [ $rep = 2 ] && libs="x head"
  for lib in $libs; do
    PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 100 python3 benchmark.py --impls warpflash,fa3 --workloads paper --dtypes bf16 \
      --head-dims 64 --seqlens 1024,2048,4096 --causal 1 --repeats 2 > $R/d64-$lib-$rep.log 2>&1
    PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 120 python3 benchmark.py --impls warpflash,fa3 --workloads paper,llama --dtypes bf16 \
      --head-dims 128 --seqlens 4096,8192,16384 --causal 1 --repeats 2 > $R/d128-$lib-$rep.log 2>&1
    echo "$lib rep $rep at ${SECONDS}s"
  done
done
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,smsp__issue_active.avg.per_cycle_active,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
for run in "head warpflash 64 2048" "x warpflash 64 2048" "head fa3 64 2048" "head warpflash 128 8192" "x warpflash 128 8192" "head fa3 128 8192"; do
  set -- $run
  log=$R/ncu/$1-$2-d$3-c1-$4.log
  PYTHONPATH=/tmp/pkg-$1:/tmp/site3 timeout 80 ncu --clock-control none $S -k regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    python3 fp8_profile.py $2 $3 1 $4 bf16 > $log 2>&1
  echo "ncu $run rc=$? at ${SECONDS}s"; grep -E "Duration|Elapsed Cycles|sm__cycles_active.avg" $log | head -3
done
grep -hE "^paper|^llama" $R/d64-*.log $R/d128-*.log | head -60
cd $R && tar czf $OUT/call2-logs.tgz d96.log d64-*.log d128-*.log ncu
