#!/usr/bin/env bash
# Installs what building and testing warpflash needs and a fresh machine may lack:
# the pinned CUTLASS/CuTe headers (PyPI package nvidia-cutlass) into third_party/,
# PyTorch, pytest and wheel when missing, and, on Debian, CMake, ninja, ccache and
# GoogleTest when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

CUTLASS_VERSION=4.2.0.0
CUTLASS_PREFIX=third_party/nvidia-cutlass-${CUTLASS_VERSION}

if [ ! -f "${CUTLASS_PREFIX}/cutlass_library/source/include/cute/tensor.hpp" ]; then
  echo "setup: installing nvidia-cutlass==${CUTLASS_VERSION} headers into ${CUTLASS_PREFIX}"
  python3 -m pip install --quiet --no-deps --disable-pip-version-check \
    --target "${CUTLASS_PREFIX}" "nvidia-cutlass==${CUTLASS_VERSION}"
fi

# Python side (the package and its tests): PyTorch, pinned, only when none is installed, so
# a machine's own PyTorch build is kept; pytest and wheel for the tests and the build.
python_missing=()
python3 -c "import torch" 2>/dev/null || python_missing+=(torch==2.11.0)
python3 -c "import pytest" 2>/dev/null || python_missing+=(pytest==8.3.4)
python3 -c "import wheel" 2>/dev/null || python_missing+=(wheel==0.45.1)
if [ ${#python_missing[@]} -gt 0 ]; then
  echo "setup: pip install ${python_missing[*]}"
  # Not fatal: building and the C++ benchmark and tests need none of them; pytest says
  # clearly what it lacks.
  python3 -m pip install --quiet --disable-pip-version-check "${python_missing[@]}" ||
    echo "setup: pip install failed; continuing without: ${python_missing[*]}" >&2
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
    # Not fatal: ccache is optional and GoogleTest only matters for the tests; CMake says
    # clearly what a build still lacks.
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) ||
      echo "setup: apt-get failed; continuing without: ${missing[*]}" >&2
  else
    echo "setup: please install: ${missing[*]} (ccache is optional; GoogleTest is needed for the tests)" >&2
  fi
fi
