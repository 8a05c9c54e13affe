#!/usr/bin/env bash
# call C: ncu (--clock-control none) of FA3's kernel beside ours: BF16 d = 192 / 128 at 2k
# (causal and not; ours ran in call B) and d = 128 causal 8k (both); then the grid's
# deciding points again (d = 128 causal 4k-16k, d = 64 causal 2k, d = 256 causal 1k and
# non-causal 1k) against FA3 and cuDNN, three interleaved repeats.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack2/libfull.tar.xz)
R=/tmp/peers; mkdir -p $R/ncu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R full > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
export PYTHONPATH=/tmp/pkg-full:/tmp/site3
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,smsp__issue_active.avg.per_cycle_active,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_executed.sum"
prof() {  # impl head_dim causal seqlen
  (cd bench && timeout 100 ncu --clock-control none $S -k regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    python3 fp8_profile.py $1 $2 $3 $4 bf16 > $R/ncu/$1-d${2/\//v}-c$3-$4.log 2>&1)
  echo "ncu $* rc=$? at ${SECONDS}s"; grep -E "Duration|sm__cycles_active.avg" $R/ncu/$1-d${2/\//v}-c$3-$4.log | head -2
}
prof fa3 192/128 1 2048; prof fa3 192/128 0 2048
prof fa3 128 1 8192; prof warpflash 128 1 8192
cd bench
timeout 150 python3 benchmark.py --impls warpflash,fa3,cudnn --workloads paper --dtypes bf16 --head-dims 128 \
  --seqlens 4096,8192,16384 --causal 1 --repeats 3 > $R/rep128.log 2>&1; echo "rep128 rc=$? at ${SECONDS}s"
timeout 100 python3 benchmark.py --impls warpflash,fa3,cudnn --workloads paper --dtypes bf16 --head-dims 64 \
  --seqlens 2048 --causal 1 --repeats 3 > $R/rep64.log 2>&1; echo "rep64 rc=$? at ${SECONDS}s"
timeout 100 python3 benchmark.py --impls warpflash,fa3,cudnn --workloads paper --dtypes bf16 --head-dims 256 \
  --seqlens 1024 --causal both --repeats 3 > $R/rep256.log 2>&1; echo "rep256 rc=$? at ${SECONDS}s"
grep -hE "^paper" $R/rep*.log
cd $R && tar czf $OUT/callC-logs.tgz rep*.log ncu
