// PyTorch bindings of the C++ API: tensors in, tensors out, on the current CUDA stream
// (this file: the attention; quantize_ops.cpp, kvcache_ops.cpp: the others, registered as
// fragments of the same library). The forward is registered twice: as the operator torch.ops.warpflash.forward (seen by
// torch.compile and CUDA graphs like any op; its shape function lives in
// warpflash/_ops.py), and as the plain function warpflash._C.forward, the eager fast path
// that skips the dispatcher's per-call cost and the LSE when it is not asked for.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>
#include <torch/library.h>

#include "common.h"
#include "warpflash/warpflash.h"

namespace {

using warpflash_torch::dtype_of;
using warpflash_torch::int_vector;
using warpflash_torch::page_table_of;
using warpflash_torch::python_dtype;
using warpflash_torch::python_shape;
using warpflash_torch::raise_if_error;
using warpflash_torch::view_of;

// What the C++ API cannot see in raw pointers: ranks, dtypes, devices, matching shapes.
// rank: 4 for (batch, seqlen, heads, head_dim), 3 for packed varlen (total, heads, head_dim).
// k_batch_of_its_own: a KV cache indexed per sequence (kv_batch_idx) may hold more or fewer
// sequences than q; a paged one (paged) is 4-D (num_pages, page_size, heads, head_dim)
// whatever q is.
void check_tensors(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t rank,
                   bool k_batch_of_its_own = false, bool paged = false) {
  const std::pair<const char*, const at::Tensor*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}};
  for (const auto& [name, t] : tensors) {
    bool is_q = t == &q;
    int64_t expected = paged && !is_q ? 4 : rank;
    const char* layout = paged && !is_q ? "4-D (num_pages, page_size, heads, head_dim) with a page table"
                         : expected == 4 ? "4-D (batch, seqlen, heads, head_dim)"
                                         : "3-D (total_tokens, heads, head_dim)";
    TORCH_CHECK_VALUE(t->dim() == expected, "warpflash: ", name, " must be ", layout, ", got shape ",
                      python_shape(*t));
    TORCH_CHECK_TYPE(t->scalar_type() == at::kHalf || t->scalar_type() == at::kBFloat16 ||
                         t->scalar_type() == at::kFloat8_e4m3fn,
                     "warpflash: ", name, " has dtype ", python_dtype(t->scalar_type()),
                     "; supported are torch.float16, torch.bfloat16, torch.float8_e4m3fn (FP8 forward)");
    TORCH_CHECK_VALUE(t->stride(-1) == 1 || t->size(-1) <= 1, "warpflash: ", name, ".stride(-1) = ",
                      std::to_string(t->stride(-1)),
                      "; the last dimension (head_dim) must be contiguous (call .contiguous())");
  }
  TORCH_CHECK_TYPE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
                   "warpflash: q, k, v must share a dtype, got ", python_dtype(q.scalar_type()), ", ",
                   python_dtype(k.scalar_type()), ", ", python_dtype(v.scalar_type()));
  // v may have a head dim of its own (d_v: 192 / 128 for DeepSeek-V3); all else as k.
  bool kv_agree = k.dim() == v.dim();
  for (int64_t i = 0; kv_agree && i + 1 < k.dim(); ++i) kv_agree = k.size(i) == v.size(i);
  TORCH_CHECK_VALUE(kv_agree, "warpflash: k and v must have the same shape but for the last dimension (head_dim_v), got ",
                    python_shape(k), " and ", python_shape(v));
  if (rank == 4 && !paged) {
    TORCH_CHECK_VALUE((k_batch_of_its_own || q.size(0) == k.size(0)) && q.size(3) == k.size(3), "warpflash: q ",
                      python_shape(q), " and k ", python_shape(k), " must agree in batch and head_dim");
  } else {
    TORCH_CHECK_VALUE(q.size(-1) == k.size(-1), "warpflash: q ", python_shape(q), " and k ", python_shape(k),
                      " must agree in head_dim");
  }
  int64_t heads_q = q.size(-2), heads_kv = k.size(-2);
  TORCH_CHECK_VALUE(heads_kv > 0 && heads_q % heads_kv == 0, "warpflash: q heads (", std::to_string(heads_q),
                    ") must be a multiple of k/v heads (", std::to_string(heads_kv), ")");
  for (const auto& [name, t] : tensors) {
    TORCH_CHECK_VALUE(t->is_cuda(), "warpflash: ", name, " is on ", t->device().str(),
                      "; warpflash runs on CUDA (Hopper) tensors");
  }
  TORCH_CHECK_VALUE(q.device() == k.device() && q.device() == v.device(),
                    "warpflash: q, k, v must be on one device, got ", q.device().str(), ", ", k.device().str(), ", ",
                    v.device().str());
}

