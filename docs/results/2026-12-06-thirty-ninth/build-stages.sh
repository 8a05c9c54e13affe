#!/usr/bin/env bash
# After N's CI: M (main's objects of the timed kernels), N2, E; packs stage38c / stage38d.
set -euo pipefail
cd /work/main
here=docs/results/2026-12-06-thirty-eighth
root=$PWD
cutlass=$root/third_party/nvidia-cutlass-4.2.0.0/cutlass_library/source/include
while pgrep -f "ci/run" > /dev/null; do sleep 20; done
echo "N CI ended $(date)"; tail -n 3 /tmp/nx-N.log
O=src/CMakeFiles/warpflash.dir
cfg="-DCUTLASS_DIR=$cutlass -DWARPFLASH_BUILD_TESTS=OFF -DWARPFLASH_BUILD_BENCH=OFF"
git clone -q "$root" /tmp/nx-M
objs=""
for o in bf16_d128 bf16_d128_long bf16_d128_long_clustered bf16_d192 bf16_d256 bf16_d256_short fp16_d128 fp16_d128_long fp16_d128_long_clustered; do
  objs="$objs $O/instances/forward_$o.cu.o"; done
(cd /tmp/nx-M && cmake -S . -B build -G Ninja $cfg > /dev/null && CCACHE_DISABLE=1 ninja -C build $objs > /tmp/nx-M-build.log)
echo "M objects $(date)"
for v in N2 E; do
  git clone -q "$root" /tmp/nx-$v
  (cd /tmp/nx-$v && git apply "$root/$here/split-softmax-around-pv-wait.patch")
done
(cd /tmp/nx-N2 && git apply "$root/$here/causal-long-tiles-from-16k.patch" &&
  cmake -S . -B build -G Ninja $cfg > /dev/null &&
  ninja -C build $O/api/forward.cpp.o $O/api/validate.cpp.o > /dev/null)
(cd /tmp/nx-E && git apply "$root/$here/d64-split.patch" &&
  cmake -S . -B build -G Ninja $cfg -DWARPFLASH_HEAD_DIMS=64 -DWARPFLASH_DTYPES=bf16 > /dev/null &&
  CCACHE_DISABLE=1 ninja -C build $O/instances/forward_bf16_d64.cu.o > /dev/null)
echo "N2 E $(date)"
S=/tmp/nx-stage; rm -rf $S; mkdir -p $S/c/build-stage/libs $S/c/build-stage/tests $S/d/build-stage/libs $S/d/build-stage/tests
B=/tmp/nx-N/build
cp $B/src/libwarpflash.a $S/c/build-stage/libs/M.a
(cd /tmp/nx-M/build && ar r $S/c/build-stage/libs/M.a $objs)
cp $B/src/libwarpflash.a $S/c/build-stage/libs/N.a
cp $B/src/libwarpflash.a $S/c/build-stage/libs/N2.a
ar r $S/c/build-stage/libs/N2.a /tmp/nx-N2/build/$O/api/forward.cpp.o /tmp/nx-N2/build/$O/api/validate.cpp.o
cp $B/tests/warpflash_gpu_tests $S/c/build-stage/tests/gpu_tests_N
cp $B/src/libwarpflash.a $S/d/build-stage/libs/N.a
cp $B/src/libwarpflash.a $S/d/build-stage/libs/E.a
ar r $S/d/build-stage/libs/E.a /tmp/nx-E/build/$O/instances/forward_bf16_d64.cu.o
T=$B/tests/CMakeFiles/warpflash_gpu_tests.dir/gpu
/usr/bin/c++ -O3 -DNDEBUG $T/*.cpp.o -o $S/d/build-stage/tests/gpu_tests_E -L/usr/local/cuda/targets/x86_64-linux/lib \
  $S/d/build-stage/libs/E.a $B/src/libwarpflash_reference.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
  /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/lib/x86_64-linux-gnu/libgtest.a \
  -lcudadevrt -lcudart_static -lrt -lpthread -ldl
mkdir -p build-carry
tar cJf build-carry/stage38c.txz -C $S/c build-stage
tar cJf build-carry/stage38d.txz -C $S/d build-stage
ls -la build-carry/stage38c.txz build-carry/stage38d.txz
echo "done $(date)"
