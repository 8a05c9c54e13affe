// The FP8 quantization kernel: one CTA per block of rows of one (batch, head). Every thread
// loads its slice of a few rows with 16-byte loads, applies the random signs and the
// Hadamard transform in registers (butterflies within the thread, then across the lanes
// of the row with shuffles), and keeps the result in registers while the CTA reduces the
// block's amax; then it writes the e4m3 values with 8-byte stores, and one thread the
// scale. Bytes moved: 2 read + 1 written per element (plus 4 per scale); block_rows 0
// past 128 rows reads twice (an amax pass first), 5 per element.
//
// Arithmetic is IEEE fp32 (this file is compiled without fast-math's flush-to-zero and
// approximate division, see src/CMakeLists.txt). Without the transform every byte equals
// the double-precision reference's (e4m3_rounding.h says how); with it, the transform's
// fp32 rounding can move a value that lies within an fp32 rounding of an e4m3 tie to the
// neighbouring code.
#include "kernels/quantize/quantize_fp8.h"

#include <algorithm>
#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attention/check_cuda.h"
#include "kernels/quantize/e4m3_rounding.h"

namespace warpflash::kernels {
namespace {

constexpr float kE4m3Max = 448.f;

// How the threads of a warp cover rows of kHeadDim elements: kLanes lanes per row (their
// 16-byte vectors interleaved, so each load instruction reads whole 128-byte segments),
// kVectors vectors of 8 elements per lane and row, kSlices rows per thread (about 64
// values in registers), kGroups rows side by side in the warp.
template <int kHeadDim>
struct RowLayout {
  static constexpr int kLanes = kHeadDim == 96 ? 4 : 8;  // 96 = 12 vectors: 4 lanes of 3
  static constexpr int kVectors = kHeadDim / 8 / kLanes;
  static constexpr int kValues = kVectors * 8;  // per thread and row
  static constexpr int kSlices = 64 / kValues;
  static constexpr int kGroups = 32 / kLanes;
  static constexpr int kRowsPerWarp = kSlices * kGroups;
  static constexpr int kMaxWarps = kQuantizeMaxChunkRows / kRowsPerWarp;
  static_assert(kHeadDim % (8 * kLanes) == 0 && kQuantizeMaxChunkRows % kRowsPerWarp == 0);
};

// What one launch does with each chunk of rows.
enum class Pass : int {
  kOnePass,           // the chunk is a block: its amax, scale and e4m3 values
  kAmax,              // block_rows 0, first pass: the chunk's amax maxed into amax[b, h]
  kQuantizeWithAmax,  // block_rows 0, second pass: the e4m3 values for amax[b, h]
};

struct QuantizeParams {
  const uint8_t* input;  // element strides below; 2 bytes per element
  int64_t in_batch_stride, in_seqlen_stride, in_head_stride;
  uint8_t* output;  // 1 byte per element
  int64_t out_batch_stride, out_seqlen_stride, out_head_stride;
  // kOnePass: the (batch, heads, num_chunks) scales; otherwise (batch, heads) amax values
  // as fp32 bits, which finalize_scales_kernel turns into scales.
  float* scales;
  int seqlen, heads, num_chunks, chunk_rows;
  double scale_divisor;  // 448, times sqrt(head_dim) with the transform (the rows are kept unnormalized)
  uint64_t sign_bits[4];
  Pass pass;
};

__device__ float2 to_float2(__nv_bfloat16, uint32_t pair) {
  return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
}
__device__ float2 to_float2(__half, uint32_t pair) {
  __half2 h;
  memcpy(&h, &pair, sizeof h);
  return __half22float2(h);
}

__device__ float scale_of(float amax, double divisor) {
  return amax > 0.f ? static_cast<float>(__ddiv_rn(amax, divisor)) : 1.f;
}

// The Sylvester Hadamard transform (unnormalized) of the kN values of one thread.
template <int kN>
__device__ void hadamard_in_thread(float (&x)[kN]) {
#pragma unroll
  for (int half = 1; half < kN; half *= 2) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if ((i & half) == 0) {
        const float a = x[i], b = x[i + half];
        x[i] = a + b;
        x[i + half] = a - b;
      }
    }
  }
}

// The butterflies across the kLanes lanes of a row: of two lanes whose ids differ in the
// mask's bit, the one with the bit clear holds a and gets a + b, its partner holds b and
// gets a - b; both are partner + sign * own.
template <int kLanes, int kN>
__device__ void hadamard_across_lanes(float (&x)[kN], int lane) {
#pragma unroll
  for (int mask = 1; mask < kLanes; mask *= 2) {
    const float sign = (lane & mask) ? -1.f : 1.f;
#pragma unroll
    for (int i = 0; i < kN; ++i) x[i] = fmaf(sign, x[i], __shfl_xor_sync(0xffffffffu, x[i], mask));
  }
}

