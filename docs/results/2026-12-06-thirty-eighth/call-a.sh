#!/usr/bin/env bash
# Call A of the thirty-eighth session (carry build-carry/stage38.txz and FA3's wheel): the
# experiment the thirty-seventh prepared (its next-call.sh), on subset builds
# (WARPFLASH_HEAD_DIMS=128, WARPFLASH_DTYPES=bf16) of main f0bbf5e and the three patches
# of docs/results/2026-12-06-thirty-seventh/. Issue 19, from the per-instruction
# stall samples (docs/perf-notes.md, thirty-seventh section, 2c): ours packs all of P
# (40 F2FP) after the PV wait at the loop's end; FA3 waits for PV after ~14 of its 66
# exponentials and packs P beside the rest. Libraries:
#   M  main;
#   H  the PV wait between the rows: row 0's max and exponentials, the wait, row 1's
#      (pv-wait-between-rows.patch);
#   H2 both rows' maxima, row 0's exponentials, the wait, row 1's (pv-wait-after-row0-exps.patch);
#   D  causal problems in the dynamic tile order (the general loop's atomic counter, now also
#      in the plain loop; api/forward.cpp.o replaced too: a 16-byte workspace for every
#      causal call, zeroed by a cudaMemsetAsync) (dynamic-causal-order.patch).
# Prediction: H / H2 +2-5% at causal d = 128 4k-16k if P's packing sits on the path to the
# next S issue, nothing if the other warpgroup's GEMMs hide it; D +1-2% at causal 4k / 8k
# (the idle tail, 3.1-3.5% against FA3's 1.0-1.5%), less the memset's ~2 us.
# Then the BF16 d = 128 forward GPU tests of H, H2 and D.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rn; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage38.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M H H2 D
for pass in 1 2; do
  [ $SECONDS -gt 300 ] && { echo "no time for pass $pass"; break; }
  for n in M H H2 D; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 100 python3 benchmark.py --impls warpflash,fa3 \
      --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192,16384 --iters 50 --warmup 5 --repeats 3 \
      --commit $n --csv $R/bench-$n-$pass.csv > $R/bench-$n-$pass.log 2>&1)
    echo "$n pass $pass rc=$? at ${SECONDS}s"
  done
  tar czf $OUT/next.tgz -C $R .
done
python3 - "$R" M H H2 D <<'PY'
import csv, glob, sys, collections, statistics
R, libs = sys.argv[1], sys.argv[2:]
vals = collections.defaultdict(list)
for lib in libs:
    for f in sorted(glob.glob(f"{R}/bench-{lib}-*.csv")):
        for row in csv.DictReader(open(f)):
            key = (row["workload"], row["causal"], row["seqlen"])
            vals[key, lib if row["impl"] == "warpflash" else "fa3"].append(float(row["tflops"]))
print("point | " + " | ".join(libs) + " | fa3 | H/M | H2/M | D/M")
for k in sorted({k for k, _ in vals}):
    med = {n: statistics.median(vals[k, n]) for n in libs + ["fa3"] if vals.get((k, n))}
    print(" ".join(k), "|", " | ".join("/".join(f"{x:.0f}" for x in vals[k, n]) for n in libs + ["fa3"]),
          "| %.3f | %.3f | %.3f" % (med["H"] / med["M"], med["H2"] / med["M"], med["D"] / med["M"]))
PY
for n in M H H2 D; do
  timeout 150 build-stage/tests/gpu_tests_$n --gtest_brief=1 \
    --gtest_filter='Shapes/ForwardGpuTest.*bf16_d128*:Features/ForwardFeaturesGpuTest.*bf16_d128*:ForwardGpuEdgeCases.*:ForwardRepeatGpu.*' \
    > $R/tests-$n.log 2>&1 &
done
wait
for n in H H2 D; do echo "tests $n"; grep -E '^\[  (PASSED|FAILED)' $R/tests-$n.log | head -5; done
tar czf $OUT/next.tgz -C $R .
