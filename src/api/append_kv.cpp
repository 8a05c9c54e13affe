// append_kv_cache(): validation of every argument, the device checks and the launch
// (kernels/kvcache/append_kv.cu).
#include <string>
#include <utility>
#include <vector>

#include "api/device_checks.h"
#include "api/limits.h"
#include "api/tensor_checks.h"
#include "api/text.h"
#include "kernels/kvcache/append_kv.h"
#include "warpflash/kvcache.h"

namespace warpflash {
namespace {

using text::concat;

constexpr const char* kApi = "warpflash::append_kv_cache";
constexpr int64_t kMaxHeadDim = 256;

Status invalid(const std::string& message) { return Status::InvalidArgument(concat(kApi, ": ", message)); }

Status check_size(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return Status::Ok();
  return invalid(concat(name, " = ", value, " is out of range: allowed is ", min, " to ", max));
}

Status check_head_dim(const char* name, int64_t value) {
  if (value >= 2 && value <= kMaxHeadDim && value % 2 == 0) return Status::Ok();
  return invalid(concat(name, " = ", value, " is not supported: allowed are even sizes from 2 to ", kMaxHeadDim));
}

bool rotates(const AppendKvArgs& args) { return args.rotary_dim > 0; }

}  // namespace

Status validate_append_kv_cache(const AppendKvArgs& args) {
  if (args.dtype != DType::kFloat16 && args.dtype != DType::kBFloat16) {
    return invalid(concat("dtype = ", dtype_name(args.dtype), " is not supported: allowed are float16, bfloat16"));
  }
  Status status;
  const std::pair<const char*, int64_t> sizes[] = {{"batch", args.batch},
                                                   {"seqlen_new", args.seqlen_new},
                                                   {"seqlen_q", args.seqlen_q},
                                                   {"cache_batch", args.cache_batch},
                                                   {"cache_seqlen", args.cache_seqlen},
                                                   {"rotary_positions", args.rotary_positions}};
  for (const auto& [name, value] : sizes) {
    if (!(status = check_size(name, value, 0, limits::kMaxSeqlen)).ok()) return status;
  }
  if (!(status = check_size("heads_kv", args.heads_kv, 1, limits::kMaxHeads)).ok()) return status;
  if (!(status = check_size("heads_q", args.heads_q, rotates(args) ? 1 : 0, limits::kMaxHeads)).ok()) return status;
  if (!(status = check_head_dim("head_dim", args.head_dim)).ok()) return status;
  if (!(status = check_head_dim("head_dim_v", args.head_dim_v)).ok()) return status;
  if (args.rotary_dim < 0 || args.rotary_dim % 2 != 0 || args.rotary_dim > args.head_dim) {
    return invalid(concat("rotary_dim = ", args.rotary_dim,
                          " is not allowed: it must be even, from 0 (no rotation) to head_dim = ", args.head_dim));
  }
  if (args.batch == 0 || (args.seqlen_new == 0 && (!rotates(args) || args.seqlen_q == 0))) return Status::Ok();
  if (args.cache_seqlens == nullptr) {
    return invalid("cache_seqlens is null; an int32 device array (batch,) is required");
  }
  const int bytes = dtype_size_bytes(args.dtype);
  if (rotates(args)) {
    if (args.rotary_cos == nullptr || args.rotary_sin == nullptr) {
      return invalid(concat("rotary_dim = ", args.rotary_dim, " needs rotary_cos and rotary_sin (",
                            "(rotary_positions, rotary_dim / 2) device arrays); one is null"));
    }
    if (args.seqlen_q > 0) {
      const std::pair<const char*, const TensorView4d*> queries[] = {{"q", &args.q}, {"q_out", &args.q_out}};
      for (const auto& [name, view] : queries) {
        if (!(status = check_tensor_view(kApi, name, *view, args.batch, args.seqlen_q, args.heads_q, bytes, false))
                 .ok()) {
          return status;
        }
      }
    }
  }
  if (args.seqlen_new == 0) return Status::Ok();
  if (args.cache_batch == 0 || args.cache_seqlen == 0) {
    return invalid(concat("the caches are empty (cache_batch = ", args.cache_batch, ", cache_seqlen = ",
                          args.cache_seqlen, "); new tokens need slots"));
  }
  const std::pair<const char*, const TensorView4d*> news[] = {{"k_new", &args.k_new}, {"v_new", &args.v_new}};
  for (const auto& [name, view] : news) {
    if (!(status = check_tensor_view(kApi, name, *view, args.batch, args.seqlen_new, args.heads_kv, bytes, false))
             .ok()) {
      return status;
    }
  }
  const std::pair<const char*, const TensorView4d*> caches[] = {{"k_cache", &args.k_cache}, {"v_cache", &args.v_cache}};
  for (const auto& [name, view] : caches) {
    if (!(status = check_tensor_view(kApi, name, *view, args.cache_batch, args.cache_seqlen, args.heads_kv, bytes,
                                     false)).ok()) {
      return status;
    }
  }
  if (args.page_table != nullptr) {
    if (args.cache_batch_idx != nullptr) {
      return invalid("cache_batch_idx is not supported with page_table (the table picks the pages)");
    }
    if (!(status = check_size("max_pages", args.max_pages, 1, limits::kMaxPages)).ok()) return status;
    if (args.page_table_stride < args.max_pages) {
      return invalid(concat("page_table_stride = ", args.page_table_stride, " is less than max_pages = ",
                            args.max_pages, " (each sequence's row of the table holds its pages)"));
    }
  }
  return Status::Ok();
}

Status append_kv_cache(const AppendKvArgs& args) {
  Status status = validate_append_kv_cache(args);
  if (!status.ok()) return status;
  bool rotates_q = rotates(args) && args.seqlen_q > 0;
  if (args.batch == 0 || (args.seqlen_new == 0 && !rotates_q)) return Status::Ok();
  if (!(status = check_hopper_device(kApi)).ok()) return status;
  if (args.check_pointers) {
    std::vector<std::pair<const char*, const void*>> pointers = {{"cache_seqlens", args.cache_seqlens}};
    if (args.seqlen_new > 0) {
      pointers.insert(pointers.end(), {{"k_new.data", args.k_new.data},
                                       {"v_new.data", args.v_new.data},
                                       {"k_cache.data", args.k_cache.data},
                                       {"v_cache.data", args.v_cache.data}});
      if (args.cache_batch_idx != nullptr) pointers.push_back({"cache_batch_idx", args.cache_batch_idx});
      if (args.page_table != nullptr) pointers.push_back({"page_table", args.page_table});
    }
    if (rotates(args)) {
      pointers.insert(pointers.end(), {{"rotary_cos", args.rotary_cos}, {"rotary_sin", args.rotary_sin}});
    }
    if (rotates_q) pointers.insert(pointers.end(), {{"q.data", args.q.data}, {"q_out.data", args.q_out.data}});
    for (const auto& [name, pointer] : pointers) {
      if (!(status = check_device_pointer(kApi, name, pointer)).ok()) return status;
    }
  }
  return kernels::launch_append_kv(args);
}

}  // namespace warpflash
