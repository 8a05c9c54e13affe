#!/usr/bin/env bash
# Call 1 of the thirty-sixth session: the full GPU suite on main's kernels (gpu_tests_C2, the
# CI clone's build of cd95cd6 = SASS of main), 4 shards, then memcheck and racecheck on FP8 cases.
set -uo pipefail
TESTS_LIB=C2 bash docs/results/2026-12-05-thirty-third/round.sh
bin=build-stage/tests/gpu_tests_C2
f='*/e4m3_d64_varlen_causal:*/e4m3_d128_window_causal:*/e4m3_d256_block_scales_with_descales_window:*/e4m3_d128_mid_keys_causal_gqa'
for tool in memcheck racecheck; do
  timeout 140 compute-sanitizer --tool $tool --error-exitcode 9 $bin --gtest_brief=1 --gtest_filter="$f" > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; tail -n 3 $OUT/$tool.log
done
