#!/usr/bin/env bash
# call D: the causal tail's last L2 section made large enough to balance the CTAs
# (tile_scheduler.h plan_sections; library "sec", a BF16 d = 192 / 256 build) against main's
# (full). 1. The sec build's causal GPU tests. 2. ncu of sec at d = 192 / 128 causal 2k
# (busiest SM against the mean; main's was 1.058 in call B). 3. Both libraries alternating,
# two passes: the paper grid's d = 192 / 256 causal 1k-8k beside FA3, and d = 192 / 128.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack2/libfull.tar.xz && tar xJf pack3/sec.tar.xz)
R=/tmp/peers; mkdir -p $R/ncu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R full sec > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
GTEST_FILTER='*causal*:*Causal*' GPU_TEST_SHARDS=14 TEST_TIMEOUT=200 scripts/gpu_tests.sh build-stage/sec $R/tests-sec.log > /dev/null; echo "tests rc=$? at ${SECONDS}s"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)" $R/tests-sec.log | awk '{s[$2]+=$4} END {for (k in s) print k, s[k]}'
grep -E "FAILED  \]" $R/tests-sec.log | head
S="--section SpeedOfLight --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,dram__bytes_read.sum"
(cd bench && PYTHONPATH=/tmp/pkg-sec:/tmp/site3 timeout 60 ncu --clock-control none $S -k regex:forward_kernel --launch-skip 3 --launch-count 1 \
  python3 fp8_profile.py warpflash 192/128 1 2048 bf16 > $R/ncu/sec-d192v128-c1-2048.log 2>&1)
grep -E "Duration|Elapsed Cycles|sm__cycles_active|dram__bytes" $R/ncu/sec-d192v128-c1-2048.log
cd bench
for rep in 1 2; do
  libs="full sec"; [ $rep = 2 ] && libs="sec full"
  for lib in $libs; do
    PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 100 python3 benchmark.py --impls warpflash,fa3 --workloads paper --dtypes bf16 \
      --head-dims 192,256 --seqlens 1024,2048,4096,8192 --causal 1 --repeats 2 > $R/grid-$lib-$rep.log 2>&1
    PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 80 python3 features.py --sections headdims --headdims 192/128 \
      --headdim-seqlens 1024,2048,4096,8192 --repeats 2 > $R/v128-$lib-$rep.log 2>&1
    echo "$lib rep $rep at ${SECONDS}s"
  done
done
cd $R && tar czf $OUT/callD-logs.tgz *.log ncu
