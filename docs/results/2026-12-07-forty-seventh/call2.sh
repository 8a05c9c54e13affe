#!/usr/bin/env bash
# call 2: d = 192 / 128 in 16-byte rows (library rows, branch d192v128-rows) against main's
# library (final192) and FA3 (fa3-fwd 0.0.3) in bench/features.py, libraries alternated;
# d = 192 (the landed kernel, the same in both) against FA3 and cuDNN in one run.
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
(cd build-stage && tar xJf pack/bins.tar.xz libs)
R=/tmp/peers; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site3 build-stage/fa3/fa3_fwd-*.whl > $R/pip.log 2>&1
scripts/package_per_library.sh $R rows final192 > $R/package.log 2>&1; echo "package rc=$?"; tail -3 $R/package.log
cd bench
for rep in 1 2; do for lib in final192 rows; do
  echo "== features $lib rep $rep"
  PYTHONPATH=/tmp/pkg-$lib:/tmp/site3 timeout 120 python3 features.py --sections headdims --headdims 192/128 \
    --headdim-seqlens 512,1024,2048,4096,8192,16384 --repeats 2 --csv $R/v128-$lib-$rep.csv > $R/v128-$lib-$rep.log 2>&1
  grep -E "headdims" $R/v128-$lib-$rep.log | head -14
done; done
PYTHONPATH=/tmp/pkg-rows:/tmp/site3 timeout 200 python3 benchmark.py --impls warpflash,fa3,cudnn --dtypes bf16 --head-dims 192 \
  --seqlens 512,1024,2048,4096,8192,16384 --causal both --repeats 3 --csv $R/peers-d192.csv > $R/peers-d192.log 2>&1; echo "bench rc=$?"
grep -A16 "^workload" $R/peers-d192.log | head -20
cd $R && tar czf $OUT/call2-logs.tgz *.log *.csv
