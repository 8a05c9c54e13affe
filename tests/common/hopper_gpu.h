// Test helpers for the GPU: is a Hopper GPU here, and device buffers that free themselves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace warpflash::testing {

// Empty when a Hopper GPU (compute capability 9.0) is usable, else why not.
inline std::string hopper_unavailable_reason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) return std::string("no CUDA device (") + cudaGetErrorName(error) + ")";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot query CUDA device 0";
  if (prop.major != 9 || prop.minor != 0) {
    return std::string("device 0 (") + prop.name + ") is sm_" + std::to_string(prop.major * 10 + prop.minor) +
           ", not Hopper sm_90";
  }
  return "";
}

// Skips the current test, visibly, without a Hopper GPU.
#define WARPFLASH_REQUIRE_HOPPER()                                                          \
  do {                                                                                      \
    static const std::string reason = ::warpflash::testing::hopper_unavailable_reason();    \
    if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;                    \
  } while (0)

#define WARPFLASH_CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0 && cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  bool upload(const std::vector<T>& host) const {
    return count_ == 0 || cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) host.clear();
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace warpflash::testing
