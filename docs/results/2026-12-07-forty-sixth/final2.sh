#!/usr/bin/env bash
# final call 2: d = 192 against FA3 and cuDNN, the Python benchmark, the final library.
set -u
cd "$(dirname "$0")/.."
R=/tmp/peers2; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R final192 > $R/package.log 2>&1; echo "package rc=$?"
cd bench && PYTHONPATH=/tmp/pkg-final192:/tmp/site3 timeout 200 python3 benchmark.py --workloads paper --impls warpflash,fa3,cudnn --dtypes bf16 --head-dims 192 \
  --seqlens 512,1024,2048,4096,8192,16384 --causal both --repeats 3 --csv $R/peers-final.csv > $R/peers-final.log 2>&1; echo "bench rc=$?"
grep -A20 "^workload" $R/peers-final.log
cp $R/*.log $R/*.csv $OUT/ 2>/dev/null
