// The FP8 quantization kernel: one CTA per block of rows of one (batch, head). Every thread
// loads its slice of a few rows with 16-byte loads, applies the random signs and the
// Hadamard transform in registers (butterflies within the thread, then across the lanes
// of the row with shuffles), and keeps the result in registers while the CTA reduces the
// block's amax; then it writes the e4m3 values with 8-byte stores, and one thread the
// scale. Bytes moved: 2 read + 1 written per element (plus 4 per scale); block_rows 0
// past 128 rows reads twice (an amax pass first), 5 per element.
//
// Arithmetic is IEEE fp32 (this file is compiled without fast-math's flush-to-zero and
// approximate division, see src/CMakeLists.txt), so without the transform every byte
// equals the double-precision reference's rounding: a value whose fp32 quotient lies
// within a few ulps of an e4m3 rounding tie is rounded again from a double quotient, as
// the reference computes it.
#include "kernels/quantize/quantize_fp8.h"

#include <algorithm>
#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/attention/check_cuda.h"

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

__device__ uint16_t e4m3_pair(float x, float y) {
  return __nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3);
}

// x moved by `ulps` units in the last place, away from zero (ulps > 0) or towards it.
__device__ float nudged(float x, int ulps) {
  const uint32_t bits = __float_as_uint(x), magnitude = bits & 0x7fffffffu;
  const uint32_t moved = ulps > 0 ? magnitude + ulps : (magnitude > uint32_t(-ulps) ? magnitude + ulps : 0u);
  return __uint_as_float(moved | (bits & 0x80000000u));
}

// The rare path of e4m3_pair_exact, out of line so that the unrolled loops stay small.
__device__ __noinline__ uint16_t e4m3_pair_from_double(float x, float y, float amax) {
  const double scale = amax > 0.f ? __ddiv_rn(amax, 448.0) : 1.0;
  return uint16_t(__nv_cvt_double_to_fp8(__ddiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3) |
                  __nv_cvt_double_to_fp8(__ddiv_rn(y, scale), __NV_SATFINITE, __NV_E4M3) << 8);
}

// e4m3(x / scale) as the reference rounds it, scale = amax / 448 (1 for amax 0): the fp32
// quotient x * (448 / amax) is within 2 ulps of the exact one, so when both ends of +-4
// ulps round alike that is the answer; otherwise (near a tie) the quotient in double.
__device__ uint16_t e4m3_pair_exact(float x, float y, float inverse_scale, float amax) {
  const float qx = x * inverse_scale, qy = y * inverse_scale;
  const uint16_t low = e4m3_pair(nudged(qx, -4), nudged(qy, -4));
  if (low == e4m3_pair(nudged(qx, 4), nudged(qy, 4))) return low;
  return e4m3_pair_from_double(x, y, amax);
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
__global__ void __launch_bounds__(RowLayout<kHeadDim>::kMaxWarps * 32) quantize_fp8_kernel(const QuantizeParams p) {
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

  // The sign bits of this lane's 16-bit elements, as xor masks of each 32-bit pair.
  uint32_t sign_masks[kVectors][4];
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const uint32_t byte = kHadamard ? uint32_t(p.sign_bits[k] >> (8 * lane_in_row)) & 0xffu : 0u;
#pragma unroll
    for (int t = 0; t < 4; ++t) sign_masks[k][t] = ((byte >> (2 * t)) & 1u) << 15 | ((byte >> (2 * t + 1)) & 1u) << 31;
  }

  // Load every row first (all loads in flight at once), then transform.
  float values[kSlices][Layout::kValues];
  float local_amax = 0.f;
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    const bool in_range = row_of(s) < p.seqlen;
    const uint4* row = reinterpret_cast<const uint4*>(
        p.input + 2 * (batch * p.in_batch_stride + int64_t(row_of(s)) * p.in_seqlen_stride + head * p.in_head_stride));
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      const uint4 raw = in_range ? __ldg(row + k * kLanes + lane_in_row) : make_uint4(0, 0, 0, 0);
      const uint32_t pairs[4] = {raw.x ^ sign_masks[k][0], raw.y ^ sign_masks[k][1], raw.z ^ sign_masks[k][2],
                                 raw.w ^ sign_masks[k][3]};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float2 f = to_float2(Element{}, pairs[t]);
        values[s][k * 8 + 2 * t] = f.x;
        values[s][k * 8 + 2 * t + 1] = f.y;
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    if constexpr (kHadamard) {
      hadamard_in_thread(values[s]);
      hadamard_across_lanes<kLanes>(values[s], lane);
    }
#pragma unroll
    for (int i = 0; i < Layout::kValues; ++i) local_amax = fmaxf(local_amax, fabsf(values[s][i]));  // drops NaN
  }

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

  // Groups below 2^-100 (fp32 subnormals included) are scaled up by an exact power of two
  // first, so that 448 / amax stays finite; the quotients do not change.
  if (amax < 0x1p-100f) {
    amax *= 0x1p100f;
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int i = 0; i < Layout::kValues; ++i) values[s][i] *= 0x1p100f;
  }
  // The values are unnormalized (the transform's 1 / sqrt(n) is in scale_divisor), so
  // value / scale = value * 448 / amax either way.
  const float inverse_scale = amax > 0.f ? __fdiv_rn(kE4m3Max, amax) : 1.f;
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    if (row_of(s) >= p.seqlen) continue;
    uint2* row = reinterpret_cast<uint2*>(p.output + batch * p.out_batch_stride +
                                          int64_t(row_of(s)) * p.out_seqlen_stride + head * p.out_head_stride);
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      uint32_t codes[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float* v = &values[s][k * 8 + 4 * half];
        const uint32_t low = kHadamard ? e4m3_pair(v[0] * inverse_scale, v[1] * inverse_scale)
                                       : e4m3_pair_exact(v[0], v[1], inverse_scale, amax);
        const uint32_t high = kHadamard ? e4m3_pair(v[2] * inverse_scale, v[3] * inverse_scale)
                                        : e4m3_pair_exact(v[2], v[3], inverse_scale, amax);
        codes[half] = low | high << 16;
      }
      row[k * kLanes + lane_in_row] = make_uint2(codes[0], codes[1]);
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
    case 64: return args.hadamard ? launch<Element, 64, true>(args, sign_bits) : launch<Element, 64, false>(args, sign_bits);
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
