#include "api/device_checks.h"

#include <atomic>
#include <string>

#include <cuda_runtime_api.h>

#include "api/text.h"

namespace warpflash {
namespace {

constexpr int kMaxDevices = 64;

Status cuda_status(const char* api, cudaError_t error, const char* what) {
  return Status::CudaError(text::concat(api, ": ", what, ": ", cudaGetErrorName(error), " (",
                                        cudaGetErrorString(error), ")"));
}

}  // namespace

Status check_hopper_device(const char* api) {
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return cuda_status(api, error, "no usable CUDA device");
  static std::atomic<bool> known_hopper[kMaxDevices] = {};
  if (device < kMaxDevices && known_hopper[device].load(std::memory_order_relaxed)) return Status::Ok();
  int major = 0, minor = 0;
  if ((error = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) != cudaSuccess ||
      (error = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)) != cudaSuccess) {
    return cuda_status(api, error, "cannot query the device");
  }
  if (major != 9 || minor != 0) {
    return Status::NotSupported(text::concat(api, ": CUDA device ", device, " has compute capability ", major, ".",
                                             minor,
                                             "; warpflash needs a Hopper GPU (compute capability 9.0: H100, H200)"));
  }
  if (device < kMaxDevices) known_hopper[device].store(true, std::memory_order_relaxed);
  return Status::Ok();
}

Status check_device_pointer(const char* api, const char* name, const void* pointer) {
  if (pointer == nullptr) return Status::Ok();
  cudaPointerAttributes attributes{};
  cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess) return cuda_status(api, error, "cudaPointerGetAttributes");
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) return Status::Ok();
  return Status::InvalidArgument(text::concat(api, ": ", name, " = ", pointer, " is not device memory (cudaMemoryType ",
                                              static_cast<int>(attributes.type), "); pass memory allocated on the GPU"));
}

}  // namespace warpflash
