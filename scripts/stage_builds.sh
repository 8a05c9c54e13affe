#!/usr/bin/env bash
# Copies what a device call needs from build directories into build-stage/<dir> (the
# device gets the working tree plus `carry` paths, 64 MiB in all): the CMake cache (for
# compare_builds.sh's labels), the benchmark, the GPU tests and, for the first directory,
# the kernel library (the Python package links it there).
#   scripts/stage_builds.sh build build-exp-...   then run with carry ["build-stage"]
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-stage
first=1
for dir in "$@"; do
  mkdir -p "build-stage/$dir/bench" "build-stage/$dir/tests" "build-stage/$dir/src"
  cp "$dir/CMakeCache.txt" "build-stage/$dir/"
  cp "$dir/bench/warpflash_bench" "build-stage/$dir/bench/"
  if [ -f "$dir/tests/warpflash_gpu_tests" ]; then cp "$dir/tests/warpflash_gpu_tests" "build-stage/$dir/tests/"; fi
  if [ $first = 1 ]; then cp "$dir/src/libwarpflash.a" "build-stage/$dir/src/"; first=0; fi
done
du -sh build-stage
