#!/usr/bin/env bash
# Call 5 of the thirty-sixth session: FP8 block scales' K/V head by FastDivmod (F) against
# main (C2). F's FP8 GPU tests and memcheck / racecheck on two block-scale cases, then
# bench/fp8.py (no peers installed: warpflash FP8, FP8 with block scales, flash_attn_fp8_func,
# BF16) per library, in turn, PASSES passes.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$OUT/f; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage-f36.txz
bin=build-stage/tests/gpu_tests_F
timeout 150 $bin --gtest_brief=1 --gtest_filter='Fp8*' > $R/tests-F.log 2>&1; echo "tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' $R/tests-F.log
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 \
    --gtest_filter='*/e4m3_d128_block_scales_gqa:*/e4m3_d64_block_scales_with_descales_window' > $R/$tool-F.log 2>&1
  echo "$tool rc=$?"; tail -n 2 $R/$tool-F.log
done
scripts/package_per_library.sh $R C2 F
for pass in $(seq ${PASSES:-2}); do
  for n in C2 F; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n timeout 120 python3 fp8.py --head-dims 64,128,256 --seqlens 1024,4096,16384 \
      --iters 30 > $R/fp8-$n-$pass.log 2>&1); echo "$n pass $pass rc=$?"
  done
done
for n in C2 F; do echo "== $n"; grep -h '^| [0-9]' $R/fp8-$n-*.log | awk -F'|' 'NF>10 {print $2,$3,$4,"|",$5,"|",$10,$11,"|",$12}' | sort -s -k1,1n -k2,2n -k3,3n; done
tar czf $OUT/fp8.tgz -C $R . && rm -rf $R