template <class Element, int kHeadDim, bool kHadamard>
__global__ void __launch_bounds__(RowLayout<kHeadDim>::kMaxWarps * 32, 1) quantize_fp8_kernel(const QuantizeParams p) {
  using Layout = RowLayout<kHeadDim>;
  constexpr int kLanes = Layout::kLanes, kVectors = Layout::kVectors, kSlices = Layout::kSlices;
  static_assert(!kHadamard || kLanes == 8, "the signs of lane l's vector k are byte l of sign word k");
  // CTA -> (batch, chunk, head) with the heads fastest: CTAs that run together read
  // neighbouring heads of the same rows (adjacent memory in the usual layout).
  const int head = static_cast<int>(blockIdx.x % p.heads);
  const int64_t batch_chunk = blockIdx.x / p.heads;
  const int chunk = static_cast<int>(batch_chunk % p.num_chunks);
  const int64_t batch = batch_chunk / p.num_chunks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lane_in_row = lane % kLanes;
  const int first_row = chunk * p.chunk_rows + warp * Layout::kRowsPerWarp + lane / kLanes;
  auto row_of = [&](int slice) { return first_row + slice * Layout::kGroups; };

  // Load every row first, all loads in flight at once, as 16-bit pairs with the random
  // signs applied (xor of the sign bits).
  uint32_t pairs[kSlices][kVectors * 4];
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    const bool in_range = row_of(s) < p.seqlen;
    const uint4* row = reinterpret_cast<const uint4*>(
        p.input + 2 * (batch * p.in_batch_stride + int64_t(row_of(s)) * p.in_seqlen_stride + head * p.in_head_stride));
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const uint4 raw = in_range ? __ldg(row + k * kLanes + lane_in_row) : make_uint4(0, 0, 0, 0);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
      const uint32_t sign_byte = kHadamard ? uint32_t(p.sign_bits[k] >> (8 * lane_in_row)) & 0xffu : 0u;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const uint32_t signs = ((sign_byte >> (2 * t)) & 1u) << 15 | ((sign_byte >> (2 * t + 1)) & 1u) << 31;
        pairs[s][k * 4 + t] = words[t] ^ signs;
      }
    }
  }
  // Without the transform the pairs are the values (half the registers of fp32); with it,
  // the transformed rows in fp32.
  float transformed[kSlices][kHadamard ? Layout::kValues : 1] = {};
  auto value = [&](int s, int i) {
    if constexpr (kHadamard) return transformed[s][i];
    const float2 f = to_float2(Element{}, pairs[s][i / 2]);
    return i % 2 ? f.y : f.x;
  };
  if constexpr (kHadamard) {
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
#pragma unroll
      for (int i = 0; i < Layout::kValues; i += 2) {
        const float2 f = to_float2(Element{}, pairs[s][i / 2]);
        transformed[s][i] = f.x;
        transformed[s][i + 1] = f.y;
      }
      hadamard_in_thread(transformed[s]);
      hadamard_across_lanes<kLanes>(transformed[s], lane);
    }
  }
  float local_amax = 0.f;
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int i = 0; i < Layout::kValues; ++i) local_amax = fmaxf(local_amax, fabsf(value(s, i)));  // drops NaN

  // The chunk's amax: a warp reduction of the (non-negative, so integer-ordered) fp32
  // bits, then one word per warp in shared memory.
  const int64_t head_index = batch * p.heads + head;
  float amax;
  if (p.pass == Pass::kQuantizeWithAmax) {
    amax = __ldg(p.scales + head_index);
  } else {
    __shared__ uint32_t warp_amax[Layout::kMaxWarps];
    const uint32_t warp_bits = __reduce_max_sync(0xffffffffu, __float_as_uint(local_amax));
    if (lane == 0) warp_amax[warp] = warp_bits;
    __syncthreads();
    uint32_t bits = 0;
    for (int w = 0; w < int(blockDim.x / 32); ++w) bits = max(bits, warp_amax[w]);
    amax = __uint_as_float(bits);
    if (p.pass == Pass::kAmax) {
      if (threadIdx.x == 0) atomicMax(reinterpret_cast<uint32_t*>(p.scales) + head_index, bits);
      return;
    }
    if (threadIdx.x == 0) p.scales[head_index * p.num_chunks + chunk] = scale_of(amax, p.scale_divisor);
  }

  // value / scale = 448 value / amax (with the transform the values are unnormalized: its
  // 1 / sqrt(n) is in scale_divisor). Past 2^+-100, amax and the numerators are scaled by
  // an exact power of two, which keeps 448 value and 1 / amax finite and normal and the
  // quotients unchanged; an all-zero group (scale 1) divides by 1. With the transform the
  // values are rounded already and a plain product will do; without it, each byte is the
  // reference's (e4m3_rounding.h).
  const float prescale = amax < 0x1p-100f ? 0x1p100f : (amax > 0x1p100f ? 0x1p-100f : 1.f);
  const float divisor = amax > 0.f ? amax * prescale : 1.f;
  const float numerator_factor = kE4m3Max * prescale, inverse_divisor = __frcp_rn(divisor);
  const TieRule rule = kHadamard ? TieRule{} : tie_rule(divisor);
  auto quotient = [&](float x) {
    const float numerator = x * numerator_factor;
    return kHadamard ? numerator * inverse_divisor
                     : tie_adjusted(e4m3_quotient(numerator, divisor, inverse_divisor), rule);
  };
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    if (row_of(s) >= p.seqlen) continue;
    uint2* row = reinterpret_cast<uint2*>(p.output + batch * p.out_batch_stride +
                                          int64_t(row_of(s)) * p.out_seqlen_stride + head * p.out_head_stride);
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      uint32_t codes[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        codes[t] = e4m3_pair(quotient(value(s, k * 8 + 2 * t)), quotient(value(s, k * 8 + 2 * t + 1)));
      }
      row[k * kLanes + lane_in_row] = make_uint2(codes[0] | codes[1] << 16, codes[2] | codes[3] << 16);
    }
  }
}

