#!/usr/bin/env bash
# mklib.sh NAME OBJDIR: build-stage/libs/NAME.a = main's CI build (/tmp/ci9, f8759be) with
# OBJDIR's instance objects replaced, and build-stage/tests/gpu_tests_NAME linked against it
# (the CI build's GPU test objects). No OBJDIR: main's library and tests as they are.
set -euo pipefail
name=$1; objs=${2:-}
B=/tmp/ci9/build
mkdir -p /tmp/s37/build-stage/libs /tmp/s37/build-stage/tests
cd /tmp/s37
cp $B/src/libwarpflash.a build-stage/libs/$name.a
[ -n "$objs" ] && ar r build-stage/libs/$name.a $objs/*.o
T=$B/tests/CMakeFiles/warpflash_gpu_tests.dir/gpu
/usr/bin/c++ -O3 -DNDEBUG $T/*.cpp.o -o build-stage/tests/gpu_tests_$name -L/usr/local/cuda/targets/x86_64-linux/lib \
  build-stage/libs/$name.a $B/src/libwarpflash_reference.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
  /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/lib/x86_64-linux-gnu/libgtest.a \
  -lcudadevrt -lcudart_static -lrt -lpthread -ldl
ls -la build-stage/libs/$name.a build-stage/tests/gpu_tests_$name
