#!/usr/bin/env bash
# Call 5 (carry build-carry/s41b.txz and FA3's wheel): the BF16 paper grid and Llama-3-8B
# on M (main's forward kernels: the CI library of 612ad2e) with FA3 and cuDNN beside, one
# pass: where issue 19 stands on the H200 (its first H200 grid since the thirty-fifth session).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r5; mkdir -p $R
save() { tar czf $OUT/r5.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
if [ ! -d /tmp/pkg-M ]; then
  tar xJf build-carry/s41b.txz
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
  scripts/package_per_library.sh $R M > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
fi
for hd in 64 128 192 256; do
  (cd bench && PYTHONPATH=/tmp/pkg-M:/tmp/site timeout 150 python3 benchmark.py --impls warpflash,fa3,cudnn \
    --workloads paper --dtypes bf16 --head-dims $hd --seqlens 1024,2048,4096,8192,16384 --iters 30 --warmup 5 --repeats 3 \
    --commit M --csv $R/grid-d$hd.csv > $R/grid-d$hd.log 2>&1); echo "d$hd rc=$? at ${SECONDS}s"; save
done
(cd bench && PYTHONPATH=/tmp/pkg-M:/tmp/site timeout 90 python3 benchmark.py --impls warpflash,fa3,cudnn \
  --workloads llama --dtypes bf16,fp16 --iters 30 --warmup 5 --repeats 3 --commit M --csv $R/llama.csv > $R/llama.log 2>&1); echo "llama rc=$? at ${SECONDS}s"
save
