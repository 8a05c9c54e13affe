#!/usr/bin/env bash
# Builds what call-e.sh carries (build-carry/e39.txz), from the repository root (~35 min on
# 2 cores, no device time):
#   N  main with the softmax split (2ffe143 or later): a clean clone's CI build (.ci/run);
#   M  N's library with the nine timed kernels' objects compiled from ff39618 (main before
#      the split): BF16 d = 128 (3), 192, 256 (2), FP16 d = 128 (3);
#   N2 N's library with api/forward.cpp.o and validate.cpp.o from
#      ../2026-12-06-thirty-eighth/causal-long-tiles-from-16k.patch;
#   gpu_tests_M / gpu_tests_N: the GPU tests linked against M's and N's libraries.
# (This session ran the same steps with the patch applied to ff39618 as N.)
set -euo pipefail
root=$PWD
patches=$root/docs/results/2026-12-06-thirty-eighth
cutlass=$root/third_party/nvidia-cutlass-4.2.0.0/cutlass_library/source/include
O=src/CMakeFiles/warpflash.dir
cfg="-DCUTLASS_DIR=$cutlass -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=OFF"
./scripts/setup.sh > /dev/null
rm -rf /tmp/nx-M /tmp/nx-N /tmp/nx-N2
git clone -q "$root" /tmp/nx-N
(cd /tmp/nx-N && CCACHE_DISABLE=1 .ci/run > /tmp/nx-N.log 2>&1); tail -n 1 /tmp/nx-N.log
git clone -q "$root" /tmp/nx-M && (cd /tmp/nx-M && git checkout -q ff39618)
objs=""
for o in bf16_d128 bf16_d128_long bf16_d128_long_clustered bf16_d192 bf16_d256 bf16_d256_short fp16_d128 fp16_d128_long fp16_d128_long_clustered; do
  objs="$objs $O/instances/forward_$o.cu.o"; done
(cd /tmp/nx-M && cmake -S . -B build -G Ninja $cfg > /dev/null && CCACHE_DISABLE=1 ninja -C build $objs > /dev/null)
git clone -q "$root" /tmp/nx-N2
(cd /tmp/nx-N2 && git apply "$patches/causal-long-tiles-from-16k.patch" &&
  cmake -S . -B build -G Ninja $cfg > /dev/null && ninja -C build $O/api/forward.cpp.o $O/api/validate.cpp.o > /dev/null)
S=/tmp/nx-stage; rm -rf $S; mkdir -p $S/build-stage/libs $S/build-stage/tests
B=/tmp/nx-N/build
cp $B/src/libwarpflash.a $S/build-stage/libs/N.a
cp $B/src/libwarpflash.a $S/build-stage/libs/M.a && (cd /tmp/nx-M/build && ar r $S/build-stage/libs/M.a $objs)
cp $B/src/libwarpflash.a $S/build-stage/libs/N2.a
ar r $S/build-stage/libs/N2.a /tmp/nx-N2/build/$O/api/forward.cpp.o /tmp/nx-N2/build/$O/api/validate.cpp.o
T=$B/tests/CMakeFiles/warpflash_gpu_tests.dir/gpu
for v in M N; do
  /usr/bin/c++ -O3 -DNDEBUG $T/*.cpp.o -o $S/build-stage/tests/gpu_tests_$v -L/usr/local/cuda/targets/x86_64-linux/lib \
    $S/build-stage/libs/$v.a $B/src/libwarpflash_reference.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
    /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/lib/x86_64-linux-gnu/libgtest.a \
    -lcudadevrt -lcudart_static -lrt -lpthread -ldl
done
mkdir -p build-carry
tar cJf build-carry/e39.txz -C $S build-stage
ls -la build-carry/e39.txz
