#!/usr/bin/env bash
# Builds what call-c.sh and call-d.sh carry, from a checkout of main (run from the
# repository root; ~50 min on 2 cores, no device time):
#   M  main's CI build (a clean clone, .ci/run);
#   N  the same with split-softmax-around-pv-wait.patch applied (its CI is the landing CI);
#   N2 N's library with api/forward.cpp.o and validate.cpp.o from causal-long-tiles-from-16k.patch;
#   E  N's library with forward_bf16_d64.cu.o from d64-split.patch (on top of the split).
# Writes build-carry/stage38c.txz (M, N, N2, gpu_tests_N) and build-carry/stage38d.txz
# (N, E, gpu_tests_E).
set -euo pipefail
here=docs/results/2026-12-06-thirty-eighth
root=$PWD
cutlass=$root/third_party/nvidia-cutlass-4.2.0.0/cutlass_library/source/include
./scripts/setup.sh > /dev/null
rm -rf /tmp/nx-M /tmp/nx-N /tmp/nx-N2 /tmp/nx-E
git clone -q "$root" /tmp/nx-M
git clone -q "$root" /tmp/nx-N && (cd /tmp/nx-N && git apply "$root/$here/split-softmax-around-pv-wait.patch")
(cd /tmp/nx-M && CCACHE_DISABLE=1 .ci/run > /tmp/nx-M.log 2>&1)
(cd /tmp/nx-N && CCACHE_DISABLE=1 .ci/run > /tmp/nx-N.log 2>&1)
tail -n 1 /tmp/nx-M.log /tmp/nx-N.log
# N2 and E: worktrees of N's tree with one more patch, only the objects they change.
for v in N2 E; do
  git clone -q "$root" /tmp/nx-$v
  (cd /tmp/nx-$v && git apply "$root/$here/split-softmax-around-pv-wait.patch")
done
(cd /tmp/nx-N2 && git apply "$root/$here/causal-long-tiles-from-16k.patch" &&
  cmake -S . -B build -G Ninja -DCUTLASS_DIR=$cutlass -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=OFF > /dev/null &&
  ninja -C build src/CMakeFiles/warpflash.dir/api/forward.cpp.o src/CMakeFiles/warpflash.dir/api/validate.cpp.o > /dev/null)
(cd /tmp/nx-E && git apply "$root/$here/d64-split.patch" &&
  cmake -S . -B build -G Ninja -DCUTLASS_DIR=$cutlass -DWARPFLASH_HEAD_DIMS=64 -DWARPFLASH_DTYPES=bf16 \
    -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=OFF > /dev/null &&
  CCACHE_DISABLE=1 ninja -C build src/CMakeFiles/warpflash.dir/instances/forward_bf16_d64.cu.o > /dev/null)
S=/tmp/nx-stage; rm -rf $S; mkdir -p $S/c/build-stage/libs $S/c/build-stage/tests $S/d/build-stage/libs $S/d/build-stage/tests
B=/tmp/nx-N/build
cp /tmp/nx-M/build/src/libwarpflash.a $S/c/build-stage/libs/M.a
cp $B/src/libwarpflash.a $S/c/build-stage/libs/N.a
cp $B/src/libwarpflash.a $S/c/build-stage/libs/N2.a
ar r $S/c/build-stage/libs/N2.a /tmp/nx-N2/build/src/CMakeFiles/warpflash.dir/api/forward.cpp.o \
  /tmp/nx-N2/build/src/CMakeFiles/warpflash.dir/api/validate.cpp.o
cp $B/tests/warpflash_gpu_tests $S/c/build-stage/tests/gpu_tests_N
cp $B/src/libwarpflash.a $S/d/build-stage/libs/N.a
cp $B/src/libwarpflash.a $S/d/build-stage/libs/E.a
ar r $S/d/build-stage/libs/E.a /tmp/nx-E/build/src/CMakeFiles/warpflash.dir/instances/forward_bf16_d64.cu.o
T=$B/tests/CMakeFiles/warpflash_gpu_tests.dir/gpu
/usr/bin/c++ -O3 -DNDEBUG $T/*.cpp.o -o $S/d/build-stage/tests/gpu_tests_E -L/usr/local/cuda/targets/x86_64-linux/lib \
  $S/d/build-stage/libs/E.a $B/src/libwarpflash_reference.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
  /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/lib/x86_64-linux-gnu/libgtest.a \
  -lcudadevrt -lcudart_static -lrt -lpthread -ldl
mkdir -p build-carry
tar cJf build-carry/stage38c.txz -C $S/c build-stage
tar cJf build-carry/stage38d.txz -C $S/d build-stage
ls -la build-carry/stage38c.txz build-carry/stage38d.txz
