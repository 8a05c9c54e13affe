// Checks every argument of forward() before anything touches the GPU. Each message
// names the argument, its value and what is allowed.
#include <cmath>
#include <string>
#include <utility>

#include "api/dispatch.h"
#include "api/limits.h"
#include "api/tensor_checks.h"
#include "api/text.h"
#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"
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

Status check_tensor(const char* name, const TensorView4d& view, int64_t batch, int64_t seqlen, int64_t heads,
                    int element_bytes, bool may_be_null) {
  return check_tensor_view("warpflash::forward", name, view, batch, seqlen, heads, element_bytes, may_be_null);
}

// FP8's per-block scales: e4m3 inputs, dense sides, the block sizes the kernels read.
Status validate_block_scales(const ForwardArgs& args, bool fp8) {
  struct Side {
    const char* name;
    const float* scale;
    const char* rows_name;
    int64_t rows;
    const char* cu_seqlens_name;
    bool packed;
    // Q's block is a consumer warpgroup's 64 rows or more, K's and V's a K/V block or more.
    bool allows_64;
  };
  const Side sides[] = {
      {"q_block_scale", args.q_block_scale, "q_block_rows", args.q_block_rows, "cu_seqlens_q",
       args.cu_seqlens_q != nullptr, true},
      {"k_block_scale", args.k_block_scale, "kv_block_rows", args.kv_block_rows, "cu_seqlens_k",
       args.cu_seqlens_k != nullptr, false},
      {"v_block_scale", args.v_block_scale, "kv_block_rows", args.kv_block_rows, "cu_seqlens_k",
       args.cu_seqlens_k != nullptr, false}};
  for (const Side& side : sides) {
    if (side.scale == nullptr) continue;
    if (!fp8) {
      return invalid(concat(side.name, " is set for dtype = ", dtype_name(args.dtype),
                            ": block scales are for float8_e4m3fn inputs only"));
    }
    if (!(side.rows == 0 || side.rows == 128 || (side.allows_64 && side.rows == 64))) {
      return invalid(concat(side.rows_name, " = ", side.rows, " is not supported: allowed are 0 (one scale per (batch, ",
                            "head)), ", side.allows_64 ? "64, " : "", "128"));
    }
    if (side.packed) {
      return Status::NotSupported(concat("warpflash::forward: ", side.name, " with ", side.cu_seqlens_name,
                                         " is not supported: block scales are for dense batches (packed sequences "
                                         "take the per-(batch, K/V head) descales)"));
    }
    if (reinterpret_cast<uintptr_t>(side.scale) % 4 != 0) {
      return invalid(concat(side.name, " = ", Hex{reinterpret_cast<uintptr_t>(side.scale)},
                            " is not 4-byte aligned (an fp32 array is required)"));
    }
  }
  return Status::Ok();
}

}  // namespace

