// Forward attention: O = softmax(scale * Q K^T + mask) V, and optionally its log-sum-exp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <cuda_runtime_api.h>

#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash {

// Sizes of one attention problem. Q has heads_q heads, K and V have heads_kv
// (GQA/MQA: heads_q must be a multiple of heads_kv; Q head h reads KV head
// h / (heads_q / heads_kv)). head_dim is Q's and K's; V and O have head_dim_v (0: the
// same), e.g. 192 and 128 for DeepSeek-V3's prefill.
struct AttentionShape {
  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;
  int64_t value_head_dim() const { return head_dim_v != 0 ? head_dim_v : head_dim; }
};

// Arguments of forward(). Fields are added at the end with defaults that keep the old
// behaviour, so callers that set fields by name keep compiling.
struct ForwardArgs {
  // Of Q, K, V and O alike; for kFloat8E4M3 (FP8) of Q, K and V, and O is bfloat16.
  DType dtype = DType::kBFloat16;
  AttentionShape shape;
  TensorView4d q;  // (batch, seqlen_q, heads_q, head_dim), read only
  TensorView4d k;  // (batch, seqlen_k, heads_kv, head_dim), read only
  TensorView4d v;  // (batch, seqlen_k, heads_kv, head_dim_v), read only
  TensorView4d o;  // (batch, seqlen_q, heads_q, head_dim_v), written
  // Optional fp32 output, contiguous (batch, heads_q, seqlen_q), natural log.
  float* lse = nullptr;
  // Scale applied to Q K^T before the softmax; default 1 / sqrt(head_dim).
  std::optional<float> softmax_scale;
  // Causal mask aligned to the bottom-right corner: query i sees key j when
  // j <= i + seqlen_k - seqlen_q (as FlashAttention 2 and later).
  bool causal = false;
  cudaStream_t stream = nullptr;
  // Asks the CUDA runtime whether q, k, v, o and lse are device memory (a host pointer
  // would fault inside the kernel). Callers whose tensors are known to live on the GPU
  // (framework bindings) may turn it off to save about a microsecond per call.
  bool check_pointers = true;
  // Scratch device memory, 16-byte aligned, of at least forward_workspace_bytes(args)
  // bytes; not kept between calls and used in stream order. With it, long non-causal
  // problems whose tiles do not divide evenly among the SMs split the last round's tiles
  // along the keys, so that no SM idles at the end (on the H200 +2-3% at 16k keys, +6-10%
  // at 15k), and sequences of different lengths (cu_seqlens, seqused), windows and causal
  // masks take their tiles in a dynamic order that keeps the SMs evenly busy (causal ones
  // in groups of heads whose K/V stay in L2: +3-8% at d = 192 and 256). Without it
  // (nullptr) forward() runs unsplit and in a static order: slower there, the same results
  // to rounding.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  // Sliding window (FlashAttention's window_size = (window_left, window_right)): query i
  // sees key j when i + d - window_left <= j <= i + d + window_right, d = seqlen_k -
  // seqlen_q of its sequences (bottom-right aligned); -1 leaves a side unbounded. causal
  // sets window_right = 0. K/V blocks outside the window are skipped.
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Chunked attention (Llama 4's attention_chunk): > 0 limits query i to the keys j in its
  // chunk, floor(j / chunk) == floor((i + d) / chunk); combines with causal and windows.
  int64_t attention_chunk = 0;
  // Softcap (Gemma 2): > 0 replaces each scaled score s by softcap * tanh(s / softcap).
  float softcap = 0.f;
  // Learnable attention sinks (gpt-oss): fp32 (heads_q), one logit per query head that
  // joins every row's softmax denominator without a value row; the LSE includes it. Rows
  // that see no key then get O = 0 and LSE = the sink. null: none.
  const float* learnable_sink = nullptr;

  // Variable-length batches in FlashAttention's packed layout, each side on its own: with
  // cu_seqlens_q (int32 (batch + 1) on the device, cu_seqlens_q[0] = 0, non-decreasing)
  // q and o hold the batch's sequences one after the other, total_q rows of
  // (heads_q, head_dim) (their views' batch_stride is unused), sequence b in rows
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]), shape.seqlen_q is the longest sequence
  // (max_seqlen_q) and the LSE is (heads_q, total_q). Likewise cu_seqlens_k for k and v.
  // Values that break these rules give wrong results but no access outside the tensors.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int64_t total_q = 0;
  int64_t total_k = 0;
  // Optional int32 (batch) on the device: only the first seqused[b] tokens of sequence b
  // count (the rest of its rows are neither attended to nor written), packed or dense.
  // Keys past seqused are still read (as the rest of a K/V block) and must be finite.
  const int* seqused_q = nullptr;
  const int* seqused_k = nullptr;

  // FP8 (dtype kFloat8E4M3) only: FlashAttention-3's descales, fp32 on the device,
  // contiguous (batch, heads_kv) (one value per tensor: broadcast it), null for 1. Q's
  // values are q * q_descale[b, h / (heads_q / heads_kv)], likewise K's and V's: the scores
  // are scaled by q_descale * k_descale, O by v_descale. Softcap is not supported with FP8.
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;

  // FP8 only, dense batches only: the FlashAttention-3 paper's block quantization, one
  // fp32 scale per block of rows in quantize_fp8()'s layout: contiguous (batch, heads,
  // num_blocks), heads = heads_q for Q and heads_kv for K and V, num_blocks =
  // ceil(seqlen / block_rows), or 1 with block_rows 0 (one scale per (batch, head)). Q's
  // values are q * q_block_scale[b, h, row / q_block_rows], likewise K's and V's with
  // kv_block_rows; scales must be positive and finite. They combine with the descales
  // above. null: none. q_block_rows: 64, 128 or 0; kv_block_rows: 128 or 0.
  const float* q_block_scale = nullptr;
  const float* k_block_scale = nullptr;
  const float* v_block_scale = nullptr;
  int64_t q_block_rows = 64;
  int64_t kv_block_rows = 128;

  // Split-KV (flash-decoding; FlashAttention's num_splits): each query tile's keys are
  // divided among num_splits CTAs whose partial results are merged by their LSE, so that
  // problems with fewer tiles than SMs (decode) keep every SM reading K and V. 0 lets
  // forward() choose from the problem and the SM count (it splits only with a workspace,
  // into equal runs of all tiles' keys, one per SM, so that the SMs need not be a multiple
  // of the tiles); 1 never splits; 2..128 always split each tile into that many pieces
  // (the workspace of forward_workspace_bytes() is then required). Splitting needs dense
  // queries (no cu_seqlens_q, no seqused_q), no learnable_sink and 16-bit inputs;
  // num_splits = 0 quietly does not split otherwise.
  // (Decode with GQA also packs the query heads of each K/V head into one tile: with
  // seqlen_q = 1, no sinks and no Q block scales; automatic.)
  int64_t num_splits = 0;

  // KV-cache rows (FlashAttention's cache_batch_idx): optional int32 (batch) on the device;
  // sequence b reads K and V at batch index kv_batch_idx[b] of k and v, which then hold
  // kv_batch sequences (dense K/V only; not with FP8 block scales). Indices outside
  // [0, kv_batch) are the caller's contract: they read zeros, never outside the tensors.
  const int* kv_batch_idx = nullptr;
  int64_t kv_batch = 0;

  // Paged KV cache (FlashAttention's page_table, vLLM's block table): K and V hold
  // num_pages pages of page_size rows, their views (num_pages, page_size, heads_kv,
  // head_dim) (batch_stride: one page, seqlen_stride: one row); key j of sequence b is
  // row j % page_size of page page_table[b * page_table_batch_stride + j / page_size].
  // page_table: int32 on the device, max_pages entries per sequence; shape.seqlen_k is
  // at most max_pages * page_size and seqused_k (else seqlen_k) counts each sequence's
  // keys. Any page size: a K/V block (128 keys; 64 at head_dim 256) is loaded in runs of
  // gcd(page_size, block) rows, TMA boxes per run, or, for runs under 64 rows, copied row
  // by row by the producer warps; decode over pages of 64 rows and more takes the
  // contiguous cache's time, over smaller ones about 1.1x (docs/benchmarks.md). Head dims
  // 64, 128 and 256 (others return NotSupported). Not with cu_seqlens_k, kv_batch_idx or
  // FP8. Page ids outside [0, num_pages) are the caller's contract: their keys read as
  // zeros, never outside k and v.
  const int* page_table = nullptr;
  int64_t page_table_batch_stride = 0;
  int64_t max_pages = 0;
  int64_t num_pages = 0;
  int64_t page_size = 0;

  // KV-cache left padding (FlashAttention's cache_leftpad): optional int32 (batch) on the
  // device; sequence b's keys are rows [leftpad_k[b], seqused_k[b] (else its length)) of
  // its K/V rows (dense, kv_batch_idx's row, packed or paged); the rows before are not
  // attended, and causal masks and windows align to the keys that remain. Values outside
  // [0, that length] are clamped. 16-bit inputs, head dims 64, 128 and 256 (the kernels
  // of paged caches; others return NotSupported). With a page table the blocks are copied
  // row by row (paged_kv.h's gather), whatever the page size.
  const int* leftpad_k = nullptr;
};

// Runs the forward pass on `stream`. Checks every argument before launching anything.
//
// Empty problems: batch == 0 or seqlen_q == 0 is a no-op. A query row that sees no key
// (seqlen_k == 0, a causal row above the bottom-right diagonal, a row outside its window)
// gets O = 0 and LSE = -inf.
Status forward(const ForwardArgs& args);

// The workspace forward() can use for these arguments on the current device (an upper
// bound; 0 when the kernel it picks never splits or the arguments are invalid).
size_t forward_workspace_bytes(const ForwardArgs& args);

// Checks the arguments of forward() without touching the GPU.
Status validate_forward(const ForwardArgs& args);

// What this build compiled for a dtype, ascending: the head dims with head_dim_v ==
// head_dim, and every (head_dim, head_dim_v) pair.
std::vector<int> compiled_head_dims(DType dtype);
struct HeadDims {
  int qk;  // of Q and K
  int v;   // of V and O
};
std::vector<HeadDims> compiled_head_dim_pairs(DType dtype);

}  // namespace warpflash
