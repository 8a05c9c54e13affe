#include "warpflash/tensor.h"

namespace warpflash {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
  }
  return "unknown dtype";
}

int dtype_size_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
  }
  return 0;
}

}  // namespace warpflash
