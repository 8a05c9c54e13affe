# Finds the CUTLASS/CuTe headers: CUTLASS_DIR (an include folder holding cute/tensor.hpp)
# when given, else the pinned PyPI package that scripts/setup.sh installs into third_party/.
set(WARPFLASH_CUTLASS_VERSION 4.2.0.0)
set(_cutlass_default
    "${PROJECT_SOURCE_DIR}/third_party/nvidia-cutlass-${WARPFLASH_CUTLASS_VERSION}/cutlass_library/source/include")
set(CUTLASS_DIR "${_cutlass_default}" CACHE PATH "CUTLASS include directory (holds cute/tensor.hpp)")

if(NOT EXISTS "${CUTLASS_DIR}/cute/tensor.hpp")
  message(FATAL_ERROR
    "CUTLASS headers not found in CUTLASS_DIR='${CUTLASS_DIR}'.\n"
    "Run ./scripts/setup.sh to install nvidia-cutlass==${WARPFLASH_CUTLASS_VERSION} from PyPI into "
    "third_party/, or pass -DCUTLASS_DIR=<cutlass>/include.")
endif()
message(STATUS "warpflash: CUTLASS headers from ${CUTLASS_DIR}")
