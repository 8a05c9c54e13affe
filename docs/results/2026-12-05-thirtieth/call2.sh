#!/usr/bin/env bash
# Call 2: per-CTA timeline of the backward (trace build), per-kernel durations (ncu).
set -uo pipefail
S=build-stage; T=$S/build-trace/bench/warpflash_bench; N=$S/build/bench/warpflash_bench
nvidia-smi --query-gpu=name --format=csv,noheader
for p in "64 1024 0" "64 1024 1" "64 4096 0" "64 16384 0" "128 1024 0" "128 1024 1" "128 16384 0" "128 16384 1"; do set -- $p
  WARPFLASH_BWD_TRACE=/tmp/trace-$1-$2-$3.bin timeout 60 $T --backward --dtypes bf16 --head-dims $1 --seqlens $2 --causal $3 --iters 3 --warmup 2 > /dev/null 2>&1
  echo "== d$1 s$2 causal$3"; python3 $S/trace_analyze.py /tmp/trace-$1-$2-$3.bin
done 2>&1 | tee $OUT/trace.log
for p in "64 1024 0" "64 1024 1" "128 1024 0" "128 16384 0"; do set -- $p
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:backward \
    $N --backward --dtypes bf16 --head-dims $1 --seqlens $2 --causal $3 --iters 1 --warmup 1 > $OUT/ncu-$1-$2-$3.log 2>&1
  echo "== d$1 s$2 causal$3 (ncu, kernels serialized)"; grep -E "backward.*kernel|gpu__time_duration" $OUT/ncu-$1-$2-$3.log | sed -E 's/\(BackwardPrepostParams\).*|\(warpflash.*//; s/ +/ /g' | paste - - | tail -3
done 2>&1 | tee $OUT/ncu.log