// FP8's scales of one of q, k, v (`name`: q_descale, k_descale or v_descale), fp32 on q's
// device: FlashAttention-3's descale, (batch, heads_kv) or one element (broadcast), or
// quantize_fp8's per-block scales of that tensor, (batch, heads, num_blocks) with its own
// heads and num_blocks = ceil(seqlen / block_rows) for block_rows 64 or 128 (q) or 128 (k,
// v), or 1 (one per (batch, head)). Returns the descale, or null and sets `block_scale` and
// `block_rows`; `kept` holds the contiguous copy the pointers refer to.
struct Fp8Scale {
  const float* descale = nullptr;
  const float* block_scale = nullptr;
  int64_t block_rows = 0;
};
Fp8Scale fp8_scale_of(const c10::optional<at::Tensor>& t, const char* name, const at::Tensor& q,
                      const warpflash::ForwardArgs& args, bool is_q, at::Tensor& kept) {
  if (!t.has_value()) return {};
  TORCH_CHECK_TYPE(q.scalar_type() == at::kFloat8_e4m3fn, "warpflash: ", name, " is given with q of dtype ",
                   python_dtype(q.scalar_type()), "; descales are for torch.float8_e4m3fn inputs");
  TORCH_CHECK_TYPE(t->scalar_type() == at::kFloat, "warpflash: ", name, " has dtype ", python_dtype(t->scalar_type()),
                   "; it must be torch.float32");
  TORCH_CHECK_VALUE(t->device() == q.device(), "warpflash: ", name, " is on ", t->device().str(), "; q is on ",
                    q.device().str());
  const warpflash::AttentionShape& shape = args.shape;
  if (t->dim() == 3) {
    TORCH_CHECK_VALUE(args.cu_seqlens_q == nullptr, "warpflash: ", name, " has shape ", python_shape(*t),
                      ": per-block scales are for dense batches; packed sequences take (batch, heads_kv) descales");
    int64_t heads = is_q ? shape.heads_q : shape.heads_kv, seqlen = is_q ? shape.seqlen_q : shape.seqlen_k;
    int64_t blocks_64 = (seqlen + 63) / 64, blocks_128 = (seqlen + 127) / 128, blocks = t->size(2);
    bool fits = t->size(0) == shape.batch && t->size(1) == heads &&
                (blocks == 1 || blocks == blocks_128 || (is_q && blocks == blocks_64));
    TORCH_CHECK_VALUE(fits, "warpflash: ", name, " has shape ", python_shape(*t), "; per-block scales are (",
                      std::to_string(shape.batch), ", ", std::to_string(heads), ", num_blocks) with num_blocks 1 or ",
                      is_q ? std::to_string(blocks_64) + " (64 rows a block) or " : std::string(),
                      std::to_string(blocks_128), " (128 rows a block), as quantize_fp8 writes them");
    kept = t->contiguous();
    int64_t rows = blocks == 1 ? 0 : (is_q && blocks == blocks_64) ? 64 : 128;
    return {nullptr, kept.data_ptr<float>(), rows};
  }
  bool full = t->dim() == 2 && t->size(0) == shape.batch && t->size(1) == shape.heads_kv;
  TORCH_CHECK_VALUE(full || t->numel() == 1, "warpflash: ", name, " has shape ", python_shape(*t), "; expected (",
                    std::to_string(shape.batch), ", ", std::to_string(shape.heads_kv),
                    ") (batch, heads_kv), one element, or per-block scales (batch, heads, num_blocks)");
  kept = full ? t->contiguous() : t->reshape({1, 1}).expand({shape.batch, shape.heads_kv}).contiguous();
  return {kept.data_ptr<float>(), nullptr, 0};
}

