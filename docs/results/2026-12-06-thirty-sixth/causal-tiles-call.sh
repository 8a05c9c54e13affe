#!/usr/bin/env bash
# Call 7 of the thirty-sixth session: causal d = 128 at 8k-16k keys on the default 128 x 128
# tiles instead of the long 128 x 160 ones (FA3 runs 128 x 128 for causal): L16 = causal
# takes the long tiles from 16k keys, LD = never; C2 = main (from 8k). The dispatch only
# (api/forward.cpp.o and validate.cpp.o rebuilt). bench/benchmark.py with FA3, BF16, causal
# d 128 8k / 16k and Llama-3-8B 4k / 8k, the libraries in turn, PASSES passes; CSVs to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
tar xJf build-carry/stage-l36.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > /dev/null 2>&1
mkdir -p /tmp/logs; scripts/package_per_library.sh /tmp/logs C2 L16 LD
for pass in $(seq ${PASSES:-2}); do
  for n in C2 L16 LD; do
    (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 60 python3 benchmark.py --impls warpflash,fa3 --dtypes bf16 \
      --head-dims 128 --causal 1 --seqlens 8192,16384 --iters 50 --warmup 5 --repeats 3 --commit $n \
      --csv $OUT/bench-$n-$pass.csv > /dev/null 2>&1)
    echo "$n pass $pass rc=$?"; grep -h warpflash $OUT/bench-$n-$pass.csv | cut -d, -f4,5,9,11 | tr '\n' ' '; echo
  done
done
