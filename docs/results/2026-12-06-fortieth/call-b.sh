#!/usr/bin/env bash
# Call B of the fortieth session (carry build-carry/b40.txz: N.a = main's CI library, H.a =
# N's with the BF16 forward objects built with L2 cache hints on the TMA loads (Q evict
# first, K/V evict last: FA3's), gpu_tests_H linked against H.a; and FA3's wheel):
# 1. the BF16 forward GPU tests on H (8 shards);
# 2. ncu of BF16 d = 192 causal 2k on H with DRAM bytes (call A: N read 1.5x the problem's
#    bytes, FA3 1.0x);
# 3. timing N / H in turn with FA3 beside, three passes: d = 192, d = 128 causal and
#    Llama-3-8B, d = 256.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rb; mkdir -p $R/ncu
save() { tar czf $OUT/b.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/b40.txz
cp build-stage/libs/N.a build-stage/libs/H.a && (cd build-stage/objs/h && ar r ../../libs/H.a *.o)
bin=build-stage/tests/gpu_tests_H
forward='Shapes/ForwardGpuTest.*bf16*:Features/ForwardFeaturesGpuTest.*bf16*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 200 $bin --gtest_brief=1 --gtest_filter="$forward" > $R/tests.shard$i 2>&1 &
done
wait
cat $R/tests.shard* > $R/tests-H.log; rm $R/tests.shard*
echo "tests at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-H.log | sort | uniq -c | head -20
save
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R N H > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
prof() {  # prof LIB IMPL HEAD_DIM SEQLEN
  (cd bench && PYTHONPATH=/tmp/pkg-$1:/tmp/site timeout 90 ncu --clock-control none \
    --kernel-name regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 --section SpeedOfLight \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,sm__cycles_active.max \
    python3 fp8_profile.py $2 $3 1 $4 bf16) > $R/ncu/$1-$2-$3-$4.log 2>&1
  echo "ncu $1 $2 d$3 $4 rc=$? at ${SECONDS}s"; grep -E 'Duration|dram__bytes|hit_rate|hmma_cycles' $R/ncu/$1-$2-$3-$4.log | head -6
}
prof H warpflash 192 2048; prof N warpflash 192 2048; prof N fa3 192 2048
save
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 60 python3 benchmark.py --impls warpflash,fa3 \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in 1 2 3; do
  for n in N H; do bench $n d192 --workloads paper --dtypes bf16 --head-dims 192 --seqlens 2048,8192; done
  for n in H N; do bench $n d128 --workloads paper,llama --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192 --causal 1; done
  for n in N H; do bench $n d256 --workloads paper --dtypes bf16 --head-dims 256 --seqlens 2048,8192; done
  save
  [ $SECONDS -gt 470 ] && break
done
[ $SECONDS -lt 480 ] && { prof H warpflash 192 8192; prof N warpflash 192 8192; save; }
echo "done at ${SECONDS}s"
