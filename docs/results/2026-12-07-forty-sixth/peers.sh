#!/usr/bin/env bash
# d = 192 against FA3 (fa3-fwd 0.0.3) and cuDNN in one run, the Python benchmark, with the
# new epilogue (this session's library, BF16 d = 192 only).
set -u
cd "$(dirname "$0")/.."
R=/tmp/peers; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R new192 > $R/package.log 2>&1; echo "package rc=$?"; tail -3 $R/package.log
cd bench && PYTHONPATH=/tmp/pkg-new192:/tmp/site3 timeout 420 python3 benchmark.py --impls warpflash,fa3,cudnn --dtypes bf16 --head-dims 192 \
  --seqlens 512,1024,2048,4096,8192,16384 --causal both --repeats 3 --csv $R/peers-d192.csv > $R/peers-d192.log 2>&1; echo "bench rc=$?"
tail -40 $R/peers-d192.log
cp $R/*.log $R/*.csv $OUT/ 2>/dev/null
