#!/usr/bin/env bash
# Call 7 (carry build-carry/s45c.txz): the forward softmax's row max in four independent
# chains (C4; ncu of call 6: the 32 FMNMX of a row's max are one dependent chain in front of
# its exponentials), and C4S4 (the row sum in four chains too), against F (main, e1d4562),
# libraries of one build that differ in the forward objects of d = 64 and 128 (BF16, e4m3).
# C++ benchmark (BF16 d = 64 and 128) in rotating order, three passes; the package on each
# and bench/fp8.py at d = 64 and 128; every GPU test of C4 (before FP8) and C4S4 (last).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r7; mkdir -p $R
save() { tar czf $OUT/r7.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s45c.txz
S=build-stage
fwd() { timeout 60 $S/$1/bench/warpflash_bench --dtypes bf16 --causal both --iters 40 --warmup 10 --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384 | grep -E '^bf16'; }
for pass in 1 2 3; do
  case $pass in 1) order="F C4 C4S4";; 2) order="C4S4 C4 F";; 3) order="C4 F C4S4";; esac
  for b in $order; do echo "== $b pass $pass"; fwd $b; done >> $R/fwd.log 2>&1; echo "fwd pass $pass at ${SECONDS}s"; save
done
for b in C4; do
  GPU_TEST_SHARDS=8 TEST_TIMEOUT=240 scripts/gpu_tests.sh $S/$b $R/tests-$b.log > $R/tests-$b.summary 2>&1; echo "$b tests rc=$? at ${SECONDS}s"
  grep -E "^\[  FAILED" $R/tests-$b.log | sed -E 's/, where.*//' | head -10; gzip -f $R/tests-$b.log; save
done
scripts/package_per_library.sh $R F C4 C4S4 > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; tail -3 $R/package.log
for pass in 1 2; do
  if [ $pass = 1 ]; then order="F C4 C4S4"; else order="C4S4 C4 F"; fi
  for b in $order; do
    echo "== $b pass $pass" >> $R/fp8.log
    (PYTHONPATH=/tmp/pkg-$b timeout 90 python3 bench/fp8.py --head-dims 64,128 --iters 30 >> $R/fp8.log 2>&1)
  done
  echo "fp8 pass $pass at ${SECONDS}s"; save
done
for b in C4S4; do
  GPU_TEST_SHARDS=8 TEST_TIMEOUT=240 scripts/gpu_tests.sh $S/$b $R/tests-$b.log > $R/tests-$b.summary 2>&1; echo "$b tests rc=$? at ${SECONDS}s"
  grep -E "^\[  FAILED" $R/tests-$b.log | sed -E 's/, where.*//' | head -10; gzip -f $R/tests-$b.log; save
done
echo "done at ${SECONDS}s"