// Sets the FP8 scales of args from the three optional tensors (fp8_scale_of).
void set_fp8_scales(warpflash::ForwardArgs& args, const at::Tensor& q, const c10::optional<at::Tensor>& q_descale,
                    const c10::optional<at::Tensor>& k_descale, const c10::optional<at::Tensor>& v_descale,
                    at::Tensor (&kept)[3]) {
  Fp8Scale q_scale = fp8_scale_of(q_descale, "q_descale", q, args, true, kept[0]);
  Fp8Scale k_scale = fp8_scale_of(k_descale, "k_descale", q, args, false, kept[1]);
  Fp8Scale v_scale = fp8_scale_of(v_descale, "v_descale", q, args, false, kept[2]);
  TORCH_CHECK_VALUE(k_scale.block_scale == nullptr || v_scale.block_scale == nullptr ||
                        k_scale.block_rows == v_scale.block_rows,
                    "warpflash: k_descale and v_descale are per-block scales of different block sizes (",
                    std::to_string(k_scale.block_rows), " and ", std::to_string(v_scale.block_rows),
                    " rows); k and v share one");
  args.q_descale = q_scale.descale;
  args.k_descale = k_scale.descale;
  args.v_descale = v_scale.descale;
  args.q_block_scale = q_scale.block_scale;
  args.k_block_scale = k_scale.block_scale;
  args.v_block_scale = v_scale.block_scale;
  args.q_block_rows = q_scale.block_rows;
  args.kv_block_rows = k_scale.block_scale != nullptr ? k_scale.block_rows : v_scale.block_rows;
}

// flash_attn_with_kvcache's ways of finding a sequence's keys in the cache.
struct KvCacheIndex {
  const c10::optional<at::Tensor>& kv_batch_idx;  // cache_batch_idx: int32 (batch,), a cache row per sequence
  const c10::optional<at::Tensor>& page_table;    // int32 (batch, max_pages): k, v are pages
  const c10::optional<at::Tensor>& leftpad_k;     // cache_leftpad: int32 (batch,), where each sequence's keys start
};

struct ForwardOptions {
  double softmax_scale;
  bool causal;
  int64_t window_left, window_right, attention_chunk;
  double softcap;
  int64_t num_splits = 0;  // the forward's split-KV (0: chosen)
  bool k_batch_of_its_own = false;  // with kv_batch_idx
  bool paged = false;               // with page_table
};

// The KV-cache index tensors on q's device. cache_batch_idx: k and v then hold their own
// number of sequences. page_table: k and v (num_pages, page_size, heads_kv, head_dim),
// each sequence up to max_pages * page_size keys.
void set_kv_cache_index(warpflash::ForwardArgs& args, const KvCacheIndex& index, const at::Tensor& q,
                        const at::Tensor& k) {
  if (index.kv_batch_idx.has_value()) {
    args.kv_batch_idx = int_vector(index.kv_batch_idx, "cache_batch_idx", args.shape.batch, q);
    args.kv_batch = k.size(0);
  }
  args.leftpad_k = int_vector(index.leftpad_k, "cache_leftpad", args.shape.batch, q);
  args.page_table = page_table_of(index.page_table, args.shape.batch, q);
  if (args.page_table == nullptr) return;
  const at::Tensor& table = *index.page_table;
  args.page_table_batch_stride = table.stride(0);
  args.max_pages = table.size(1);
  args.num_pages = k.size(0);
  args.page_size = k.size(1);
  args.shape.seqlen_k = args.max_pages * args.page_size;
}

