// PyTorch bindings of the KV-cache append (append_kv_cache) (registered as a fragment of the warpflash library
// torch_ops.cpp defines).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common.h"

namespace {

using warpflash_torch::dtype_of;
using warpflash_torch::int_vector;
using warpflash_torch::page_table_of;
using warpflash_torch::python_dtype;
using warpflash_torch::python_shape;
using warpflash_torch::raise_if_error;
using warpflash_torch::view_of;

// flash_attn_with_kvcache's append in one kernel: k and v (batch, seqlen_new, heads_kv,
// ...) into the caches in place at slots cache_seqlens + t (paged through page_table, or
// at rows cache_batch_idx), k rotated by rotary_cos / rotary_sin at those positions.
// Returns q rotated the same way (q_per_token: each token at its own position, else all
// at cache_seqlens), or an empty tensor without rotary tables.
at::Tensor append_kv_op(const at::Tensor& q, const at::Tensor& k_cache,
                        const at::Tensor& v_cache, const c10::optional<at::Tensor>& k,
                        const c10::optional<at::Tensor>& v, const c10::optional<at::Tensor>& rotary_cos,
                        const c10::optional<at::Tensor>& rotary_sin, const at::Tensor& cache_seqlens,
                        const c10::optional<at::Tensor>& cache_batch_idx, const c10::optional<at::Tensor>& page_table,
                        bool rotary_interleaved, bool q_per_token) {
  const std::pair<const char*, const at::Tensor*> tensors[] = {
      {"k_cache", &k_cache}, {"v_cache", &v_cache}, {"k", k ? &*k : nullptr}, {"v", v ? &*v : nullptr}};
  for (const auto& [name, t] : tensors) {
    if (t == nullptr) continue;
    TORCH_CHECK_TYPE(t->scalar_type() == q.scalar_type(), "warpflash: ", name, " has dtype ",
                     python_dtype(t->scalar_type()), "; q has ", python_dtype(q.scalar_type()),
                     " (the cache and the new tokens take q's)");
    TORCH_CHECK_VALUE(t->is_cuda() && t->device() == q.device(), "warpflash: ", name, " is on ", t->device().str(),
                      "; q is on ", q.device().str());
    TORCH_CHECK_VALUE(t->dim() == 4 && t->stride(-1) == 1, "warpflash: ", name,
                      " must be 4-D with its last dimension contiguous, got shape ", python_shape(*t));
  }
  TORCH_CHECK_TYPE(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16, "warpflash: q has dtype ",
                   python_dtype(q.scalar_type()), "; appending to a cache takes torch.float16 or torch.bfloat16");
  // Shapes the C++ API takes on trust from these views: q's and the new tokens' rows as the caches'.
  auto rows_as = [](const at::Tensor& t, const at::Tensor& like) {
    return t.size(2) == like.size(2) && t.size(3) == like.size(3);
  };
  TORCH_CHECK_VALUE(q.dim() == 4 && q.size(3) == k_cache.size(3) && k_cache.size(2) == v_cache.size(2),
                    "warpflash: q ", python_shape(q), ", k_cache ", python_shape(k_cache), ", v_cache ",
                    python_shape(v_cache), " must agree in head_dim (q, k_cache) and heads (the caches)");
  TORCH_CHECK_VALUE(k.has_value() == v.has_value(), "warpflash: k and v are given together or not at all");
  if (k.has_value()) {
    TORCH_CHECK_VALUE(k->size(0) == q.size(0) && v->size(0) == q.size(0) && k->size(1) == v->size(1) &&
                          rows_as(*k, k_cache) && rows_as(*v, v_cache),
                      "warpflash: new k ", python_shape(*k), ", v ", python_shape(*v),
                      " must be (batch, seqlen_new) + the caches' (heads_kv, head_dim)");
  }
  // The kernel reads cache_seqlens and cache_batch_idx at every sequence, and page_table's
  // row of every sequence.
  const int* starts = int_vector(cache_seqlens, "cache_seqlens", q.size(0), q);
  const int* rows = int_vector(cache_batch_idx, "cache_batch_idx", q.size(0), q);
  const int* table = page_table_of(page_table, q.size(0), q);
  c10::cuda::CUDAGuard device_guard(q.device());
  warpflash::AppendKvArgs args;
  args.dtype = dtype_of(q.scalar_type());
  args.batch = q.size(0);
  args.seqlen_q = q.size(1);
  args.heads_q = q.size(2);
  args.head_dim = k_cache.size(3);
  args.head_dim_v = v_cache.size(3);
  args.heads_kv = k_cache.size(2);
  args.cache_batch = k_cache.size(0);
  args.cache_seqlen = k_cache.size(1);
  args.k_cache = view_of(k_cache);
  args.v_cache = view_of(v_cache);
  if (k.has_value()) {
    args.seqlen_new = k->size(1);
    args.k_new = view_of(*k);
    args.v_new = view_of(*v);
  }
  args.cache_seqlens = starts;
  args.cache_batch_idx = rows;
  if (table != nullptr) {
    args.page_table = table;
    args.page_table_stride = page_table->stride(0);
    args.max_pages = page_table->size(1);
  }
  at::Tensor q_out = at::empty({0}, q.options()), cos, sin;
  TORCH_CHECK_VALUE(rotary_cos.has_value() == rotary_sin.has_value(),
                    "warpflash: rotary_cos and rotary_sin are given together or not at all");
  if (rotary_cos.has_value()) {
    cos = rotary_cos->contiguous();
    sin = rotary_sin->contiguous();
    TORCH_CHECK_TYPE((cos.scalar_type() == q.scalar_type() || cos.scalar_type() == at::kFloat) &&
                         sin.scalar_type() == cos.scalar_type(),
                     "warpflash: rotary_cos, rotary_sin have dtypes ", python_dtype(cos.scalar_type()), ", ",
                     python_dtype(sin.scalar_type()), "; both q's (", python_dtype(q.scalar_type()),
                     ") or torch.float32 are required");
    TORCH_CHECK_VALUE(cos.is_cuda() && cos.device() == q.device() && sin.device() == q.device(),
                      "warpflash: rotary_cos and rotary_sin must be CUDA tensors on q's device");
    TORCH_CHECK_VALUE(cos.dim() == 2 && sin.sizes() == cos.sizes(), "warpflash: rotary_cos, rotary_sin have shapes ",
                      python_shape(cos), ", ", python_shape(sin), "; expected equal (max_position, rotary_dim / 2)");
    args.rotary_cos = cos.data_ptr();
    args.rotary_sin = sin.data_ptr();
    args.rotary_positions = cos.size(0);
    args.rotary_dim = 2 * cos.size(1);
    args.rotary_fp32 = cos.scalar_type() == at::kFloat;
    args.rotary_interleaved = rotary_interleaved;
    args.q_per_token = q_per_token;
    q_out = at::empty(q.sizes(), q.options());
    args.q = view_of(q);
    args.q_out = view_of(q_out);
  }
  args.stream = c10::cuda::getCurrentCUDAStream().stream();
  args.check_pointers = false;  // CUDA tensors, checked above
  raise_if_error(warpflash::append_kv_cache(args));
  return q_out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(warpflash, m) {
  m.def(
      "append_kv(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v, Tensor? rotary_cos, "
      "Tensor? rotary_sin, Tensor cache_seqlens, Tensor? cache_batch_idx, Tensor? page_table, bool rotary_interleaved, "
      "bool q_per_token) -> Tensor q_out");
}

TORCH_LIBRARY_IMPL(warpflash, CUDA, m) { m.impl("append_kv", &append_kv_op); }
