// Backward attention: the gradients dQ, dK, dV (and of the learnable sinks) of forward()'s
// O for an upstream gradient dO, recomputing P from Q, K and forward()'s LSE.
#pragma once

#include <cstddef>

#include "warpflash/forward.h"
#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash {

// Arguments of backward(). Fields are added at the end with defaults that keep the old
// behaviour.
struct BackwardArgs {
  // The forward problem as it was run: dtype, shape, q, k, v, o and its lse (required
  // here), the mask, softcap, sinks, cu_seqlens and seqused. Its workspace fields are
  // not used (backward() has its own, below).
  ForwardArgs forward;
  TensorView4d d_o;  // like forward.o, read only
  TensorView4d d_q;  // like forward.q, written
  TensorView4d d_k;  // like forward.k, written
  TensorView4d d_v;  // like forward.v, written
  // fp32 (heads_q), written when forward.learnable_sink is set: the gradient of each sink.
  float* d_sink = nullptr;
  // dQ accumulated in a fixed order: results bitwise identical run to run, a little slower.
  bool deterministic = false;
  // Scratch device memory, 16-byte aligned, of at least backward_workspace_bytes(args)
  // bytes (required: dO . O row sums, LSE in base 2, the fp32 dQ accumulator); not kept
  // between calls and used in stream order.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Runs the backward pass on forward.stream. Checks every argument before launching anything.
Status backward(const BackwardArgs& args);

// The workspace backward() needs for these arguments (0 for invalid arguments or an empty
// problem).
size_t backward_workspace_bytes(const BackwardArgs& args);

// Checks the arguments of backward() without touching the GPU.
Status validate_backward(const BackwardArgs& args);

}  // namespace warpflash
