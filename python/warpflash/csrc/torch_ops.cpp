// PyTorch operators over the C++ API: tensors in, tensors out, on the current CUDA stream.
// Registered with TORCH_LIBRARY so torch.compile and CUDA graphs see ordinary ops; the
// shape functions (fake implementations) live in Python (warpflash/_ops.py).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "warpflash/warpflash.h"

namespace {

warpflash::TensorView4d view_of(const at::Tensor& t) {
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

// Library errors keep their message: bad arguments raise ValueError, CUDA failures RuntimeError.
void raise_if_error(const warpflash::Status& status) {
  if (status.ok()) return;
  if (status.code() == warpflash::StatusCode::kCudaError) TORCH_CHECK(false, status.message());
  TORCH_CHECK_VALUE(false, status.message());
}

warpflash::DType dtype_of(const at::Tensor& t) {
  if (t.scalar_type() == at::kBFloat16) return warpflash::DType::kBFloat16;
  if (t.scalar_type() == at::kHalf) return warpflash::DType::kFloat16;
  TORCH_CHECK_TYPE(false, "warpflash: q has dtype ", t.scalar_type(), "; supported are torch.float16, torch.bfloat16");
}

// q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim).
// Returns out (contiguous, like q) and lse (batch, heads_q, seqlen_q) fp32.
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           double softmax_scale, bool causal) {
  for (const auto* t : {&q, &k, &v}) {
    TORCH_CHECK_VALUE(t->dim() == 4, "warpflash: expected 4-D (batch, seqlen, heads, head_dim) tensors, got ",
                      t->sizes());
    TORCH_CHECK_VALUE(t->is_cuda(), "warpflash: tensors must be on a CUDA device, got ", t->device());
  }
  c10::cuda::CUDAGuard device_guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(at::kFloat));

  warpflash::ForwardArgs args;
  args.dtype = dtype_of(q);
  args.shape = {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  args.q = view_of(q);
  args.k = view_of(k);
  args.v = view_of(v);
  args.o = view_of(out);
  args.lse = lse.data_ptr<float>();
  args.softmax_scale = static_cast<float>(softmax_scale);
  args.causal = causal;
  args.stream = c10::cuda::getCurrentCUDAStream().stream();
  raise_if_error(warpflash::forward(args));
  return {out, lse};
}

}  // namespace

TORCH_LIBRARY(warpflash, m) {
  m.def("forward(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal) -> (Tensor out, Tensor lse)");
}

TORCH_LIBRARY_IMPL(warpflash, CUDA, m) { m.impl("forward", &forward); }
