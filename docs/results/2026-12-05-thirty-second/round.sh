#!/usr/bin/env bash
# The thirty-second session's FP8 rounds (issue 16), as run: warpflash FP8 kernel builds
# (build-stage/libs/NAME.a, packed by hand into .whl/stage.txz) against FA3's and cuDNN's FP8
# (.whl) on the same inputs, the package relinked on each library.
#   round.sh LIB...   env: TESTS_LIB (GPU tests binary build-stage/tests/gpu_tests_<lib>),
#   TEST_FILTER, SANITIZE (a gtest filter for memcheck/racecheck), FP8_ARGS[_<lib>], PASSES,
#   FP8_BENCH=0 (no bench/fp8.py), GENERAL_LIBS (libraries that also run general_d64.py, BF16), PYTEST (pytest arguments, on
#   the first library's package), PROFILE ("D CAUSAL SEQLEN" points for ncu, warpflash and FA3)
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
[ -f .whl/stage.txz ] && tar xJf .whl/stage.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
export PYTHONPATH=/tmp/site
for lib in ${TESTS_LIB:-}; do
  bin=build-stage/tests/gpu_tests_$lib
  timeout 240 $bin --gtest_brief=1 --gtest_filter="${TEST_FILTER:-Fp8*:*Quantiz*:BlockScales*}" > $R/tests-$lib.log 2>&1
  echo "GPU tests $lib rc=$?"; tail -n 4 $R/tests-$lib.log
  if [ -n "${SANITIZE:-}" ]; then
    for tool in memcheck racecheck; do
      timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$SANITIZE" > $R/$tool-$lib.log 2>&1
      echo "$tool $lib rc=$?"; tail -n 2 $R/$tool-$lib.log
    done
  fi
done
first=$1
scripts/package_per_library.sh $R "$@"
cd bench
for pass in $(seq ${PASSES:-2}); do
  for name in "$@"; do
    args_of=FP8_ARGS_$name; args=${!args_of:-${FP8_ARGS:---head-dims 64 --iters 30}}
    if [ "${FP8_BENCH:-1}" = 1 ]; then
      PYTHONPATH=/tmp/pkg-$name:/tmp/site timeout 300 python3 fp8.py $args > $R/fp8-$name-$pass.log 2>&1
      echo "bench $name pass $pass rc=$?"
      grep -v "^#" $R/fp8-$name-$pass.log | awk -F'|' 'NF>8 {print $2,$3,$4,"|",$5,$6,$7,$8}' | head -40
    fi
    if [ -n "${GENERAL_LIBS:-}" ] && [[ " $GENERAL_LIBS " == *" $name "* ]]; then
      (cd .. && PYTHONPATH=/tmp/pkg-$name:/tmp/site timeout 120 python3 docs/results/2026-12-05-thirty-second/general_d64.py \
        > $R/general-$name-$pass.log 2>&1); echo "general $name pass $pass rc=$?"; cat $R/general-$name-$pass.log | tail -4
    fi
  done
done
cd ..
if [ -n "${PYTEST:-}" ]; then
  PYTHONPATH=/tmp/pkg-$first:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider $PYTEST > $R/pytest.log 2>&1
  echo "pytest rc=$?"; tail -n 3 $R/pytest.log
fi
# PROFILE: "D CAUSAL SEQLEN" points, ncu of warpflash (the first library) and FA3 on each.
for point in ${PROFILE:+"$PROFILE"}; do
  set -- $point
  for impl in warpflash fa3; do
    out=$R/ncu-$impl-d$1-c$2-s$3
    (cd bench && PYTHONPATH=/tmp/pkg-$first:/tmp/site timeout 150 ncu --clock-control none --kernel-name-base demangled \
      --kernel-name 'regex:forward_kernel|FlashAttnFwd' --launch-skip 3 --launch-count 1 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters \
      --section LaunchStats --section Occupancy -o $out -f python3 fp8_profile.py $impl $1 $2 $3 > $out.log 2>&1)
    echo "ncu $impl $point rc=$?"
    ncu --import $out.ncu-rep --print-details all > $out.txt 2>&1
    ncu --import $out.ncu-rep --page source --csv --print-source sass > $out-sass.csv 2>&1
    grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  " $out.txt | head -6
    rm -f $out.ncu-rep
  done
done
tar czf $OUT/results.tgz -C $R . && rm -rf $R
