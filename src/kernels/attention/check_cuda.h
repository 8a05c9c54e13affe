// A CUDA runtime call's result as a Status naming the call (no CUTLASS: for every launch,
// the pre- and postprocess's too).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "warpflash/status.h"

namespace warpflash::kernels {

inline Status check_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

}  // namespace warpflash::kernels
