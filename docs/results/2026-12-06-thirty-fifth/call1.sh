#!/usr/bin/env bash
# Call 1 (carry build-carry/stage-tests-c.txz): every GPU test of main's kernels (the CI
# clone's build of 8ec5304's code, library C), memcheck and racecheck on FP8 cases of the
# landed kernels (the long-key ones at d = 256 on its 128 x 64 tiles among them).
set -uo pipefail
TESTS_LIB=C \
SANITIZE='*/e4m3_d64_varlen_causal:*/e4m3_d128_window_causal:*/e4m3_d256_block_scales_with_descales_window:*/e4m3_d256_long_keys_causal_gqa:*/e4m3_d128_long_keys_varlen_causal' \
  bash docs/results/2026-12-05-thirty-third/round.sh
