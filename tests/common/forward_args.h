// The forward's arguments over contiguous (batch, seqlen, heads, head_dim) device buffers,
// for the GPU tests that need no other layout.
#pragma once

#include "warpflash/warpflash.h"

namespace warpflash::testing {

inline ForwardArgs contiguous_forward_args(DType dtype, const AttentionShape& shape, void* q, void* k, void* v,
                                           void* o, float* lse) {
  ForwardArgs args;
  args.dtype = dtype;
  args.shape = shape;
  args.q = contiguous_view(q, shape.seqlen_q, shape.heads_q, shape.head_dim);
  args.k = contiguous_view(k, shape.seqlen_k, shape.heads_kv, shape.head_dim);
  args.v = contiguous_view(v, shape.seqlen_k, shape.heads_kv, shape.value_head_dim());
  args.o = contiguous_view(o, shape.seqlen_q, shape.heads_q, shape.value_head_dim());
  args.lse = lse;
  return args;
}

}  // namespace warpflash::testing
