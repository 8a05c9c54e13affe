// Element types and the strided 4-D tensor views the API takes.
#pragma once

#include <cstdint>

namespace warpflash {

enum class DType {
  kFloat16,
  kBFloat16,
  kFloat8E4M3,  // OCP E4M3FN (torch.float8_e4m3fn): forward() inputs only, O is bfloat16
};

const char* dtype_name(DType dtype);
int dtype_size_bytes(DType dtype);

// A (batch, seqlen, heads, head_dim) tensor in device memory. head_dim is contiguous
// (stride 1); the other strides are in elements and may be anything TMA can address
// (multiples of 16 bytes).
struct TensorView4d {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t seqlen_stride = 0;
  int64_t head_stride = 0;
};

// Strides of a contiguous (batch, seqlen, heads, head_dim) tensor.
inline TensorView4d contiguous_view(void* data, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorView4d{data, seqlen * heads * head_dim, heads * head_dim, head_dim};
}

}  // namespace warpflash