// The problem of q, k, v and the options, as the C++ API describes it (o and lse unset).
// `sink` keeps the fp32 copy of learnable_sink that args points to. Dense: q (batch,
// seqlen_q, heads_q, head_dim), k (batch, seqlen_k, heads_kv, head_dim), v (...,
// head_dim_v). Packed (cu_seqlens_q given): q (total_q, heads_q, head_dim), k, v (total_k, ...).
warpflash::ForwardArgs problem_args(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const c10::optional<at::Tensor>& cu_seqlens_q,
                                    const c10::optional<at::Tensor>& cu_seqlens_k,
                                    const c10::optional<at::Tensor>& seqused_q,
                                    const c10::optional<at::Tensor>& seqused_k, int64_t max_seqlen_q,
                                    int64_t max_seqlen_k, const ForwardOptions& options,
                                    const c10::optional<at::Tensor>& learnable_sink, at::Tensor& sink) {
  bool packed = cu_seqlens_q.has_value();
  // (A paged cache's sequences are rows of the page table, their lengths seqused_k.)
  TORCH_CHECK_VALUE(packed == cu_seqlens_k.has_value() || (options.paged && !cu_seqlens_k.has_value()),
                    "warpflash: cu_seqlens_q and cu_seqlens_k are given together (varlen) or not at all",
                    options.paged ? " (with a page table: cu_seqlens_q alone, the key lengths in seqused_k)" : "");
  check_tensors(q, k, v, packed ? 3 : 4, options.k_batch_of_its_own, options.paged);
  int64_t batch = packed ? cu_seqlens_q->numel() - 1 : q.size(0);
  TORCH_CHECK_VALUE(!packed || (cu_seqlens_q->dim() == 1 && batch >= 0), "warpflash: cu_seqlens_q has shape ",
                    python_shape(*cu_seqlens_q), "; expected (batch + 1,)");
  warpflash::ForwardArgs args;
  args.cu_seqlens_q = int_vector(cu_seqlens_q, "cu_seqlens_q", batch + 1, q);
  args.cu_seqlens_k = int_vector(cu_seqlens_k, "cu_seqlens_k", batch + 1, q);
  args.seqused_q = int_vector(seqused_q, "seqused_q", batch, q);
  args.seqused_k = int_vector(seqused_k, "seqused_k", batch, q);
  if (learnable_sink.has_value()) {
    int64_t heads_q = q.size(packed ? 1 : 2);
    TORCH_CHECK_VALUE(learnable_sink->dim() == 1 && learnable_sink->size(0) == heads_q,
                      "warpflash: learnable_sink has shape ", python_shape(*learnable_sink), "; expected (",
                      std::to_string(heads_q), ",), one logit per query head");
    TORCH_CHECK_VALUE(learnable_sink->device() == q.device(), "warpflash: learnable_sink is on ",
                      learnable_sink->device().str(), "; q is on ", q.device().str());
    sink = learnable_sink->to(at::kFloat).contiguous();
    args.learnable_sink = sink.data_ptr<float>();
  }
  args.dtype = dtype_of(q.scalar_type());
  if (options.paged) {  // seqlen_k: set_kv_cache_index()
    args.shape = {batch, packed ? max_seqlen_q : q.size(1), 0, q.size(-2), k.size(2), q.size(-1), v.size(3)};
    if (packed) args.total_q = q.size(0);
  } else if (packed) {
    args.shape = {batch, max_seqlen_q, max_seqlen_k, q.size(1), k.size(1), q.size(2), v.size(2)};
    args.total_q = q.size(0);
    args.total_k = k.size(0);
  } else {
    args.shape = {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  }
  args.q = view_of(q);
  args.k = view_of(k);
  args.v = view_of(v);
  args.softmax_scale = static_cast<float>(options.softmax_scale);
  args.causal = options.causal;
  args.window_left = options.window_left;
  args.window_right = options.window_right;
  args.attention_chunk = options.attention_chunk;
  args.softcap = static_cast<float>(options.softcap);
  args.num_splits = options.num_splits;
  args.check_pointers = false;  // CUDA tensors, checked above
  return args;
}

// Returns out (contiguous, shaped like q with v's head dim) and, when with_lse, the fp32
// lse, (batch, heads_q, seqlen_q) or packed (heads_q, total_q) (else an undefined tensor:
// no allocation, no LSE stores).
std::tuple<at::Tensor, at::Tensor> run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const c10::optional<at::Tensor>& cu_seqlens_q,
                                               const c10::optional<at::Tensor>& cu_seqlens_k,
                                               const c10::optional<at::Tensor>& seqused_q,
                                               const c10::optional<at::Tensor>& seqused_k, int64_t max_seqlen_q,
                                               int64_t max_seqlen_k, const ForwardOptions& options,
                                               const c10::optional<at::Tensor>& learnable_sink, bool with_lse,
                                               const c10::optional<at::Tensor>& q_descale,
                                               const c10::optional<at::Tensor>& k_descale,
                                               const c10::optional<at::Tensor>& v_descale,
                                               const KvCacheIndex& kv_cache_index) {
  at::Tensor sink, scales_kept[3];
  warpflash::ForwardArgs args = problem_args(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                                             max_seqlen_k, options, learnable_sink, sink);
  set_fp8_scales(args, q, q_descale, k_descale, v_descale, scales_kept);
  set_kv_cache_index(args, kv_cache_index, q, k);
  c10::cuda::CUDAGuard device_guard(q.device());
  args.stream = c10::cuda::getCurrentCUDAStream().stream();
  bool packed = cu_seqlens_q.has_value();
  std::vector<int64_t> out_shape(q.sizes().begin(), q.sizes().end());
  out_shape.back() = v.size(-1);
  // FP8 inputs give a bfloat16 O.
  bool fp8 = q.scalar_type() == at::kFloat8_e4m3fn;
  at::Tensor out = at::empty(out_shape, fp8 ? q.options().dtype(at::kBFloat16) : q.options());
  at::Tensor lse;
  if (with_lse) {
    lse = packed ? at::empty({q.size(1), q.size(0)}, q.options().dtype(at::kFloat))
                 : at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(at::kFloat));
  }
  args.o = view_of(out);
  args.lse = with_lse ? lse.data_ptr<float>() : nullptr;
  // Scratch for the split of the last round (long non-causal problems), from PyTorch's
  // caching allocator on the same stream.
  at::Tensor workspace;
  if (size_t bytes = warpflash::forward_workspace_bytes(args)) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
    args.workspace = workspace.data_ptr();
    args.workspace_bytes = bytes;
  }
  raise_if_error(warpflash::forward(args));
  return {out, lse};
}

