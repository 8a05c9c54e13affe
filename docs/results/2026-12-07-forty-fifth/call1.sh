#!/usr/bin/env bash
# Call 1 (carry build-carry/s45a.txz): the forty-fourth's staged experiments, rebuilt.
#   LM: main's kernels (backward d = 64: one dQ buffer, every 4th exponential on the FMA pipe)
#   LQ: LM with two dQ buffers at d = 64 (backward)
#   LA: LQ with every 3rd at d = 64 (backward), every 4th at d = 128 (backward); forward
#       d = 64 every 4th (both instances); e4m3 d = 64 every 4th, e4m3 d = 128 every 4th
#   LB: LQ with every 2nd at d = 64 and d = 128 (backward); forward d = 64 every 3rd;
#       e4m3 d = 64 every 2nd, e4m3 d = 128 every 3rd
# Timing of the C++ benchmark in rotating order (two passes), then LQ's backward GPU tests
# (BF16 and FP16 d = 64 and 128 with two dQ buffers) and memcheck / racecheck on d = 64 cases.
set -uo pipefail
R=/tmp/r1; mkdir -p $R
save() { tar czf $OUT/r1.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s45a.txz
S=build-stage
bwd() { timeout 60 $S/$1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 20 --warmup 5 --head-dims 64,128 --seqlens 1024,4096,16384 | grep -E '^bf16'; }
fwd() { timeout 60 $S/$1/bench/warpflash_bench --dtypes bf16 --causal both --iters 50 --warmup 10 --head-dims 64 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for b in LM LA LB; do echo "== $b pass 1"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass 1 at ${SECONDS}s"; save
for b in LM LQ LA LB; do echo "== $b pass 1"; bwd $b; done >> $R/bwd.log 2>&1; echo "bwd pass 1 at ${SECONDS}s"; save
for b in LB LA LM; do echo "== $b pass 2"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass 2 at ${SECONDS}s"; save
for b in LB LA LQ LM; do echo "== $b pass 2"; bwd $b; done >> $R/bwd.log 2>&1; echo "bwd pass 2 at ${SECONDS}s"; save
T=$S/LQ/tests/warpflash_gpu_tests
timeout 300 $T --gtest_brief=1 --gtest_filter='Prepost/*:Backward*' > $R/LQ-backward-tests.log 2>&1
echo "LQ backward tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED)" $R/LQ-backward-tests.log | head; save
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d64_causal_window:Backward/*fp16_d64_gqa_causal:Backward/*bf16_d64_deterministic_gqa_causal' > $R/LQ-$tool.log 2>&1
  echo "LQ $tool rc=$? at ${SECONDS}s"; tail -n 2 $R/LQ-$tool.log; save
done
echo "done at ${SECONDS}s"
