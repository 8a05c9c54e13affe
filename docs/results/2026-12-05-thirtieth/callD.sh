#!/usr/bin/env bash
# Call D: FlashAttention-4 installed; the package on exp3's library; bench/backward.py against FA4 and cuDNN.
set -uo pipefail
cp .whl-c/*.whl /tmp/whl/ && cat /tmp/whl/cu13.part00 .whl-a/cu13.part00 2>/dev/null | head -c 0
cat /tmp/whl/cu13.part00 /tmp/whl/cu13.part01 .whl-c/cu13.part02 > /tmp/whl/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl && rm /tmp/whl/cu13.part*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/whl/*.whl > $OUT/pip-fa4.log 2>&1; echo "fa4 install rc=$?"; tail -3 $OUT/pip-fa4.log
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/python_packages:/tmp/site/nvidia_cutlass_dsl/dsl_packages
ls /tmp/site/nvidia_cutlass_dsl 2>/dev/null | head
WARPFLASH_PREBUILT_LIB=$PWD/build-lib/libwarpflash.a python3 -m pip install --no-build-isolation --no-deps -q . > $OUT/pip-warpflash.log 2>&1; echo "warpflash install rc=$?"; tail -3 $OUT/pip-warpflash.log
python3 -c "from flash_attn.cute import interface; print('fa4 ok')" 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 420 python3 bench/backward.py --head-dims 64,128 --dtypes bf16 --deterministic --repeats 2 2>&1 | tee $OUT/backward-py.log
(cd tests/python && timeout 240 python3 -m pytest -q -ra -x test_backward.py > $OUT/pytest-backward.log 2>&1); echo "pytest backward rc=$?"; tail -n 4 $OUT/pytest-backward.log
