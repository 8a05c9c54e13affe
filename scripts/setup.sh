#!/usr/bin/env bash
# Installs what building warpflash needs and a fresh machine may lack:
# the pinned CUTLASS/CuTe headers (PyPI package nvidia-cutlass) into third_party/,
# and, on Debian, CMake, ninja, ccache and GoogleTest when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

CUTLASS_VERSION=4.2.0.0
CUTLASS_PREFIX=third_party/nvidia-cutlass-${CUTLASS_VERSION}

if [ ! -f "${CUTLASS_PREFIX}/cutlass_library/source/include/cute/tensor.hpp" ]; then
  echo "setup: installing nvidia-cutlass==${CUTLASS_VERSION} headers into ${CUTLASS_PREFIX}"
  python3 -m pip install --quiet --no-deps --disable-pip-version-check \
    --target "${CUTLASS_PREFIX}" "nvidia-cutlass==${CUTLASS_VERSION}"
fi

# Debian packages, only where apt-get exists and something is missing (CI, fresh machines).
missing=()
command -v cmake  >/dev/null || missing+=(cmake)
command -v ninja  >/dev/null || missing+=(ninja-build)
command -v ccache >/dev/null || missing+=(ccache)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install: ${missing[*]} (ccache is optional; GoogleTest is needed for the tests)" >&2
  fi
fi
