// FP8 quantization for the FP8 attention: a BF16/FP16 (batch, seqlen, heads, head_dim)
// tensor to e4m3 values and fp32 scales, optionally after the random-sign Hadamard
// transform along head_dim (the FlashAttention-3 paper's incoherent processing), in one
// kernel that reads the input once and writes the e4m3 values and scales once.
#pragma once

#include <array>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash {

// Layouts:
// - input: (batch, seqlen, heads, head_dim) in `dtype`, head_dim contiguous, strides in
//   elements as every view (tensor.h): data 16-byte aligned, strides multiples of 8
//   elements.
// - output: (batch, seqlen, heads, head_dim) e4m3 (OCP E4M3FN, cutlass::float_e4m3_t, one
//   byte per element), same convention: data 16-byte aligned, strides multiples of 16
//   elements (what TMA needs to read it back), typically contiguous.
// - scales: fp32, contiguous (batch, heads, num_blocks), num_blocks =
//   quantize_fp8_num_blocks(seqlen, block_rows); scale (b, h, i) belongs to rows
//   [i * block_rows, min(seqlen, (i + 1) * block_rows)) of head h of batch b.
// With y = the input row (or H diag(signs) row / sqrt(head_dim) with hadamard, H the
// Sylvester Hadamard matrix), each group gets scale = amax(|y|) / 448 (1 for a group that
// is all zeros) and output = e4m3(y / scale), rounded to nearest even and saturated to
// +-448; so y ~= output * scale. NaN inputs are left out of amax and stay NaN.
struct QuantizeFp8Args {
  DType dtype = DType::kBFloat16;  // of the input
  int64_t batch = 0;
  int64_t seqlen = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;  // 64, 96, 128, 192 or 256
  TensorView4d input;    // read only
  TensorView4d output;   // e4m3, written
  float* scales = nullptr;  // written
  // Rows per scale: 64 (what the FP8 attention reads for Q), 128 (for K and V), or 0 for
  // one scale per (batch, head) over all seqlen rows. With 0 and seqlen > 128 the input
  // is read twice (its amax first).
  int64_t block_rows = 128;
  // The random-sign Hadamard transform first (head_dim 64, 128 or 256), with the signs
  // hadamard_sign_bits(head_dim, seed); Q and K must use the same seed.
  bool hadamard = false;
  uint64_t seed = 0;
  cudaStream_t stream = nullptr;
  // Asks the CUDA runtime whether input, output and scales are device memory (as
  // ForwardArgs::check_pointers).
  bool check_pointers = true;
};

// Quantizes on `stream`. Checks every argument before launching anything. batch == 0 is
// a no-op; seqlen == 0 writes only the scales of block_rows 0 (1: an empty group).
Status quantize_fp8(const QuantizeFp8Args& args);

// Checks the arguments of quantize_fp8() without touching the GPU.
Status validate_quantize_fp8(const QuantizeFp8Args& args);

// Scales per (batch, head): ceil(seqlen / block_rows), or 1 when block_rows is 0; 0 for
// arguments quantize_fp8() rejects (seqlen < 0, block_rows < 0).
int64_t quantize_fp8_num_blocks(int64_t seqlen, int64_t block_rows);

// The random signs of the Hadamard transform as a bitmask: bit i (word i / 64, bit
// i % 64) is set when sign i is -1. The signs are the low bits of std::mt19937_64(seed)'s
// first n draws (1: -1), as reference::hadamard_signs; only the first min(n, 256) are
// drawn (256 is the largest head_dim), the other bits stay 0.
std::array<uint64_t, 4> hadamard_sign_bits(int64_t n, uint64_t seed);

}  // namespace warpflash
