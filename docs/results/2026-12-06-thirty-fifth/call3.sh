#!/usr/bin/env bash
# Call 3 (carry build-carry/stage-testsn.txz, stage-nslot.txz): the forward's GPU tests (16-bit,
# FP8, features, edge cases) on the landing candidate: N64 or N256 (argument), main's
# kernels with fp8-d256-long.patch and the slot that call 12 picked; memcheck and racecheck
# on FP8 d = 256's long tiles and the freed plain loop's problems.
set -uo pipefail
lib=${1:?N64 or N256}
export TESTS_LIB=$lib
printf -v TEST_FILTER_$lib '%s' 'Shapes/ForwardGpuTest.*:Features/ForwardFeaturesGpuTest.*:Fp8/Fp8ForwardGpuTest.*:ForwardGpuEdgeCases.*:Fp8ForwardValidation.*'
export TEST_FILTER_$lib
export SANITIZE='*/e4m3_d256_long_keys_varlen_causal:*/e4m3_d256_long_keys_window_causal'
bash docs/results/2026-12-05-thirty-third/round.sh
