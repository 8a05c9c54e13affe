#!/usr/bin/env bash
# Call 1 (carry build-carry/s43a.txz: main's library D.a, D's GPU tests and benchmark and the
# forty-second's pre-change benchmark M; build-carry/s43x.txz: X, main with the d = 64 BF16
# backward object of the ds-stages branch (two dS tiles, one consumer barrier a tile, dS stored
# before the dV GEMM is issued; P converted after dS), its GPU tests and benchmark, and X1
# (the same with P converted under the dP GEMM), its benchmark):
# the backward's GPU tests of D and X on the H200, memcheck / racecheck, the C++ backward
# benchmark M / D / X / X1 in rotating order (X's and X1's d = 128 are D's: a noise control),
# the package on D.a and bench/backward.py against cuDNN. Results saved step by step.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r1; mkdir -p $R
save() { tar czf $OUT/r1.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s43a.txz; tar xJf build-carry/s43x.txz
S=build-stage
for b in D X; do
  GTEST_FILTER='Prepost/*:Backward*' GPU_TEST_SHARDS=8 TEST_TIMEOUT=200 scripts/gpu_tests.sh $S/$b $R/tests-$b.log; echo "$b backward tests rc=$? at ${SECONDS}s"
  grep -E "^\[  FAILED" $R/tests-$b.log | sed -E 's/, where.*//' | head -12; save
done
bench() { timeout 90 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
timing() {  # timing PASS ORDER...
  local pass=$1; shift
  for b in "$@"; do echo "== $b pass $pass"; bench $b; done >> $R/timing.log 2>&1
  echo "timing pass $pass done at ${SECONDS}s"; save
}
timing 1 M D X X1
sanitize() {  # sanitize BUILD FILTER
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $S/$1/tests/warpflash_gpu_tests --gtest_brief=1 \
      --gtest_filter="$2" > $R/$1-$tool.log 2>&1
    echo "$1 $tool rc=$? at ${SECONDS}s"; tail -n 2 $R/$1-$tool.log; save
  done
}
sanitize D 'Backward/*bf16_d64_causal_window:Backward/*bf16_d128_chunk_causal:Backward/*fp16_d96_window_right_only:Prepost/*bf16_d128*'
sanitize X 'Backward/*bf16_d64_causal_window:Backward/*bf16_d64_gqa_causal:Backward/*bf16_d64_softcap:Backward/*bf16_d64_deterministic_gqa_causal'
timing 2 X1 X D M
scripts/package_per_library.sh $R D > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
(PYTHONPATH=/tmp/pkg-D timeout 200 python3 bench/backward.py --head-dims 64,128,256 --dtypes bf16 --deterministic --repeats 2 --no-llama > $R/backward-py-cudnn.log 2>&1); echo "backward.py rc=$? at ${SECONDS}s"
cat $R/backward-py-cudnn.log; save
timing 3 D X M X1
echo "done at ${SECONDS}s"