// The operator: a fixed schema with both outputs, for torch.compile and graphs.
std::tuple<at::Tensor, at::Tensor> forward_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const c10::optional<at::Tensor>& cu_seqlens_q,
                                              const c10::optional<at::Tensor>& cu_seqlens_k,
                                              const c10::optional<at::Tensor>& seqused_q,
                                              const c10::optional<at::Tensor>& seqused_k, int64_t max_seqlen_q,
                                              int64_t max_seqlen_k, double softmax_scale, bool causal,
                                              int64_t window_left, int64_t window_right, int64_t attention_chunk,
                                              double softcap, const c10::optional<at::Tensor>& learnable_sink,
                                              bool /*deterministic: the backward's*/,
                                              const c10::optional<at::Tensor>& q_descale,
                                              const c10::optional<at::Tensor>& k_descale,
                                              const c10::optional<at::Tensor>& v_descale, int64_t num_splits,
                                              const c10::optional<at::Tensor>& kv_batch_idx,
                                              const c10::optional<at::Tensor>& page_table,
                                              const c10::optional<at::Tensor>& leftpad_k) {
  return run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                     {softmax_scale, causal, window_left, window_right, attention_chunk, softcap, num_splits,
                      kv_batch_idx.has_value(), page_table.has_value()},
                     learnable_sink, /*with_lse=*/true, q_descale, k_descale, v_descale,
                     {kv_batch_idx, page_table, leftpad_k});
}

// The eager fast path: out alone unless the caller asked for the LSE.
pybind11::object forward_eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const c10::optional<at::Tensor>& cu_seqlens_q,
                               const c10::optional<at::Tensor>& cu_seqlens_k,
                               const c10::optional<at::Tensor>& seqused_q, const c10::optional<at::Tensor>& seqused_k,
                               int64_t max_seqlen_q, int64_t max_seqlen_k, double softmax_scale, bool causal,
                               int64_t window_left, int64_t window_right, int64_t attention_chunk, double softcap,
                               const c10::optional<at::Tensor>& learnable_sink, bool return_lse,
                               const c10::optional<at::Tensor>& q_descale, const c10::optional<at::Tensor>& k_descale,
                               const c10::optional<at::Tensor>& v_descale, int64_t num_splits,
                               const c10::optional<at::Tensor>& kv_batch_idx,
                               const c10::optional<at::Tensor>& page_table,
                               const c10::optional<at::Tensor>& leftpad_k) {
  auto [out, lse] = run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                                {softmax_scale, causal, window_left, window_right, attention_chunk, softcap, num_splits,
                                 kv_batch_idx.has_value(), page_table.has_value()},
                                learnable_sink, return_lse, q_descale, k_descale, v_descale,
                                {kv_batch_idx, page_table, leftpad_k});
  if (!return_lse) return pybind11::cast(out);
  return pybind11::make_tuple(out, lse);
}

