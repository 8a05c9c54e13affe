#!/usr/bin/env bash
# Call B: wheel part 1 to /tmp; a third timing pass (base / exp3, interleaved).
S=build-stage; mkdir -p /tmp/whl && cp .whl-a/* /tmp/whl/
bench() { timeout 60 $1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 "${@:2}" | grep -E '^bf16'; }
for b in base exp3; do echo "== $b"; bench $S/$b --head-dims 64,128 --seqlens 1024,2048,4096,8192,16384; done 2>&1 | tee $OUT/timing-b.log
ls -la /tmp/whl
