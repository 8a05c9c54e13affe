#!/usr/bin/env bash
# Set-up (scripts/setup.sh) and a Release build of the library, tests and benchmark into
# build/. Extra CMake arguments pass through, e.g.
#   ./scripts/build.sh -DWARPFLASH_HEAD_DIMS=128 -DWARPFLASH_DTYPES=bf16
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f build/CMakeCache.txt ] && generator=()  # keep the generator of an existing build
cmake -S . -B build "${generator[@]}" "$@"
cmake --build build --parallel
