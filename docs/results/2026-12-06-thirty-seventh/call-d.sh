#!/usr/bin/env bash
# Thirty-seventh session, call D: the row max as four partial maxima (T: softmax.h; main's
# library with the BF16 d = 128 objects rebuilt) against main (M = N, the CI build of d0d3b23).
# bench/benchmark.py with FA3 in every run (BF16, d 128, 2k-16k, causal and not, Llama-3-8B
# 4k / 8k; CUDA events, three turns per configuration), the libraries in turn, PASSES passes.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/stage-39.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R ${LIBS:-M T}
for pass in $(seq ${PASSES:-2}); do
  [ $SECONDS -gt 230 ] && { echo "no time for pass $pass"; break; }
  for n in ${LIBS:-M T}; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 100 python3 benchmark.py --impls warpflash,fa3 \
      --dtypes ${DTYPES:-bf16} --head-dims 128 --seqlens 2048,4096,8192,16384 --iters 50 --warmup 5 --repeats 3 \
      --commit $n --csv $R/bench-$n-$pass.csv > $R/bench-$n-$pass.log 2>&1)
    echo "$n pass $pass rc=$?"
  done
done
python3 - "$R" ${LIBS:-M T} <<'PY'
import csv, glob, sys, collections, statistics
R, libs = sys.argv[1], sys.argv[2:]
vals = collections.defaultdict(list)
for lib in libs:
    for f in sorted(glob.glob(f"{R}/bench-{lib}-*.csv")):
        for row in csv.DictReader(open(f)):
            key = (row["dtype"], row["head_dim"], row["causal"], row["seqlen"], row["workload"])
            name = lib if row["impl"] == "warpflash" else f"fa3@{lib}"
            vals[key, name].append(float(row["tflops"]))
keys = sorted({k for k, _ in vals}, key=lambda k: (k[4], int(k[1]), k[2], int(k[3])))
names = libs + [f"fa3@{l}" for l in libs]
print("point | " + " | ".join(names))
for k in keys:
    print(" ".join(k) + " | " + " | ".join("/".join(f"{x:.0f}" for x in vals.get((k, n), [])) for n in names))
PY
tar czf $OUT/timing.tgz -C $R . && rm -rf $R
