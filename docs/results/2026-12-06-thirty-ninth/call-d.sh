#!/usr/bin/env bash
# Call D (prepared in the thirty-eighth session, run in the thirty-ninth; carry
# build-carry/stage38d.txz and FA3's wheel): does
# the split that won at d >= 128 also pay at d = 64's three-consumer-warpgroup kernel
# (192 x 128 tiles, issue 19's d = 64 causal 16k point)? E = N (0ad5afc's CI build) with
# kSoftmaxBeforePvWait (and with it kRescaleOBeforePv) on for that kernel: the
# scheduling-block end before the PV wait, the maxima and row 0's exponentials before it,
# row 1's after. Only forward_bf16_d64.cu.o replaced. The twenty-fifth session's
# all-before-the-wait form lost 6-12% there ("their pingpong of three overlaps enough").
# Prediction: -5% to +3%; a gain only if the PV wait still stalls that kernel.
# Then the rest of N's GPU suite (all but the forward's, which call C runs), 8 shards, for
# the whole suite on N's build.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rd; mkdir -p $R
save() { tar czf $OUT/d.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage38d.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R N E
for pass in 1 2; do
  for n in N E; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 60 python3 benchmark.py --impls warpflash,fa3 \
      --workloads paper --dtypes bf16 --head-dims 64 --seqlens 4096,8192,16384 --iters 50 --warmup 5 --repeats 3 \
      --commit $n --csv $R/bench-$n-$pass.csv > $R/bench-$n-$pass.log 2>&1)
    echo "$n pass $pass rc=$? at ${SECONDS}s"
  done
  save
done
scripts/summarize_libraries.py "$R/bench-{lib}-*.csv" N E | tee -a $R/summary.txt
timeout 100 build-stage/tests/gpu_tests_E --gtest_brief=1 \
  --gtest_filter='Shapes/ForwardGpuTest.*bf16_d64*:Features/ForwardFeaturesGpuTest.*bf16_d64*' > $R/tests-E.log 2>&1
echo "tests E rc=$?"; grep -E '^\[  (PASSED|FAILED)' $R/tests-E.log | head -5
save
rest='-Shapes/ForwardGpuTest.*:Features/ForwardFeaturesGpuTest.*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*'
left=$(( 560 - SECONDS ))
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout $left build-stage/tests/gpu_tests_N --gtest_brief=1 --gtest_filter="$rest" > $R/rest.shard$i 2>&1 &
done
wait
cat $R/rest.shard* > $R/tests-N-rest.log; rm $R/rest.shard*
echo "rest at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-N-rest.log | sort | uniq -c | head -30
save