Status validate_forward(const ForwardArgs& args) {
  bool fp8 = args.dtype == DType::kFloat8E4M3;
  if (args.dtype != DType::kFloat16 && args.dtype != DType::kBFloat16 && !fp8) {
    return invalid(concat("dtype = ", static_cast<int>(args.dtype),
                          " is not supported: allowed are float16, bfloat16, float8_e4m3fn"));
  }
  if (!fp8) {
    for (const auto& [name, pointer] : {std::pair<const char*, const float*>{"q_descale", args.q_descale},
                                        {"k_descale", args.k_descale}, {"v_descale", args.v_descale}}) {
      if (pointer != nullptr) {
        return invalid(concat(name, " is set for dtype = ", dtype_name(args.dtype),
                              ": descales are for float8_e4m3fn inputs only"));
      }
    }
  } else if (args.softcap != 0.f) {
    return Status::NotSupported(concat("warpflash::forward: softcap = ", args.softcap,
                                       " is not supported with float8_e4m3fn inputs (only softcap = 0)"));
  }
  if (Status status = validate_block_scales(args, fp8); !status.ok()) return status;
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
  if (s.head_dim_v < 0) return invalid(concat("shape.head_dim_v = ", s.head_dim_v, " must be >= 0 (0: head_dim)"));
  std::vector<HeadDims> pairs = compiled_head_dim_pairs(args.dtype);
  bool head_dims_compiled = false;
  for (HeadDims dims : pairs) head_dims_compiled |= dims.qk == s.head_dim && dims.v == s.value_head_dim();
  if (!head_dims_compiled) {
    std::vector<std::string> listed;
    for (HeadDims dims : pairs) listed.push_back(dims.v == dims.qk ? std::to_string(dims.qk) : concat(dims.qk, "/", dims.v));
    std::string asked = s.value_head_dim() == s.head_dim
                            ? concat("shape.head_dim = ", s.head_dim)
                            : concat("shape.head_dim = ", s.head_dim, " with head_dim_v = ", s.value_head_dim());
    return Status::NotSupported(concat("warpflash::forward: ", asked, " is not supported for ", dtype_name(args.dtype),
                                       ": this build has head dims {", join(listed),
                                       "} (qk/v where V's differs from Q's and K's)"));
  }
  if (args.softmax_scale && !(std::isfinite(*args.softmax_scale) && *args.softmax_scale > 0.f)) {
    return invalid(concat("softmax_scale = ", *args.softmax_scale, " must be finite and positive"));
  }
  if (args.window_left < -1 || args.window_right < -1) {
    return invalid(concat("window_size = (", args.window_left, ", ", args.window_right,
                          ") is not allowed: each side is -1 (unbounded) or >= 0"));
  }
  if (!(status = check_range("attention_chunk", args.attention_chunk, 0, limits::kMaxSeqlen - 1)).ok()) return status;
  if (args.attention_chunk > 0 && s.seqlen_q + s.seqlen_k + args.attention_chunk >= (int64_t(1) << 31)) {
    return invalid(concat("attention_chunk = ", args.attention_chunk, " with seqlen_q = ", s.seqlen_q,
                          " and seqlen_k = ", s.seqlen_k, ": their sum must stay below 2^31"));
  }
  if (!(std::isfinite(args.softcap) && args.softcap >= 0.f)) {
    return invalid(concat("softcap = ", args.softcap, " must be finite and >= 0 (0: no softcap)"));
  }
  if (!(status = check_range("num_splits", args.num_splits, 0, kernels::kMaxSplits)).ok()) return status;
  if (args.kv_batch_idx != nullptr) {
    if (args.cu_seqlens_k != nullptr) {
      return Status::NotSupported("warpflash::forward: kv_batch_idx (cache rows per sequence) is not supported with "
                                  "cu_seqlens_k: it picks rows of a dense (kv_batch, seqlen_k, heads_kv, head_dim) K/V");
    }
    if (args.k_block_scale != nullptr || args.v_block_scale != nullptr) {
      return Status::NotSupported("warpflash::forward: kv_batch_idx is not supported with FP8 block scales of K or V");
    }
    if (!(status = check_range("kv_batch", args.kv_batch, 1, limits::kMaxBatch)).ok()) return status;
  } else if (args.kv_batch != 0) {
    return invalid(concat("kv_batch = ", args.kv_batch, " is set without kv_batch_idx (it counts the cache's rows)"));
  }
  if (args.page_table != nullptr) {
    const char* other = args.cu_seqlens_k != nullptr ? "cu_seqlens_k" : args.kv_batch_idx != nullptr ? "kv_batch_idx" : nullptr;
    if (other != nullptr) {
      return Status::NotSupported(concat("warpflash::forward: page_table is not supported with ", other,
                                         ": a paged cache's sequences are rows of the page table, their lengths "
                                         "seqused_k"));
    }
    if (fp8) {
      return Status::NotSupported("warpflash::forward: page_table is not supported with float8_e4m3fn inputs "
                                  "(paged caches of float16 or bfloat16)");
    }
    if (!(status = check_range("page_size", args.page_size, 1, limits::kMaxSeqlen)).ok()) return status;
    if (!(status = check_range("num_pages", args.num_pages, 1, limits::kMaxPages)).ok()) return status;
    if (!(status = check_range("max_pages", args.max_pages, 1, limits::kMaxPages)).ok()) return status;
    if (!(status = check_range("page_table_batch_stride", args.page_table_batch_stride, 0, limits::kMaxPages)).ok()) {
      return status;
    }
    if (s.batch * args.page_table_batch_stride + args.max_pages > limits::kMaxPages) {
      return invalid(concat("page_table: batch * page_table_batch_stride + max_pages = ", s.batch, " * ",
                            args.page_table_batch_stride, " + ", args.max_pages, " exceeds ", limits::kMaxPages,
                            " (the kernels index the table in 32 bits)"));
    }
    if (s.seqlen_k > args.max_pages * args.page_size) {
      return invalid(concat("shape.seqlen_k = ", s.seqlen_k, " exceeds max_pages * page_size = ", args.max_pages, " * ",
                            args.page_size, " (the keys a row of the page table holds)"));
    }
  } else if (args.num_pages != 0 || args.max_pages != 0 || args.page_size != 0) {
    return invalid(concat("page_size = ", args.page_size, ", num_pages = ", args.num_pages, ", max_pages = ",
                          args.max_pages, " are set without page_table (they describe a paged cache)"));
  }
  if (args.leftpad_k != nullptr && fp8) {
    return Status::NotSupported("warpflash::forward: leftpad_k (KV-cache left padding) is not supported with "
                                "float8_e4m3fn inputs (caches of float16 or bfloat16)");
  }
  if (args.num_splits > 1 && !kernels::split_kv_allowed(args)) {
    return Status::NotSupported(concat("warpflash::forward: num_splits = ", args.num_splits,
                                       " is not supported with cu_seqlens_q, seqused_q, learnable_sink or FP8 "
                                       "inputs (split-KV needs dense queries, no sinks, 16-bit inputs); pass 0 "
                                       "(choose) or 1"));
  }
  // Packed (varlen) sides: the totals bound every row index the kernels form.
  struct PackedSide {
    const char* cu_name;
    const int* cu_seqlens;
    const char* total_name;
    int64_t total;
  };
  for (const PackedSide& side : {PackedSide{"cu_seqlens_q", args.cu_seqlens_q, "total_q", args.total_q},
                                 PackedSide{"cu_seqlens_k", args.cu_seqlens_k, "total_k", args.total_k}}) {
    if (side.cu_seqlens == nullptr) {
      if (side.total != 0) {
        return invalid(concat(side.total_name, " = ", side.total, " is set without ", side.cu_name,
                              " (totals describe packed varlen tensors only)"));
      }
      continue;
    }
    if (!(status = check_range(side.total_name, side.total, 0, limits::kMaxSeqlen)).ok()) return status;
  }
  const std::pair<const char*, const void*> four_byte_arrays[] = {{"cu_seqlens_q", args.cu_seqlens_q},
                                                            {"cu_seqlens_k", args.cu_seqlens_k},
                                                            {"seqused_q", args.seqused_q},
                                                            {"seqused_k", args.seqused_k},
                                                            {"kv_batch_idx", args.kv_batch_idx},
                                                            {"page_table", args.page_table},
                                                            {"leftpad_k", args.leftpad_k},
                                                            {"learnable_sink", args.learnable_sink},
                                                            {"q_descale", args.q_descale},
                                                            {"k_descale", args.k_descale},
                                                            {"v_descale", args.v_descale}};
  for (const auto& [name, pointer] : four_byte_arrays) {
    if (reinterpret_cast<uintptr_t>(pointer) % 4 != 0) {
      return invalid(concat(name, " = ", Hex{reinterpret_cast<uintptr_t>(pointer)},
                            " is not 4-byte aligned (an int32 or fp32 array is required)"));
    }
  }
  if (s.batch == 0 || s.seqlen_q == 0) return Status::Ok();  // empty: nothing is read or written
  if (reinterpret_cast<uintptr_t>(args.lse) % alignof(float) != 0) {
    return invalid(concat("lse = ", Hex{reinterpret_cast<uintptr_t>(args.lse)},
                          " is not 4-byte aligned (an fp32 array is required)"));
  }

  if (reinterpret_cast<uintptr_t>(args.workspace) % 16 != 0) {
    return invalid(concat("workspace = ", Hex{reinterpret_cast<uintptr_t>(args.workspace)}, " is not 16-byte aligned"));
  }

  int64_t block_m = forward_tile_config_of(args).block_m;
  int64_t tiles = (s.seqlen_q + block_m - 1) / block_m * s.heads_q * s.batch;
  if (tiles > limits::kMaxTiles) {
    return invalid(concat("batch * heads_q * ceil(seqlen_q / ", block_m, ") = ", tiles, " tiles exceeds ",
                          limits::kMaxTiles, " (the kernel's grid); split the batch"));
  }
  if (args.num_splits > 1 && tiles * args.num_splits > limits::kMaxTiles) {
    return invalid(concat("num_splits = ", args.num_splits, " times ", tiles, " tiles exceeds ", limits::kMaxTiles,
                          " (the kernel's grid); use fewer splits"));
  }
  int bytes = dtype_size_bytes(args.dtype);
  int o_bytes = fp8 ? dtype_size_bytes(DType::kBFloat16) : bytes;
  // A packed side is one batch of total rows (its views' batch_stride is unused).
  bool packed_q = args.cu_seqlens_q != nullptr;
  int64_t batch_q = packed_q ? 1 : s.batch, rows_q = packed_q ? args.total_q : s.seqlen_q;
  auto [batch_k, rows_k] = kernels::kv_extent(args);
  if (rows_q == 0) return Status::Ok();  // no query rows: nothing is read or written
  bool keys_empty = rows_k == 0 || s.seqlen_k == 0;
  if (!(status = check_tensor("q", args.q, batch_q, rows_q, s.heads_q, bytes, false)).ok()) return status;
  if (!(status = check_tensor("k", args.k, batch_k, rows_k, s.heads_kv, bytes, keys_empty)).ok()) return status;
  if (!(status = check_tensor("v", args.v, batch_k, rows_k, s.heads_kv, bytes, keys_empty)).ok()) return status;
  if (!(status = check_tensor("o", args.o, batch_q, rows_q, s.heads_q, o_bytes, false)).ok()) return status;
  return Status::Ok();
}

}  // namespace warpflash
