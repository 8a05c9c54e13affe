#!/usr/bin/env bash
# The thirty-third session's prepared round (no device that session): kernel libraries
# (build-stage/libs/NAME.a) and GPU tests binaries (build-stage/tests/gpu_tests_NAME),
# packed into build-carry/stage-*.txz (README.md: which holds what), the peers' wheels in .whl.
#   round.sh LIB...   env: TESTS_LIB (the GPU tests of those builds in 4 shards; TEST_FILTER_<lib>:
#   a gtest filter, default all),
#   SANITIZE (a gtest filter for memcheck and racecheck on the first of TESTS_LIB), GENERAL=1
#   (general_loop.py, 16-bit, per library), FP8_ARGS (bench/fp8.py's, per library; empty:
#   none), PASSES (default 2), QUANT_SEED (the quantizer's GPU tests of TESTS_LIB again, three
#   times with WARPFLASH_TEST_SEED=QUANT_SEED).
set -uo pipefail
export PYTHONUNBUFFERED=1
here=docs/results/2026-12-05-thirty-third
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
for stage in build-carry/stage*.txz; do [ -f $stage ] && tar xJf $stage; done
ls -la build-stage/libs build-stage/tests 2>/dev/null
[ -n "$(ls .whl/*.whl 2>/dev/null)" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
export PYTHONPATH=/tmp/site
for lib in ${TESTS_LIB:-}; do
  bin=build-stage/tests/gpu_tests_$lib
  filter_of=TEST_FILTER_$lib
  pids=()
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 300 $bin --gtest_brief=1 --gtest_filter="${!filter_of:-*}" \
      > $R/tests-$lib.shard$i 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; echo "shard rc=$?"; done
  cat $R/tests-$lib.shard* > $R/tests-$lib.log; rm $R/tests-$lib.shard*
  grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED' $R/tests-$lib.log | head -30
  if [ -n "${QUANT_SEED:-}" ]; then
    WARPFLASH_TEST_SEED=$QUANT_SEED timeout 120 $bin --gtest_brief=1 --gtest_repeat=3 \
      --gtest_filter='Shapes/QuantizeGpuTest.*' > $R/quantize-seed-$lib.log 2>&1
    echo "quantizer tests seed $QUANT_SEED $lib rc=$?"; grep -E '^\[  (PASSED|FAILED)' $R/quantize-seed-$lib.log | head
  fi
  if [ -n "${SANITIZE:-}" ] && [ "$lib" = "${TESTS_LIB%% *}" ]; then
    for tool in memcheck racecheck; do
      timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$SANITIZE" > $R/$tool-$lib.log 2>&1
      echo "$tool $lib rc=$?"; tail -n 2 $R/$tool-$lib.log
    done
  fi
done
if [ $# -gt 0 ]; then
  scripts/package_per_library.sh $R "$@"
  for pass in $(seq ${PASSES:-2}); do
    for name in "$@"; do
      if [ "${GENERAL:-0}" = 1 ]; then
        PYTHONPATH=/tmp/pkg-$name:/tmp/site timeout 200 python3 $here/general_loop.py > $R/general-$name-$pass.log 2>&1
        echo "general $name pass $pass rc=$?"; cat $R/general-$name-$pass.log
      fi
      if [ -n "${FP8_ARGS:-}" ]; then
        (cd bench && PYTHONPATH=/tmp/pkg-$name:/tmp/site timeout 300 python3 fp8.py $FP8_ARGS > $R/fp8-$name-$pass.log 2>&1)
        echo "fp8 $name pass $pass rc=$?"
        grep -v "^#" $R/fp8-$name-$pass.log | awk -F'|' 'NF>8 {print $2,$3,$4,"|",$5,$6,$7,$8}' | head -40
      fi
    done
  done
fi
tar czf $OUT/results.tgz -C $R . && rm -rf $R