// block_rows 0, after both passes: the amax bits of every (batch, head) become its scale.
__global__ void finalize_scales_kernel(float* scales, int64_t count, double divisor) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    scales[i] = scale_of(scales[i], divisor);
  }
}

template <class Element, int kHeadDim, bool kHadamard>
Status launch(const QuantizeFp8Args& args, const std::array<uint64_t, 4>& sign_bits) {
  using Layout = RowLayout<kHeadDim>;
  QuantizeParams p{};
  p.input = static_cast<const uint8_t*>(args.input.data);
  p.in_batch_stride = args.input.batch_stride;
  p.in_seqlen_stride = args.input.seqlen_stride;
  p.in_head_stride = args.input.head_stride;
  p.output = static_cast<uint8_t*>(args.output.data);
  p.out_batch_stride = args.output.batch_stride;
  p.out_seqlen_stride = args.output.seqlen_stride;
  p.out_head_stride = args.output.head_stride;
  p.scales = args.scales;
  p.seqlen = static_cast<int>(args.seqlen);
  p.heads = static_cast<int>(args.heads);
  p.chunk_rows = static_cast<int>(args.block_rows == 0 ? kQuantizeMaxChunkRows : args.block_rows);
  p.num_chunks = static_cast<int>((args.seqlen + p.chunk_rows - 1) / p.chunk_rows);
  p.scale_divisor = kHadamard ? 448.0 * sqrt(double(kHeadDim)) : 448.0;
  for (int i = 0; i < 4; ++i) p.sign_bits[i] = sign_bits[i];
  const unsigned ctas = static_cast<unsigned>(args.batch * args.heads * p.num_chunks);
  const unsigned threads = static_cast<unsigned>(p.chunk_rows / Layout::kRowsPerWarp * 32);
  auto run = [&](Pass pass) {
    p.pass = pass;
    if (ctas > 0) quantize_fp8_kernel<Element, kHeadDim, kHadamard><<<ctas, threads, 0, args.stream>>>(p);
    return check_cuda(cudaGetLastError(), "warpflash::quantize_fp8: launch of quantize_fp8_kernel");
  };
  // One pass when every group fits one CTA: block_rows 64 or 128, or block_rows 0 with at
  // most 128 rows (one chunk is the whole group).
  if (args.block_rows != 0 || (args.seqlen > 0 && args.seqlen <= kQuantizeMaxChunkRows)) return run(Pass::kOnePass);
  const int64_t count = args.batch * args.heads;
  Status status = check_cuda(cudaMemsetAsync(args.scales, 0, count * sizeof(float), args.stream),
                             "warpflash::quantize_fp8: cudaMemsetAsync of the scales");
  if (status.ok() && args.seqlen > 0) status = run(Pass::kAmax);
  if (status.ok() && args.seqlen > 0) status = run(Pass::kQuantizeWithAmax);
  if (!status.ok()) return status;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, 4096);
  finalize_scales_kernel<<<static_cast<unsigned>(blocks), 256, 0, args.stream>>>(args.scales, count, p.scale_divisor);
  return check_cuda(cudaGetLastError(), "warpflash::quantize_fp8: launch of finalize_scales_kernel");
}

template <class Element>
Status launch_for_head_dim(const QuantizeFp8Args& args, const std::array<uint64_t, 4>& sign_bits) {
  switch (args.head_dim) {
    case 64:
      return args.hadamard ? launch<Element, 64, true>(args, sign_bits) : launch<Element, 64, false>(args, sign_bits);
    case 96: return launch<Element, 96, false>(args, sign_bits);
    case 128:
      return args.hadamard ? launch<Element, 128, true>(args, sign_bits) : launch<Element, 128, false>(args, sign_bits);
    case 192: return launch<Element, 192, false>(args, sign_bits);
    case 256:
      return args.hadamard ? launch<Element, 256, true>(args, sign_bits) : launch<Element, 256, false>(args, sign_bits);
    default: return Status::NotSupported("warpflash::quantize_fp8: no kernel for this head_dim");  // validated before
  }
}

}  // namespace

Status launch_quantize_fp8(const QuantizeFp8Args& args, const std::array<uint64_t, 4>& sign_bits) {
  return args.dtype == DType::kBFloat16 ? launch_for_head_dim<__nv_bfloat16>(args, sign_bits)
                                        : launch_for_head_dim<__half>(args, sign_bits);
}

}  // namespace warpflash::kernels
