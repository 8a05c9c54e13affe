#!/usr/bin/env bash
# Call B of the thirty-eighth session (carry build-carry/stage38b.txz and FA3's wheel): call
# A's winner H2 (both rows' maxima, row 0's exponentials, the PV wait, row 1's) against two
# finer splits of the exponentials around the PV wait, FA3's place being after ~14 of 66:
#   H3 the first quarter of P's elements (row 0's first half of columns) before the wait;
#   H4 the first eighth.
# Both with the sums scaled by the correction in update_max and the exponentials in
# row-major element ranges (softmax.h's exponentiate<kBegin, kEnd>). Subset builds
# (BF16 d = 128) of main f0bbf5e + the patch. Three passes, the libraries in turn, FA3 beside.
# Prediction: within +-2% of H2 (the wait then sits earlier; P's packing of row 0's first
# columns still follows it), a gain only if H2's wait still stalls (PV not yet done).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rb; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage38b.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M H2 H3 H4
for pass in 1 2 3; do
  [ $SECONDS -gt 330 ] && { echo "no time for pass $pass"; break; }
  for n in M H2 H3 H4; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 100 python3 benchmark.py --impls warpflash,fa3 \
      --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192,16384 --iters 50 --warmup 5 --repeats 3 \
      --commit $n --csv $R/bench-$n-$pass.csv > $R/bench-$n-$pass.log 2>&1)
    echo "$n pass $pass rc=$? at ${SECONDS}s"
  done
  tar czf $OUT/b.tgz -C $R .
done
python3 - "$R" M H2 H3 H4 <<'PY'
import csv, glob, sys, collections, statistics
R, libs = sys.argv[1], sys.argv[2:]
vals = collections.defaultdict(list)
for lib in libs:
    for f in sorted(glob.glob(f"{R}/bench-{lib}-*.csv")):
        for row in csv.DictReader(open(f)):
            key = (row["workload"], row["causal"], row["seqlen"])
            vals[key, lib if row["impl"] == "warpflash" else "fa3"].append(float(row["tflops"]))
print("point | " + " | ".join(libs) + " | fa3 | H2/M | H3/M | H4/M")
for k in sorted({k for k, _ in vals}):
    med = {n: statistics.median(vals[k, n]) for n in libs + ["fa3"] if vals.get((k, n))}
    print(" ".join(k), "|", " | ".join("/".join(f"{x:.0f}" for x in vals[k, n]) for n in libs + ["fa3"]),
          "| %.3f | %.3f | %.3f" % (med["H2"] / med["M"], med["H3"] / med["M"], med["H4"] / med["M"]))
PY
for n in H3 H4; do
  timeout 150 build-stage/tests/gpu_tests_$n --gtest_brief=1 \
    --gtest_filter='Shapes/ForwardGpuTest.*bf16_d128*:Features/ForwardFeaturesGpuTest.*bf16_d128*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*' \
    > $R/tests-$n.log 2>&1 &
done
wait
for n in H3 H4; do echo "tests $n"; grep -E '^\[  (PASSED|FAILED)' $R/tests-$n.log | head -5; done
tar czf $OUT/b.tgz -C $R .
