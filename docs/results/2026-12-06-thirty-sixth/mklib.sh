#!/usr/bin/env bash
# mklib.sh NAME OBJDIR: NAME.a = C2.a with OBJDIR's objects replaced; gpu_tests_NAME linked.
set -euo pipefail
name=$1; objs=$2
cd /tmp/s36
mkdir -p out/build-stage/libs out/build-stage/tests
cp build-stage/libs/C2.a out/build-stage/libs/$name.a
ar r out/build-stage/libs/$name.a $objs/*.o
T=/tmp/ci6/build/tests/CMakeFiles/warpflash_gpu_tests.dir/gpu
/usr/bin/c++ -O3 -DNDEBUG $T/*.cpp.o -o out/build-stage/tests/gpu_tests_$name -L/usr/local/cuda/targets/x86_64-linux/lib \
  out/build-stage/libs/$name.a /tmp/ci6/build/src/libwarpflash_reference.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
  /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/lib/x86_64-linux-gnu/libgtest.a \
  -lcudadevrt -lcudart_static -lrt -lpthread -ldl
ls -la out/build-stage/libs/$name.a out/build-stage/tests/gpu_tests_$name
