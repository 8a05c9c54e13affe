#!/usr/bin/env bash
# Call 4 (carry build-carry/s41b.txz, build-carry/p41.tar and FA3's wheel): dense causal
# d = 128 in the static order again (P = M, main's CI library with the L2 sections, with
# forward_bf16_d128{,_long}.cu.o and api/forward.cpp.o of problem.h's new rule) against M
# and N (before the sections), three passes in rotating order, FA3 beside: paper BF16
# d = 128 causal 2k-16k and Llama-3-8B 4k / 8k.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r4f; mkdir -p $R
save() { tar czf $OUT/r4.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/s41b.txz && tar xf build-carry/p41.tar -C /tmp
cp build-stage/libs/M.a build-stage/libs/P.a && ar r build-stage/libs/P.a /tmp/p41/*.o
[ -d /tmp/site/fa3_fwd ] || ls /tmp/site > /dev/null 2>&1 || true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M N P > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 90 python3 benchmark.py --impls warpflash,fa3 \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in 1 2 3; do
  case $pass in 1) order="N M P";; 2) order="P N M";; 3) order="M P N";; esac
  for n in $order; do
    bench $n d128 --workloads paper --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192,16384 --causal 1
    bench $n llama --workloads llama --dtypes bf16 --seqlens 4096,8192
  done
  save
done
echo "done at ${SECONDS}s"
