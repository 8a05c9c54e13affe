// Tensor-view checks shared by the entry points' validation.
#include "api/tensor_checks.h"

#include "api/limits.h"
#include "api/text.h"

namespace warpflash {

using text::concat;
using text::Hex;

Status check_tensor_view(const char* api, const char* name, const TensorView4d& view, int64_t batch, int64_t seqlen,
                         int64_t heads, int element_bytes, bool may_be_null) {
  auto invalid = [&](const std::string& message) { return Status::InvalidArgument(concat(api, ": ", message)); };
  if (view.data == nullptr) {
    if (may_be_null) return Status::Ok();
    return invalid(concat(name, ".data is null; a device pointer is required"));
  }
  auto address = reinterpret_cast<uintptr_t>(view.data);
  if (address % limits::kTmaAlignmentBytes != 0) {
    return invalid(concat(name, ".data = ", Hex{address}, " is not ",
                          limits::kTmaAlignmentBytes, "-byte aligned (required by TMA)"));
  }
  struct Dim {
    const char* stride_name;
    int64_t stride;
    int64_t size;
  };
  const Dim dims[] = {{"batch_stride", view.batch_stride, batch},
                      {"seqlen_stride", view.seqlen_stride, seqlen},
                      {"head_stride", view.head_stride, heads}};
  for (const Dim& dim : dims) {
    if (dim.size <= 1) continue;  // a stride of a size-1 dimension is never used
    int64_t bytes = dim.stride * element_bytes;
    if (dim.stride <= 0 || bytes % limits::kTmaAlignmentBytes != 0 || bytes >= limits::kTmaMaxStrideBytes) {
      return invalid(concat(name, ".", dim.stride_name, " = ", dim.stride,
                            " elements is not allowed: strides must be positive multiples of ",
                            limits::kTmaAlignmentBytes / element_bytes, " elements (",
                            limits::kTmaAlignmentBytes, " bytes) below 2^40 bytes, and head_dim contiguous"));
    }
  }
  return Status::Ok();
}

}  // namespace warpflash
