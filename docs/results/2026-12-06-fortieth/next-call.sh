#!/usr/bin/env bash
# Prepared for the next session (carry build-carry/next41.txz and FA3's wheel in .whl/):
# N.a = main's CI library before the causal sections (2ffe143's kernels, the thirty-ninth
# session's build), M.a = the CI library of 612ad2e (the sections; SASS-identical to
# cb9344d's, timed in call C). If build-carry/ is gone: M = `.ci/run` on main, N = the same
# on f53bb2f.
# 1. BF16 d = 128 causal 2k / 4k / 8k: N and M in turn, four passes, FA3 and cuDNN beside
#    (call C read 4k at 0.950x over two passes while FA3 moved 607-660 between runs);
# 2. the BF16 paper grid and Llama-3-8B on M with FA3 and cuDNN, one pass (on the H200 if
#    it comes: the first since the thirty-fifth session).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rn; mkdir -p $R
save() { tar czf $OUT/n.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
tar xJf build-carry/next41.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R M N > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"
bench() {  # bench LIB TAG ARGS...
  local n=$1 tag=$2; shift 2
  (cd bench && PYTHONPATH=/tmp/pkg-$n:/tmp/site timeout 90 python3 benchmark.py --impls warpflash,fa3,cudnn \
    "$@" --iters 50 --warmup 5 --repeats 3 --commit $n --csv $R/$tag-$n-$pass.csv > $R/$tag-$n-$pass.log 2>&1)
  echo "$n $tag pass $pass rc=$? at ${SECONDS}s"
}
for pass in 1 2 3 4; do
  if [ $((pass % 2)) = 1 ]; then order="N M"; else order="M N"; fi
  for n in $order; do bench $n d128 --workloads paper --dtypes bf16 --head-dims 128 --seqlens 2048,4096,8192 --causal 1; done
  save
done
pass=grid; bench M grid --workloads paper,llama --dtypes bf16 --head-dims 64,128,192,256 --seqlens 1024,2048,4096,8192,16384
save
echo "done at ${SECONDS}s"
