#!/usr/bin/env bash
# The test command: set-up, build, and every test (C++ with ctest, Python with pytest).
# Without a Hopper GPU the GPU tests report themselves skipped; on one they run against
# the references.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh -DWARPFLASH_BUILD_TESTS=ON "$@"
ctest --test-dir build --output-on-failure --parallel "$(nproc)"

# The Python package, built against the installed PyTorch from the kernels just built.
WARPFLASH_PREBUILT_LIB=build/src/libwarpflash.a \
  python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps .
(cd tests/python && python3 -m pytest -q .)
