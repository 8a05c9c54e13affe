// 16-bit storage of the GPU tests' inputs and outputs, and the poison that marks elements
// a kernel must not write.
#pragma once

#include <cstdint>

#include "reference/half_precision.h"
#include "warpflash/tensor.h"

namespace warpflash::testing {

constexpr uint16_t kPoison = 0x7fff;  // NaN in both fp16 and bf16

inline uint16_t to_bits(DType dtype, float x) {
  return dtype == DType::kBFloat16 ? reference::float_to_bfloat16_bits(x) : reference::float_to_half_bits(x);
}
inline float from_bits(DType dtype, uint16_t bits) {
  return dtype == DType::kBFloat16 ? reference::bfloat16_bits_to_float(bits) : reference::half_bits_to_float(bits);
}

}  // namespace warpflash::testing
