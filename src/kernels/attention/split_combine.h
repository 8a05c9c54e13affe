// The merge of a split tile's pieces (the split tail, split_tail.h, or split-KV,
// split_kv.h) into O and the LSE: for each row of a split tile, O = sum_i exp(lse_i - lse)
// O_i with lse = log(sum_i exp(lse_i)), over the pieces the forward kernel left in the
// workspace. Runs after the forward kernel on its stream.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/attention/split_kv.h"
#include "kernels/attention/tile_scheduler.h"
#include "warpflash/status.h"

namespace warpflash::kernels {

struct SplitCombineParams {
  float const* workspace;  // per slot: O (block_m, head_dim), then LSE (block_m)
  ForwardTileScheduler scheduler;  // the forward kernel's, with its split tail
  SplitKv split_kv;                // active: split-KV's pieces instead of the tail's
  // Packed GQA: row p of a tile's head lies at O row (p / pack) * o_seqlen_stride +
  // (p % pack) * o_group_stride, LSE (p / pack) + (p % pack) * lse_group_stride (divisor
  // 1: row p itself).
  FastDivmod by_pack;
  int64_t o_group_stride;
  int64_t lse_group_stride;
  int ctas;                        // the forward kernel's grid
  int block_m;
  int head_dim;
  int seqlen_q;  // query rows of a (batch, head)
  void* o;  // of the input type
  int64_t o_batch_stride;
  int64_t o_seqlen_stride;
  int64_t o_head_stride;
  float* lse;  // may be null
};

// Element: cutlass::bfloat16_t or cutlass::half_t (split_combine.cu).
template <class Element>
Status launch_split_combine(SplitCombineParams const& params, cudaStream_t stream);

}  // namespace warpflash::kernels
