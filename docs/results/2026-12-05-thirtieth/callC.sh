#!/usr/bin/env bash
# Call C: wheel part 2 to /tmp; deterministic and softcap timing (base / exp3).
S=build-stage; mkdir -p /tmp/whl && cp .whl-b/* /tmp/whl/
bench() { timeout 60 $1/bench/warpflash_bench --backward --dtypes bf16 --causal both --iters 30 --warmup 5 "${@:2}" | grep -E '^bf16'; }
for b in base exp3; do echo "== $b deterministic"; bench $S/$b --head-dims 64,128 --seqlens 1024,8192 --deterministic; echo "== $b softcap 30"; bench $S/$b --head-dims 64,128 --seqlens 1024,8192 --softcap 30; done 2>&1 | tee $OUT/timing-c.log
ls -la /tmp/whl
