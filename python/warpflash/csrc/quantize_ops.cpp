// PyTorch bindings of quantize_fp8 (registered as a fragment of the warpflash library
// torch_ops.cpp defines).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "common.h"

namespace {

using warpflash_torch::dtype_of;
using warpflash_torch::python_dtype;
using warpflash_torch::python_shape;
using warpflash_torch::raise_if_error;
using warpflash_torch::view_of;

// e4m3 codes of x (contiguous, float8_e4m3fn) and their fp32 scales (batch, heads,
// blocks): x ~= codes * scales per block of block_rows rows (0: per (batch, head)), after
// the random-sign Hadamard transform along head_dim of seed `seed` with `hadamard`.
std::tuple<at::Tensor, at::Tensor> quantize_fp8_op(const at::Tensor& x, int64_t block_rows, bool hadamard,
                                                   int64_t seed) {
  TORCH_CHECK_VALUE(x.dim() == 4, "warpflash: x must be 4-D (batch, seqlen, heads, head_dim), got shape ",
                    python_shape(x));
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16, "warpflash: x has dtype ",
                   python_dtype(x.scalar_type()), "; supported are torch.float16, torch.bfloat16");
  TORCH_CHECK_VALUE(x.is_cuda(), "warpflash: x is on ", x.device().str(), "; warpflash runs on CUDA (Hopper) tensors");
  TORCH_CHECK_VALUE(x.stride(-1) == 1, "warpflash: x.stride(-1) = ", std::to_string(x.stride(-1)),
                    "; the last dimension (head_dim) must be contiguous (call .contiguous())");
  c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor codes = at::empty(x.sizes(), x.options().dtype(at::kFloat8_e4m3fn));
  int64_t blocks = std::max<int64_t>(warpflash::quantize_fp8_num_blocks(x.size(1), block_rows), 0);
  at::Tensor scales = at::empty({x.size(0), x.size(2), blocks}, x.options().dtype(at::kFloat));
  warpflash::QuantizeFp8Args args;
  args.dtype = dtype_of(x.scalar_type());
  args.batch = x.size(0);
  args.seqlen = x.size(1);
  args.heads = x.size(2);
  args.head_dim = x.size(3);
  args.input = view_of(x);
  args.output = view_of(codes);
  args.scales = scales.data_ptr<float>();
  args.block_rows = block_rows;
  args.hadamard = hadamard;
  args.seed = static_cast<uint64_t>(seed);
  args.stream = c10::cuda::getCurrentCUDAStream().stream();
  args.check_pointers = false;  // CUDA tensors, checked above
  raise_if_error(warpflash::quantize_fp8(args));
  return {codes, scales};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(warpflash, m) {
  m.def("quantize_fp8(Tensor x, int block_rows, bool hadamard, int seed) -> (Tensor codes, Tensor scales)");
}

TORCH_LIBRARY_IMPL(warpflash, CUDA, m) { m.impl("quantize_fp8", &quantize_fp8_op); }
