// PyTorch bindings of the C++ API: tensors in, tensors out, on the current CUDA stream.
// The forward is registered twice: as the operator torch.ops.warpflash.forward (seen by
// torch.compile and CUDA graphs like any op; its shape function lives in
// warpflash/_ops.py), and as the plain function warpflash._C.forward, the eager fast path
// that skips the dispatcher's per-call cost and the LSE when it is not asked for.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>
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

// Messages are built from strings only (numbers through std::to_string): no iostream
// formatting in this extension. Spelled as in Python, so they read like the caller's code.
std::string python_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    default: return std::string("torch.") + c10::toString(type);
  }
}

// A shape as Python prints it: (2, 64, 8).
std::string python_shape(const at::Tensor& t) {
  std::string text = "(";
  for (int64_t i = 0; i < t.dim(); ++i) text += (i ? ", " : "") + std::to_string(t.size(i));
  return text + (t.dim() == 1 ? ",)" : ")");
}

// What the C++ API cannot see in raw pointers: ranks, dtypes, devices, matching shapes.
void check_tensors(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const std::pair<const char*, const at::Tensor*> tensors[] = {{"q", &q}, {"k", &k}, {"v", &v}};
  for (const auto& [name, t] : tensors) {
    TORCH_CHECK_VALUE(t->dim() == 4, "warpflash: ", name, " must be 4-D (batch, seqlen, heads, head_dim), got shape ",
                      python_shape(*t));
    TORCH_CHECK_TYPE(t->scalar_type() == at::kHalf || t->scalar_type() == at::kBFloat16, "warpflash: ", name,
                     " has dtype ", python_dtype(t->scalar_type()), "; supported are torch.float16, torch.bfloat16");
    TORCH_CHECK_VALUE(t->stride(3) == 1 || t->size(3) <= 1, "warpflash: ", name, ".stride(-1) = ",
                      std::to_string(t->stride(3)),
                      "; the last dimension (head_dim) must be contiguous (call .contiguous())");
  }
  TORCH_CHECK_TYPE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
                   "warpflash: q, k, v must share a dtype, got ", python_dtype(q.scalar_type()), ", ",
                   python_dtype(k.scalar_type()), ", ", python_dtype(v.scalar_type()));
  TORCH_CHECK_VALUE(k.sizes() == v.sizes(), "warpflash: k and v must have the same shape, got ", python_shape(k), " and ",
                    python_shape(v));
  TORCH_CHECK_VALUE(q.size(0) == k.size(0) && q.size(3) == k.size(3), "warpflash: q ", python_shape(q), " and k ",
                    python_shape(k), " must agree in batch and head_dim");
  TORCH_CHECK_VALUE(k.size(2) > 0 && q.size(2) % k.size(2) == 0, "warpflash: q heads (", std::to_string(q.size(2)),
                    ") must be a multiple of k/v heads (", std::to_string(k.size(2)), ")");
  for (const auto& [name, t] : tensors) {
    TORCH_CHECK_VALUE(t->is_cuda(), "warpflash: ", name, " is on ", t->device().str(),
                      "; warpflash runs on CUDA (Hopper) tensors");
  }
  TORCH_CHECK_VALUE(q.device() == k.device() && q.device() == v.device(),
                    "warpflash: q, k, v must be on one device, got ", q.device().str(), ", ", k.device().str(), ", ",
                    v.device().str());
}

// q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim).
// Returns out (contiguous, shaped like q) and, when with_lse, lse (batch, heads_q,
// seqlen_q) in fp32 (else an undefined tensor: no allocation, no LSE stores).
std::tuple<at::Tensor, at::Tensor> run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               double softmax_scale, bool causal, bool with_lse) {
  check_tensors(q, k, v);
  c10::cuda::CUDAGuard device_guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse;
  if (with_lse) lse = at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(at::kFloat));

  warpflash::ForwardArgs args;
  args.dtype = q.scalar_type() == at::kBFloat16 ? warpflash::DType::kBFloat16 : warpflash::DType::kFloat16;
  args.shape = {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  args.q = view_of(q);
  args.k = view_of(k);
  args.v = view_of(v);
  args.o = view_of(out);
  args.lse = with_lse ? lse.data_ptr<float>() : nullptr;
  args.softmax_scale = static_cast<float>(softmax_scale);
  args.causal = causal;
  args.stream = c10::cuda::getCurrentCUDAStream().stream();
  args.check_pointers = false;  // CUDA tensors, checked above
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
                                              double softmax_scale, bool causal) {
  return run_forward(q, k, v, softmax_scale, causal, /*with_lse=*/true);
}

// The eager fast path: out alone unless the caller asked for the LSE.
pybind11::object forward_eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double softmax_scale,
                               bool causal, bool return_lse) {
  auto [out, lse] = run_forward(q, k, v, softmax_scale, causal, return_lse);
  if (!return_lse) return pybind11::cast(out);
  return pybind11::make_tuple(out, lse);
}

}  // namespace

TORCH_LIBRARY(warpflash, m) {
  m.def("forward(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal) -> (Tensor out, Tensor lse)");
}

TORCH_LIBRARY_IMPL(warpflash, CUDA, m) { m.impl("forward", &forward_op); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward_eager,
        "Attention forward: (q, k, v, softmax_scale, causal, return_lse) -> out, or (out, lse) with return_lse");
}
