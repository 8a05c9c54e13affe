#!/usr/bin/env bash
# Call C (prepared in the thirty-eighth session, run in the thirty-ninth; carry
# build-carry/stage38c.txz and FA3's wheel): the landing checks of the softmax split around
# the PV wait (`../2026-12-06-thirty-eighth/split-softmax-around-pv-wait.patch`) on its CI
# build N (a clean clone with the patch, `.ci/run`) against main's M (N's library with main's
# objects of the timed kernels: BF16 d = 128 (3), 192, 256 (2), FP16 d = 128 (3)):
# 1. the forward's GPU tests on N (8 shards; the other kernels' objects are byte-identical
#    in SASS to main's), then memcheck and racecheck on forward cases of d = 128, 192, 256;
# 2. timing, one pass, M and N in turn with FA3 beside: BF16 d = 128, 256, 192,
#    FP16 d = 128; and N against N2 (causal d = 128 on 128 x 128 tiles up to 16k keys,
#    `causal-long-tiles-from-16k.patch`; prediction within +-3%) at causal 8k.
# Each step is saved to $OUT as it ends (~8 min).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rc; mkdir -p $R
save() { tar czf $OUT/c.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage38c.txz
bin=build-stage/tests/gpu_tests_N
# The forward's tests (decode and KV-cache attention included): the other kernels' objects
# are byte-identical in SASS to main's.
forward='Shapes/ForwardGpuTest.*:Features/ForwardFeaturesGpuTest.*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*'
left=$(( 260 - SECONDS ))
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout $left $bin --gtest_brief=1 --gtest_filter="$forward" > $R/tests.shard$i 2>&1 &
done
wait
cat $R/tests.shard* > $R/tests-N.log; rm $R/tests.shard*
echo "suite at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-N.log | sort | uniq -c | head -30
save
f='Shapes/ForwardGpuTest.*/bf16_d128_causal_b2_q113_k203_h4_kv1:Features/ForwardFeaturesGpuTest.*/fp16_d256_window_both_sides:Features/ForwardFeaturesGpuTest.*/bf16_d192*varlen_causal_gqa'
for tool in memcheck racecheck; do
  left=$(( 330 - SECONDS )); [ $left -lt 15 ] && { echo "no time for $tool"; continue; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $R/$tool.log 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -n 3 $R/$tool.log
done
save
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M N N2
bench() {  # bench LIB TAG ARGS... (TAG "tiles": the N / N2 comparison, its own files)
  local n=$1 tag=$2; shift 2
  local csv=$R/bench-$n-$tag-$pass.csv; [ $tag = tiles ] && csv=$R/tiles-$n-$pass.csv
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 60 python3 benchmark.py --impls warpflash,fa3 \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $csv > $R/bench-$n-$tag-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
pass=1
for n in M N; do bench $n d128 --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192,16384; done; save
for n in M N; do bench $n d256 --workloads paper --dtypes bf16 --head-dims 256 --seqlens 1024,2048,4096,16384; done; save
for n in N N2; do bench $n tiles --dtypes bf16 --head-dims 128 --seqlens 8192 --causal 1; done; save
for n in M N; do bench $n d192 --workloads paper --dtypes bf16 --head-dims 192 --seqlens 2048,8192; done; save
for n in M N; do bench $n fp16 --workloads paper --dtypes fp16 --head-dims 128 --seqlens 4096,16384; done; save
scripts/summarize_libraries.py "$R/bench-{lib}-*.csv" M N | tee -a $R/summary.txt
scripts/summarize_libraries.py "$R/tiles-{lib}-*.csv" N N2 | tee -a $R/summary.txt
save
