#!/usr/bin/env bash
# Call 3 (carry build-carry/s45f.txz and build-carry/cu13.partaa): F = main with the d = 128
# backward's one exponential in 4 on the FMA pipe (head dims 64 and 128, BF16, FP16, e4m3):
# every GPU test, memcheck / racecheck on d = 128 backward cases, the C++ backward timing
# next to LM (call 1's main) if call 1's files are still there; the package on F's library
# into /tmp/pkg-F; FA4's first cu13 half into /tmp for call 4.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r3; mkdir -p $R
save() { tar czf $OUT/r3.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
cp build-carry/cu13.partaa /tmp/
tar xJf build-carry/s45f.txz
S=build-stage
GPU_TEST_SHARDS=8 TEST_TIMEOUT=300 scripts/gpu_tests.sh $S/F $R/tests-F.log; echo "F tests rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED" $R/tests-F.log | sed -E 's/, where.*//' | head -20; save
T=$S/F/tests/warpflash_gpu_tests
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_brief=1 \
    --gtest_filter='Backward/*bf16_d128_causal_more_queries:Backward/*fp16_d128_gqa_causal:Backward/*bf16_d128_causal_window' > $R/F-$tool.log 2>&1
  echo "F $tool rc=$? at ${SECONDS}s"; tail -n 2 $R/F-$tool.log; save
done
mkdir -p build-stage/libs; cp $S/F/src/libwarpflash.a build-stage/libs/F.a
scripts/package_per_library.sh $R F > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
bwd() { timeout 60 $S/$1/bench/warpflash_bench --backward --dtypes bf16,fp16 --causal both --iters 20 --warmup 5 --head-dims 128 --seqlens 1024,4096,16384 | grep -E '^(bf16|fp16)'; }
for b in F; do echo "== $b"; bwd $b; done >> $R/bwd.log 2>&1; cat $R/bwd.log; save
echo "done at ${SECONDS}s"
