#!/usr/bin/env bash
# call 2 of the fiftieth session (right after call 1 on the warm machine; a fresh machine
# unpacks and packages first): the forty-ninth's call 2, trimmed to fit one call.
# 1. X against main, alternating (head, x, x, head), FA3 in every run: the points X changes
#    (d = 64 causal 2k: the 192 x 128 kernel; d = 128 causal 8k / 16k and Llama-3-8B 8k:
#    128 x 128 tiles) and controls X leaves alone (d = 64 causal 8k, d = 128 causal 2k,
#    Llama 4k). 2. d = 96 causal 4k-16k before / after the forty-eighth's last-section
#    merge (full = 686abd3, head = main), C++ benchmark, alternating. 3. ncu of d = 64
#    causal 2k and d = 128 causal 8k: head, x, FA3.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
R=/tmp/peers; mkdir -p $R/ncu
if [ ! -d /tmp/pkg-x ]; then  # a fresh machine
  (cd build-stage && tar xJf pack5/head.tar.xz && tar xJf pack5/libs.tar.xz)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
  scripts/package_per_library.sh $R head x > $R/package.log 2>&1
fi
cd bench
for lib in head x x head; do
  [ "${AB:-1}" = 1 ] || break
  n=$(ls $R/ab-$lib-*.log 2>/dev/null | wc -l)
  PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 110 python3 benchmark.py --impls warpflash,fa3 --workloads paper,llama --dtypes bf16 \
    --head-dims 64,128 --seqlens 2048,8192,16384 --causal 1 --repeats 2 > $R/ab-$lib-$n.log 2>&1
  echo "$lib pass $n rc=$? at ${SECONDS}s"
done
grep -hE "^(warpflash|FA3) " $R/ab-head-0.log | head -4
cd ..
(cd build-stage && tar xJf pack5/full-bench.tar.xz)  # full/bench: 686abd3, before the merge
for b in full head head full; do
  echo "== $b" >> $R/d96.log
  timeout 60 build-stage/$b/bench/warpflash_bench --dtypes bf16 --head-dims 96 --seqlens 4096,8192,16384 --causal 1 --iters 30 --warmup 5 >> $R/d96.log 2>&1
done
echo "d96 done at ${SECONDS}s"
cd bench
S="--section SpeedOfLight --section WarpStateStats --section LaunchStats --metrics sm__cycles_active.avg,sm__cycles_active.max,smsp__issue_active.avg.per_cycle_active,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
for run in "head warpflash 64 2048" "x warpflash 64 2048" "head fa3 64 2048" "head warpflash 128 8192" "x warpflash 128 8192" "head fa3 128 8192"; do
  [ $SECONDS -gt ${NCU_BEFORE:-540} ] && { echo "ncu $run skipped (time)"; continue; }
  set -- $run
  log=$R/ncu/$1-$2-d$3-c1-$4.log
  PYTHONPATH=/tmp/pkg-$1:/tmp/site3 timeout 60 ncu --clock-control none $S -k regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    python3 fp8_profile.py $2 $3 1 $4 bf16 > $log 2>&1
  echo "ncu $run rc=$? at ${SECONDS}s"; grep -E "Elapsed Cycles|sm__cycles_active.avg " $log | head -2
done
cd $R && tar czf $OUT/call2-logs.tgz ab-*.log d96.log ncu
