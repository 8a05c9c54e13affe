// The backward's small kernels around the main one: the preprocess (per query row
// rowsum(dO * O) and the LSE in base 2; the dQ accumulator and its semaphores cleared) and
// the postprocess (dQ from its fp32 accumulator, scaled, in the input type).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/attention/seqlen.h"
#include "kernels/backward/config.h"
#include "kernels/backward/workspace.h"
#include "warpflash/backward.h"
#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash::kernels {

struct BackwardPrepostParams {
  TensorView4d o, d_o;          // preprocess: read, head_dim_v wide
  TensorView4d d_q;             // postprocess: written, head_dim wide
  // forward()'s LSE: row r of (batch, head) at batch * lse_batch_stride + head * lse_head_stride + r.
  float const* lse;
  int64_t lse_batch_stride, lse_head_stride;
  SequenceLengths seq_q;
  int batch, heads, head_dim, head_dim_v;
  float softmax_scale;          // postprocess: dQ = scale * accumulator
  // Learnable sinks (may be null): preprocess adds -sum_rows exp(sink - LSE) * dPsum into
  // d_sink (zeroed before it), the gradient of each query head's sink logit; deterministic:
  // it writes each query tile's share to the workspace, and the postprocess sums them in
  // order into d_sink.
  float const* sinks;
  float* d_sink;
  bool deterministic;
  BackwardWorkspace workspace;
  char* workspace_base;
};

// The workspace of valid, non-empty arguments.
inline BackwardWorkspace backward_workspace(BackwardArgs const& args) {
  AttentionShape const& s = args.forward.shape;
  bool packed = args.forward.cu_seqlens_q != nullptr;
  return BackwardWorkspace::plan(s.batch, s.seqlen_q, packed, args.forward.total_q, static_cast<int>(s.heads_q),
                                 static_cast<int>(s.head_dim), backward_block_m(static_cast<int>(s.head_dim)));
}

// The pre- and postprocess's parameters for valid, non-empty arguments and a workspace of
// backward_workspace(args).bytes at args.workspace.
inline BackwardPrepostParams backward_prepost_params(BackwardArgs const& args, float softmax_scale) {
  ForwardArgs const& f = args.forward;
  AttentionShape const& s = f.shape;
  bool packed = f.cu_seqlens_q != nullptr;
  return BackwardPrepostParams{
      f.o,
      args.d_o,
      args.d_q,
      f.lse,
      packed ? 0 : s.heads_q * s.seqlen_q,  // lse: (batch, heads, seqlen_q) or (heads, total_q), as forward() writes it
      packed ? f.total_q : s.seqlen_q,
      SequenceLengths{f.cu_seqlens_q, f.seqused_q, static_cast<int>(s.seqlen_q), static_cast<int>(f.total_q)},
      static_cast<int>(s.batch),
      static_cast<int>(s.heads_q),
      static_cast<int>(s.head_dim),
      static_cast<int>(s.value_head_dim()),
      softmax_scale,
      f.learnable_sink,
      args.d_sink,
      args.deterministic,
      backward_workspace(args),
      static_cast<char*>(args.workspace),
  };
}

Status launch_backward_preprocess(DType dtype, BackwardPrepostParams const& params, cudaStream_t stream);
Status launch_backward_postprocess_dq(DType dtype, BackwardPrepostParams const& params, cudaStream_t stream);

}  // namespace warpflash::kernels
