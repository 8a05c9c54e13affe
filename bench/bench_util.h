// Helpers of the forward benchmark: error checks, device buffers, 16-bit host data,
// statistics and command-line lists. Host code only (the bench has no kernels of its own).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "reference/half_precision.h"
#include "warpflash/warpflash.h"

namespace warpflash::bench {

// A failed CUDA call leaves the context in an unknown state, so the bench stops there.
inline void check_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, expr, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    std::exit(EXIT_FAILURE);
  }
}

#define WF_CUDA_CHECK(expr) ::warpflash::bench::check_cuda((expr), #expr, __FILE__, __LINE__)

// Prints the message of a failed warpflash call; returns whether it succeeded.
inline bool report_status(const Status& status, const char* what) {
  if (!status.ok()) std::fprintf(stderr, "error: %s: %s\n", what, status.message().c_str());
  return status.ok();
}

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { WF_CUDA_CHECK(cudaMalloc(&data_, bytes)); }
  ~DeviceBuffer() { WF_CUDA_CHECK(cudaFree(data_)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

  template <typename T>
  void upload(const std::vector<T>& host) {
    WF_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Copies the first host.size() elements back.
  template <typename T>
  void download(std::vector<T>& host) const {
    WF_CUDA_CHECK(cudaMemcpy(host.data(), data_, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
  // All-ones bits are NaN in fp16, bf16 and fp32 alike, so any element a kernel fails to
  // write shows up in the checks.
  void poison() { WF_CUDA_CHECK(cudaMemset(data_, 0xFF, bytes_)); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

inline const char* short_name(DType dtype) { return dtype == DType::kBFloat16 ? "bf16" : "fp16"; }

inline uint16_t to_bits(DType dtype, float x) {
  return dtype == DType::kBFloat16 ? reference::float_to_bfloat16_bits(x)
                                   : reference::float_to_half_bits(x);
}

inline float from_bits(DType dtype, uint16_t bits) {
  return dtype == DType::kBFloat16 ? reference::bfloat16_bits_to_float(bits)
                                   : reference::half_bits_to_float(bits);
}

// Inf and NaN have all exponent bits set: 5 of them in fp16, 8 in bf16.
inline bool is_finite_bits(DType dtype, uint16_t bits) {
  const uint16_t exponent = dtype == DType::kBFloat16 ? 0x7F80 : 0x7C00;
  return (bits & exponent) != exponent;
}

// Standard normal values rounded to `dtype`: the scale of real activations, never zeros.
inline void fill_normal(std::mt19937_64& rng, DType dtype, std::vector<uint16_t>& out) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint16_t& x : out) x = to_bits(dtype, normal(rng));
}

inline std::vector<double> to_doubles(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(dtype, bits[i]);
  return out;
}

// ||out - ref|| / ||ref||; NaN when out holds a NaN, so callers test !(err < tol).
inline double relative_l2_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / norm);
}

// Largest |out - ref|, where two -inf (rows that see no key) agree; NaN propagates.
inline double max_abs_error(const std::vector<float>& out, const std::vector<double>& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]) && out[i] == ref[i]) continue;
    const double err = std::fabs(out[i] - ref[i]);
    if (std::isnan(err)) return err;
    worst = std::max(worst, err);
  }
  return worst;
}

struct Timing {
  double median_ms = 0.0;
  double min_ms = 0.0;
};

inline Timing summarize(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return Timing{median, ms.front()};
}

// Parses "64,128,256" into positive ints; false on anything else.
inline bool parse_int_list(const std::string& text, std::vector<int>& out) {
  out.clear();
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value <= 0 || value > (1L << 30)) return false;
    out.push_back(static_cast<int>(value));
    start = comma + 1;
  }
  return true;
}

}  // namespace warpflash::bench
