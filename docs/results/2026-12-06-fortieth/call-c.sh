#!/usr/bin/env bash
# Call C of the fortieth session (carry build-carry/c40.txz: X.a and gpu_tests_X = the CI
# build of branch causal-sections (.ci/run on a clean clone), N.a = main's CI library
# before it; and FA3's wheel):
# 1. the forward's GPU tests on X (8 shards; FP8 included: its kernels share the loads);
# 2. timing N / X in turn with FA3 beside, two passes: causal d = 192, d = 128 (paper and
#    Llama-3-8B), d = 256, d = 64; ncu DRAM bytes of X at d = 192 causal 2k (N: 300-312 MB,
#    FA3 189 MB, the model: X 194 MB);
# 3. memcheck and racecheck on two causal cases.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rc; mkdir -p $R/ncu
save() { tar czf $OUT/c.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/c40.txz
bin=build-stage/tests/gpu_tests_X
forward='Shapes/ForwardGpuTest.*:Features/ForwardFeaturesGpuTest.*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*:Fp8/Fp8ForwardGpuTest.*'
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 230 $bin --gtest_brief=1 --gtest_filter="$forward" > $R/tests.shard$i 2>&1 &
done
wait
cat $R/tests.shard* > $R/tests-X.log; rm $R/tests.shard*
echo "tests at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-X.log | sort | uniq -c | head -20
save
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R X N > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
(cd bench && PYTHONPATH=/tmp/pkg-X:/tmp/site timeout 60 ncu --clock-control none \
  --kernel-name regex:'forward_kernel' --launch-skip 3 --launch-count 1 --section SpeedOfLight \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,sm__cycles_active.max \
  python3 fp8_profile.py warpflash 192 1 2048 bf16) > $R/ncu/X-192-2048.log 2>&1
echo "ncu rc=$? at ${SECONDS}s"; grep -E 'Duration|dram__bytes|hit_rate|hmma_cycles' $R/ncu/X-192-2048.log | head -5
save
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 60 python3 benchmark.py --impls warpflash,fa3 \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in 1 2; do
  for n in N X; do bench $n d192 --workloads paper --dtypes bf16 --head-dims 192 --seqlens 2048,8192 --causal 1; done
  for n in X N; do bench $n d128 --workloads paper,llama --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192,16384 --causal 1; done
  for n in N X; do bench $n d64-256 --workloads paper --dtypes bf16 --head-dims 64,256 --seqlens 2048,8192 --causal 1; done
  save
  [ $SECONDS -gt 420 ] && break
done
f='Shapes/ForwardGpuTest.*/bf16_d128_causal_b2_q113_k203_h4_kv1:Shapes/ForwardGpuTest.*/fp16_d192_causal_b3_q600_k700_h16_kv4'
for tool in memcheck racecheck; do
  [ $SECONDS -gt 500 ] && break
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 2 $R/$tool.log
done
save
echo "done at ${SECONDS}s"
