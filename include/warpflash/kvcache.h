// Appending new tokens to a KV cache in place, with the rotary embedding fused: what
// flash_attn_with_kvcache does with k, v, rotary_cos and rotary_sin before its attention
// (forward() then reads the cache with seqused_k = cache_seqlens + seqlen_new). One kernel
// rotates the new keys and writes them and the new values into their cache slots
// (contiguous or paged), and rotates q into q_out.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash {

// Layouts (views as in tensor.h; head_dim contiguous, data and strides 4-byte aligned):
// - k_new, v_new: (batch, seqlen_new, heads_kv, head_dim / head_dim_v), read.
// - k_cache, v_cache: written in place. Contiguous: (cache_batch, cache_seqlen, heads_kv,
//   ...), sequence b at row b (or cache_batch_idx[b]). Paged (page_table not null):
//   (num_pages, page_size, heads_kv, ...), token t of sequence b in row t % page_size of
//   page page_table[b * page_table_stride + t / page_size]; cache_batch is num_pages and
//   cache_seqlen the page size.
// - cache_seqlens: int32 (batch,) in device memory: sequence b's new token t goes to slot
//   cache_seqlens[b] + t and is rotated by the angles of that position.
// - rotary_cos, rotary_sin: (rotary_positions, rotary_dim / 2) contiguous, in `dtype` or
//   fp32 (rotary_fp32); the first rotary_dim channels of each key (and query) row are
//   rotated, pairs (2i, 2i + 1) when rotary_interleaved (GPT-J), (i, i + rotary_dim / 2)
//   otherwise (GPT-NeoX), in fp32 (products rounded before the sum, as PyTorch's
//   elementwise ops), then rounded to `dtype`. rotary_dim 0: no rotation, q untouched.
// - q: (batch, seqlen_q, heads_q, head_dim) read, q_out the same shape written: q rotated
//   at positions cache_seqlens[b] + t (q_per_token: causal or windowed attention) or
//   cache_seqlens[b] for every query token. Only with rotary_dim > 0.
// Slots and positions are the caller's contract (device data the host cannot read without
// a sync): a token whose slot lies outside its cache (cache_seqlen rows, or max_pages
// pages, or a page id outside [0, cache_batch)) is not written, and a row whose position
// lies outside the rotary tables is written unrotated; nothing is read or written outside
// the tensors.
struct AppendKvArgs {
  DType dtype = DType::kBFloat16;  // of q, k, v and the caches: bfloat16 or float16
  int64_t batch = 0;
  int64_t seqlen_new = 0;
  int64_t seqlen_q = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;    // of q and k: even, up to 256
  int64_t head_dim_v = 0;  // of v: even, up to 256
  TensorView4d k_new, v_new;
  TensorView4d k_cache, v_cache;
  int64_t cache_batch = 0;   // rows of the caches' first dimension (sequences or pages)
  int64_t cache_seqlen = 0;  // rows per sequence, or the page size
  const int32_t* cache_seqlens = nullptr;
  const int32_t* cache_batch_idx = nullptr;  // contiguous caches only; null: row b
  const int32_t* page_table = nullptr;
  int64_t page_table_stride = 0;  // elements between sequences' rows of the table
  int64_t max_pages = 0;          // pages per sequence in the table
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  int64_t rotary_positions = 0;
  int64_t rotary_dim = 0;  // 0 (none) or even, up to head_dim
  bool rotary_fp32 = false;
  bool rotary_interleaved = true;
  TensorView4d q, q_out;
  bool q_per_token = true;
  cudaStream_t stream = nullptr;
  bool check_pointers = true;  // ask the CUDA runtime whether the pointers are device memory
};

// Appends on `stream`, checking every argument first. batch == 0 or seqlen_new == 0 with
// no rotation of q is a no-op.
Status append_kv_cache(const AppendKvArgs& args);

// Checks the arguments of append_kv_cache() without touching the GPU.
Status validate_append_kv_cache(const AppendKvArgs& args);

}  // namespace warpflash
