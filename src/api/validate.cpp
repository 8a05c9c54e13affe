// Checks every argument of forward() before anything touches the GPU. Each message
// names the argument, its value and what is allowed.
#include <cmath>
#include <string>

#include "api/dispatch.h"
#include "api/limits.h"
#include "api/text.h"
#include "kernels/forward/config.h"
#include "warpflash/forward.h"

namespace warpflash {
namespace {

using text::concat;
using text::Hex;
using text::join;

Status invalid(const std::string& message) { return Status::InvalidArgument("warpflash::forward: " + message); }

Status check_range(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return Status::Ok();
  return invalid(concat(name, " = ", value, " is out of range: allowed is ", min, " to ", max));
}

// A tensor view of (batch, seqlen, heads, head_dim), checked for what TMA can address.
Status check_tensor(const char* name, const TensorView4d& view, int64_t batch, int64_t seqlen,
                    int64_t heads, int element_bytes, bool may_be_null) {
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

}  // namespace

Status validate_forward(const ForwardArgs& args) {
  if (args.dtype != DType::kFloat16 && args.dtype != DType::kBFloat16) {
    return invalid(concat("dtype = ", static_cast<int>(args.dtype), " is not supported: allowed are float16, bfloat16"));
  }
  const AttentionShape& s = args.shape;
  Status status;
  if (!(status = check_range("shape.batch", s.batch, 0, limits::kMaxBatch)).ok()) return status;
  if (!(status = check_range("shape.seqlen_q", s.seqlen_q, 0, limits::kMaxSeqlen)).ok()) return status;
  if (!(status = check_range("shape.seqlen_k", s.seqlen_k, 0, limits::kMaxSeqlen)).ok()) return status;
  if (!(status = check_range("shape.heads_q", s.heads_q, 1, limits::kMaxHeads)).ok()) return status;
  if (!(status = check_range("shape.heads_kv", s.heads_kv, 1, limits::kMaxHeads)).ok()) return status;
  if (s.heads_q % s.heads_kv != 0) {
    return invalid(concat("shape.heads_q = ", s.heads_q, " is not a multiple of shape.heads_kv = ", s.heads_kv,
                          " (GQA/MQA need every KV head shared by the same number of Q heads)"));
  }
  std::vector<int> head_dims = compiled_head_dims(args.dtype);
  bool head_dim_compiled = false;
  for (int d : head_dims) head_dim_compiled |= d == s.head_dim;
  if (!head_dim_compiled) {
    return Status::NotSupported(concat("warpflash::forward: shape.head_dim = ", s.head_dim, " is not supported for ",
                                       dtype_name(args.dtype), ": this build has head dims {", join(head_dims), "}"));
  }
  if (args.softmax_scale && !(std::isfinite(*args.softmax_scale) && *args.softmax_scale > 0.f)) {
    return invalid(concat("softmax_scale = ", *args.softmax_scale, " must be finite and positive"));
  }
  if (s.batch == 0 || s.seqlen_q == 0) return Status::Ok();  // empty: nothing is read or written
  if (reinterpret_cast<uintptr_t>(args.lse) % alignof(float) != 0) {
    return invalid(concat("lse = ", Hex{reinterpret_cast<uintptr_t>(args.lse)},
                          " is not 4-byte aligned (an fp32 array is required)"));
  }

  if (reinterpret_cast<uintptr_t>(args.workspace) % 16 != 0) {
    return invalid(concat("workspace = ", Hex{reinterpret_cast<uintptr_t>(args.workspace)}, " is not 16-byte aligned"));
  }

  int64_t block_m = kernels::forward_tile_config(static_cast<int>(s.head_dim), forward_variant_of(args)).block_m;
  int64_t tiles = (s.seqlen_q + block_m - 1) / block_m * s.heads_q * s.batch;
  if (tiles > limits::kMaxTiles) {
    return invalid(concat("batch * heads_q * ceil(seqlen_q / ", block_m, ") = ", tiles, " tiles exceeds ",
                          limits::kMaxTiles, " (the kernel's grid); split the batch"));
  }
  int bytes = dtype_size_bytes(args.dtype);
  bool keys_empty = s.seqlen_k == 0;
  if (!(status = check_tensor("q", args.q, s.batch, s.seqlen_q, s.heads_q, bytes, false)).ok()) return status;
  if (!(status = check_tensor("k", args.k, s.batch, s.seqlen_k, s.heads_kv, bytes, keys_empty)).ok()) return status;
  if (!(status = check_tensor("v", args.v, s.batch, s.seqlen_k, s.heads_kv, bytes, keys_empty)).ok()) return status;
  if (!(status = check_tensor("o", args.o, s.batch, s.seqlen_q, s.heads_q, bytes, false)).ok()) return status;
  return Status::Ok();
}

}  // namespace warpflash