// The gradients of q, k, v (and of learnable_sink, fp32; empty without) for d_out, from the
// forward's out and lse (the operator's outputs), with the forward's arguments.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_op(
    const at::Tensor& d_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const c10::optional<at::Tensor>& cu_seqlens_q, const c10::optional<at::Tensor>& cu_seqlens_k,
    const c10::optional<at::Tensor>& seqused_q, const c10::optional<at::Tensor>& seqused_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, double softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    int64_t attention_chunk, double softcap, const c10::optional<at::Tensor>& learnable_sink, bool deterministic) {
  at::Tensor sink;
  warpflash::BackwardArgs args;
  args.forward = problem_args(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                              {softmax_scale, causal, window_left, window_right, attention_chunk, softcap},
                              learnable_sink, sink);
  c10::cuda::CUDAGuard device_guard(q.device());
  args.forward.stream = c10::cuda::getCurrentCUDAStream().stream();
  TORCH_CHECK_VALUE(d_out.sizes() == out.sizes(), "warpflash: the gradient of out has shape ", python_shape(d_out),
                    "; out has ", python_shape(out));
  at::Tensor d_o = d_out.stride(-1) == 1 ? d_out : d_out.contiguous();
  at::Tensor lse_contiguous = lse.contiguous();
  args.forward.o = view_of(out);
  args.forward.lse = lse_contiguous.data_ptr<float>();
  at::Tensor d_q = at::empty(q.sizes(), q.options()), d_k = at::empty(k.sizes(), k.options()),
             d_v = at::empty(v.sizes(), v.options());
  args.d_o = view_of(d_o);
  args.d_q = view_of(d_q);
  args.d_k = view_of(d_k);
  args.d_v = view_of(d_v);
  at::Tensor d_sink = at::empty({learnable_sink.has_value() ? learnable_sink->size(0) : 0}, q.options().dtype(at::kFloat));
  if (learnable_sink.has_value()) args.d_sink = d_sink.data_ptr<float>();
  args.deterministic = deterministic;
  at::Tensor workspace = at::empty({static_cast<int64_t>(warpflash::backward_workspace_bytes(args))},
                                   q.options().dtype(at::kByte));
  args.workspace = workspace.data_ptr();
  args.workspace_bytes = static_cast<size_t>(workspace.numel());
  raise_if_error(warpflash::backward(args));
  return {d_q, d_k, d_v, d_sink};
}

warpflash::DType dtype_named(const std::string& name) {
  if (name == "float8_e4m3fn") return warpflash::DType::kFloat8E4M3;
  return name == "bfloat16" ? warpflash::DType::kBFloat16 : warpflash::DType::kFloat16;
}

}  // namespace

TORCH_LIBRARY(warpflash, m) {
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, Tensor? seqused_q, "
      "Tensor? seqused_k, int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, int window_left, "
      "int window_right, int attention_chunk, float softcap, Tensor? learnable_sink, bool deterministic=False, "
      "Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None, int num_splits=0, "
      "Tensor? kv_batch_idx=None, Tensor? page_table=None, Tensor? leftpad_k=None) -> (Tensor out, Tensor lse)");
  m.def(
      "backward(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? cu_seqlens_q, "
      "Tensor? cu_seqlens_k, Tensor? seqused_q, Tensor? seqused_k, int max_seqlen_q, int max_seqlen_k, "
      "float softmax_scale, bool causal, int window_left, int window_right, int attention_chunk, float softcap, "
      "Tensor? learnable_sink, bool deterministic) -> (Tensor d_q, Tensor d_k, Tensor d_v, Tensor d_sink)");
}

TORCH_LIBRARY_IMPL(warpflash, CUDA, m) {
  m.impl("forward", &forward_op);
  m.impl("backward", &backward_op);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def(
      "compiled_head_dims",
      [](const std::string& dtype) {
        return warpflash::compiled_head_dims(dtype_named(dtype));
      },
      "Head dims this build has kernels for (V's the same): compiled_head_dims('bfloat16', 'float16' or "
      "'float8_e4m3fn')");
  m.def(
      "compiled_head_dim_pairs",
      [](const std::string& dtype) {
        std::vector<std::pair<int, int>> pairs;
        for (warpflash::HeadDims dims : warpflash::compiled_head_dim_pairs(dtype_named(dtype))) {
          pairs.emplace_back(dims.qk, dims.v);
        }
        return pairs;
      },
      "(head_dim, head_dim_v) pairs this build has kernels for: compiled_head_dim_pairs('bfloat16' or 'float16')");
  m.def("forward", &forward_eager,
        "Attention forward: the operator's arguments and return_lse -> out, or (out, lse) with return_lse");
}
