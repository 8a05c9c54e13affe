#!/usr/bin/env bash
# Call 3 (carry build-carry/s41b.txz and FA3's wheel in .whl/): the forward's BF16 d = 128
# causal 2k / 4k / 8k, main before the L2 sections (N) and after (M) in turn, two passes,
# FA3 and cuDNN beside (the fortieth session read 4k at 0.950x while FA3 moved 607-660); then
# bench/backward.py on B (the linear mask) against cuDNN.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r3; mkdir -p $R
save() { tar czf $OUT/r3.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s41b.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M N B > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 90 python3 benchmark.py --impls warpflash,fa3,cudnn \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in 1 2; do
  if [ $pass = 1 ]; then order="N M"; else order="M N"; fi
  for n in $order; do bench $n d128 --workloads paper --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192 --causal 1; done
  save
done
(PYTHONPATH=/tmp/pkg-B timeout 240 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --repeats 2 > $R/backward-py-B.log 2>&1); echo "backward.py rc=$? at ${SECONDS}s"
tail -n 30 $R/backward-py-B.log
save
echo "done at ${SECONDS}s"
