#!/usr/bin/env bash
# call B: main's library (27f46ba, the full build) in the Python package. 1. ncu of BF16
# d = 192 / 128 at 2k, causal and not, ours and FA3's (fa3-fwd 0.0.3). 2. The paper grid
# (d = 64, 128, 192, 256, 1k-16k) and Llama-3-8B against FA3 and cuDNN, BF16, three
# interleaved repeats.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack2/libfull.tar.xz)
R=/tmp/peers; mkdir -p $R/ncu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R full > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
export PYTHONPATH=/tmp/pkg-full:/tmp/site3
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
for impl in warpflash fa3; do for c in 1 0; do
  (cd bench && timeout 100 ncu --clock-control none $S -k regex:'forward_kernel|Fwd' --launch-skip 3 --launch-count 1 \
    python3 fp8_profile.py $impl 192/128 $c 2048 bf16 > $R/ncu/$impl-c$c.log 2>&1)
  echo "ncu $impl c$c rc=$? at ${SECONDS}s"; grep -E "^  [a-zA-Z].*Fwd|forward_kernel|Duration|gmma_cycles|sm__cycles_active.avg" $R/ncu/$impl-c$c.log | head -5
done; done
cd bench && timeout $((570 - SECONDS)) python3 benchmark.py --impls warpflash,fa3,cudnn --dtypes bf16 --head-dims 64,128,192,256 \
  --seqlens 1024,2048,4096,8192,16384 --causal both --repeats 3 --csv $R/grid.csv > $R/grid.log 2>&1; echo "grid rc=$? at ${SECONDS}s"
grep -A60 "^workload" $R/grid.log | head -70
cd $R && tar czf $OUT/callB-logs.tgz *.log *.csv ncu
