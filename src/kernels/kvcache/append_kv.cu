// The KV-cache append with fused rotary embedding: one thread per pair of channels of a
// row (a rotated pair, or two channels copied), over the new keys, the new values and,
// with rotation, the queries, in one launch. Decode appends a few KB: the launch is the
// cost, which is why the three are one kernel rather than PyTorch's dozen of ops.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention/check_cuda.h"
#include "kernels/kvcache/append_kv.h"

namespace warpflash::kernels {
namespace {

__device__ float to_float(float x) { return x; }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float to_float(__half x) { return __half2float(x); }
template <class T>
__device__ T from_float(float x);
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// Where a key or value row goes in its cache, or null where the slot lies outside it.
template <class Element>
__device__ Element* cache_row(AppendKvArgs const& args, TensorView4d const& cache, int b, int64_t slot, int h) {
  int64_t page, row;
  if (args.page_table != nullptr) {
    if (slot < 0 || slot >= args.max_pages * args.cache_seqlen) return nullptr;
    page = args.page_table[b * args.page_table_stride + slot / args.cache_seqlen];
    row = slot % args.cache_seqlen;
  } else {
    if (slot < 0 || slot >= args.cache_seqlen) return nullptr;
    page = args.cache_batch_idx != nullptr ? args.cache_batch_idx[b] : b;
    row = slot;
  }
  if (page < 0 || page >= args.cache_batch) return nullptr;
  return static_cast<Element*>(cache.data) + page * cache.batch_stride + row * cache.seqlen_stride +
         h * cache.head_stride;
}

// Pair p of a row from `from` to `to`: rotated by the angles of `position` where p is below
// rotary_dim / 2 and the position lies in the tables (rotate), copied otherwise. The
// products are rounded before the sum, as PyTorch's x1 * c - x2 * s.
template <class Element, class Angle>
__device__ void pair(AppendKvArgs const& args, Element const* from, Element* to, int p, int64_t position,
                     bool rotate) {
  int half = int(args.rotary_dim / 2);
  if (p < half) {
    int first = args.rotary_interleaved ? 2 * p : p, second = args.rotary_interleaved ? 2 * p + 1 : p + half;
    float x1 = to_float(from[first]), x2 = to_float(from[second]);
    if (rotate && position >= 0 && position < args.rotary_positions) {
      float c = to_float(static_cast<Angle const*>(args.rotary_cos)[position * half + p]);
      float s = to_float(static_cast<Angle const*>(args.rotary_sin)[position * half + p]);
      float y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
      float y2 = __fadd_rn(__fmul_rn(x1, s), __fmul_rn(x2, c));
      x1 = y1;
      x2 = y2;
    }
    to[first] = from_float<Element>(x1);
    to[second] = from_float<Element>(x2);
  } else {
    to[2 * p] = from[2 * p];
    to[2 * p + 1] = from[2 * p + 1];
  }
}

template <class Element, class Angle>
__global__ void append_kv_kernel(AppendKvArgs const args, int64_t k_pairs, int64_t v_pairs, int64_t q_pairs) {
  int64_t total = k_pairs + v_pairs + q_pairs;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    bool is_q = i >= k_pairs + v_pairs;
    bool is_v = !is_q && i >= k_pairs;
    int64_t index = is_q ? i - k_pairs - v_pairs : is_v ? i - k_pairs : i;
    int pairs = int((is_v ? args.head_dim_v : args.head_dim) / 2);
    int p = int(index % pairs);
    int64_t row = index / pairs;
    int64_t heads = is_q ? args.heads_q : args.heads_kv, seqlen = is_q ? args.seqlen_q : args.seqlen_new;
    int h = int(row % heads);
    int64_t t = row / heads % seqlen;
    int b = int(row / heads / seqlen);
    int64_t start = args.cache_seqlens[b];
    if (is_q) {
      int64_t position = start + (args.q_per_token ? t : 0);
      auto offset = [&](TensorView4d const& view) {
        return b * view.batch_stride + t * view.seqlen_stride + h * view.head_stride;
      };
      pair<Element, Angle>(args, static_cast<Element const*>(args.q.data) + offset(args.q),
                           static_cast<Element*>(args.q_out.data) + offset(args.q_out), p, position, true);
      continue;
    }
    TensorView4d const& from = is_v ? args.v_new : args.k_new;
    Element* to = cache_row<Element>(args, is_v ? args.v_cache : args.k_cache, b, start + t, h);
    if (to == nullptr) continue;
    pair<Element, Angle>(args,
                         static_cast<Element const*>(from.data) + b * from.batch_stride + t * from.seqlen_stride +
                             h * from.head_stride,
                         to, p, start + t, !is_v);
  }
}

template <class Element, class Angle>
Status launch(AppendKvArgs const& args) {
  int64_t kv_rows = args.batch * args.seqlen_new * args.heads_kv;
  int64_t q_rows = args.rotary_dim > 0 ? args.batch * args.seqlen_q * args.heads_q : 0;
  int64_t k_pairs = kv_rows * (args.head_dim / 2), v_pairs = kv_rows * (args.head_dim_v / 2);
  int64_t q_pairs = q_rows * (args.head_dim / 2);
  constexpr int kThreads = 256;
  int64_t blocks = (k_pairs + v_pairs + q_pairs + kThreads - 1) / kThreads;
  int grid = int(blocks < 65536 ? blocks : 65536);  // a grid-stride loop covers the rest
  append_kv_kernel<Element, Angle><<<grid, kThreads, 0, args.stream>>>(args, k_pairs, v_pairs, q_pairs);
  return check_cuda(cudaGetLastError(), "warpflash::append_kv_cache: kernel launch");
}

}  // namespace

Status launch_append_kv(const AppendKvArgs& args) {
  if (args.dtype == DType::kBFloat16) {
    return args.rotary_fp32 ? launch<__nv_bfloat16, float>(args) : launch<__nv_bfloat16, __nv_bfloat16>(args);
  }
  return args.rotary_fp32 ? launch<__half, float>(args) : launch<__half, __half>(args);
}

}  // namespace warpflash::kernels
