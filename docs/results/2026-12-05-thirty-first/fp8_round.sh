#!/usr/bin/env bash
# The thirty-first session's FP8 rounds (issue 16), as run: warpflash's FP8 kernel builds
# (build-stage/libs/NAME.a, staged by hand) against FA3's FP8 (.whl: fa3-fwd 0.0.3) on the same
# inputs, the package relinked on each library; ncu of one build and FA3.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
export PYTHONPATH=/tmp/site
if [ -n "${TESTS:-}" ]; then
  timeout 240 build-stage/tests/warpflash_gpu_tests --gtest_brief=1 --gtest_filter='Fp8*:*Quantiz*:BlockScales*' > $R/fp8-tests.log 2>&1
  echo "FP8 GPU tests rc=$?"; tail -n 6 $R/fp8-tests.log
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build-stage/tests/warpflash_gpu_tests --gtest_brief=1 \
      --gtest_filter="$TESTS" > $R/fp8-$tool.log 2>&1
    echo "$tool rc=$?"; tail -n 3 $R/fp8-$tool.log
  done
fi
# The package once per library (scripts/package_per_library.sh).
first=$1
scripts/package_per_library.sh $R "$@"
for name in "$@"; do ls -la /tmp/pkg-$name/warpflash/_C*.so; done
cd bench
for pass in $(seq ${PASSES:-2}); do
  for name in "$@"; do
    args_of=FP8_ARGS_$name; args=${!args_of:-${FP8_ARGS:---head-dims 64,128,256 --seqlens 1024,4096,16384 --iters 30}}
    PYTHONPATH=/tmp/pkg-$name:/tmp/site timeout 300 python3 fp8.py $args \
      > $R/fp8-$name-$pass.log 2>&1; echo "bench $name pass $pass rc=$?"
    grep -v "^#" $R/fp8-$name-$pass.log | awk 'NF>3' | head -40
  done
done
if [ "${PROFILE:-1}" = 1 ]; then
  NCU="ncu --clock-control none --kernel-name-base demangled --kernel-name regex:forward_kernel|FlashAttnFwd --launch-skip 3 --launch-count 1"
  for d in 128 256; do
    for impl in warpflash fa3; do
      PYTHONPATH=/tmp/pkg-${PROFILE_LIB:-$first}:/tmp/site timeout 150 $NCU --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats --section Occupancy \
        -o $R/ncu-$impl-d$d -f python3 fp8_profile.py $impl $d 0 16384 > $R/ncu-$impl-d$d.log 2>&1
      echo "ncu $impl d$d rc=$?"
      ncu --import $R/ncu-$impl-d$d.ncu-rep --print-details all > $R/ncu-$impl-d$d.txt 2>&1
      ncu --import $R/ncu-$impl-d$d.ncu-rep --page source --csv --print-source sass > $R/ncu-$impl-d$d-sass.csv 2>&1
      grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Function Name" $R/ncu-$impl-d$d.txt | head -10
    done
  done
  rm -f $R/*.ncu-rep
fi
ls -la $R | head -40
tar czf $OUT/results.tgz -C $R . && rm -rf $R
