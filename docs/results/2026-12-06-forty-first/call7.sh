#!/usr/bin/env bash
# Call 7 (carry build-carry/s41b.txz, build-carry/q41.tar and FA3's wheel): BF16 d = 192
# with a plain loop (Q = M with forward_bf16_d192.cu.o compiled for both loops, manifest
# `192 192 kDefault both`, and api/forward.cpp.o's table) against M (the general loop only),
# two passes in turn, FA3 beside: is the general loop's size what d = 192's short problems
# pay (call 6: 3-6x FA3's "no instruction" stalls)? An experiment: a plain d = 192 kernel
# has no slot in the 48-kernel budget.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r7; mkdir -p $R
save() { tar czf $OUT/r7.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s41b.txz && tar xf build-carry/q41.tar -C /tmp
cp build-stage/libs/M.a build-stage/libs/Q.a && ar r build-stage/libs/Q.a /tmp/q41/*.o
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M Q > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 90 python3 benchmark.py --impls warpflash,fa3 \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in ${PASSES:-1 2}; do
  if [ $pass = 1 ]; then order="M Q"; else order="Q M"; fi
  for n in $order; do bench $n d192 --workloads paper --dtypes bf16 --head-dims 192 --seqlens 1024,2048,4096,8192; done
  save
done
echo "done at ${SECONDS}s"
