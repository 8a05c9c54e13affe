#!/usr/bin/env bash
# Call 4, right after call 3 on the same warm machine (carry build-carry/cu13.partab and
# build-carry/fa4w/: FA4 4.0.0b36 and its other wheels): bench/backward.py on F's package
# (/tmp/pkg-F) against cuDNN and FA4, d = 64 and 128, BF16, three interleaved repeats.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r4; mkdir -p $R
save() { tar czf $OUT/r4.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
[ -d /tmp/pkg-F ] && [ -f /tmp/cu13.partaa ] || { echo "not the warm machine of call 3"; ls /tmp; exit 3; }
mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build-carry/fa4w/*.whl > $R/pip.log 2>&1; echo "pip rc=$?"
cat /tmp/cu13.partaa build-carry/cu13.partab | tar xJf - -C /tmp/site || { echo "cu13 unpack failed"; exit 4; }
export PYTHONPATH=/tmp/pkg-F:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
python3 -c "from flash_attn.cute import interface; print('fa4 ok')" > $R/fa4-import.log 2>&1; tail -3 $R/fa4-import.log
(timeout 420 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --repeats 3 2>&1 | grep -v Warning | grep -v exe_args > $R/backward-py-fa4.log); echo "backward.py rc=$? at ${SECONDS}s"
cat $R/backward-py-fa4.log; save
