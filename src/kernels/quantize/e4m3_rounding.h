// e4m3(x / scale), scale = amax / 448, rounded on the GPU in fp32 exactly as the CPU
// reference rounds it in double (reference::quantize_e4m3), for 16-bit inputs x and amax.
//
// Why fp32 suffices: q = 448 x / amax is a ratio of two numbers of at most 11 significant
// bits, so unless it is exactly an e4m3 rounding tie it lies at least 2^-15 (relative)
// from every tie; any quotient accurate to a few fp32 ulps rounds like the exact one.
// Exact ties are the only hard case, and they are common with 16-bit data (an amax that
// is a power of two makes 448 x / amax exact). There:
// - the quotient is computed so that an exact tie comes out exact (e4m3_quotient);
// - the reference's double arithmetic rounds amax / 448 first, which can move the tie by
//   one double ulp, and then rounds it up or down instead of to even. Whether it does
//   depends only on amax's rounding error and the tie's significand (TieRule), so it is
//   decided once per group, and exact ties are moved by one fp32 ulp the same way.
// Device code compiled without flush-to-zero (src/CMakeLists.txt).
#pragma once

#include <cstdint>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace warpflash::kernels {

__device__ inline uint16_t e4m3_pair(float x, float y) {  // x in the low byte
  return __nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3);
}

// numerator / amax (numerator = 448 x, exact) for amax > 0, with the remainder step that
// makes it correctly rounded: the remainder numerator - q amax is exact (amax has few
// significant bits), so an exact tie comes out exact.
__device__ inline float e4m3_quotient(float numerator, float amax, float inverse_amax) {
  const float q = numerator * inverse_amax;
  return fmaf(fmaf(-q, amax, numerator), inverse_amax, q);
}

// Whether |q| is exactly halfway between two e4m3 values. In [2^-6, 448] the codes keep 3
// of fp32's 23 mantissa bits, so a tie has the next bit set and the rest clear; below
// 2^-6 the codes are 2^-9 apart, as in [2^-6, 2^-5), and adding 2^-6 (exact for a tie)
// maps them there.
__device__ inline bool is_e4m3_tie(float q) {
  float magnitude = fabsf(q);
  magnitude += magnitude < 0x1p-6f ? 0x1p-6f : 0.f;
  return (__float_as_uint(magnitude) & 0xfffffu) == 0x80000u;
}

// How the reference moves exact ties for a group's amax. It computes s = RN(amax / 448)
// and RN(x / s) = RN(t amax / (448 s)) for a tie t: off t by |t| rho / m_s double ulps of
// t (rho: s's rounding error in its own ulps, m_s and m_t the significands in [1, 2)), so
// it leaves t when m_t rho / m_s >= 1/2, downwards (in magnitude) when s was rounded up.
struct TieRule {
  bool moves_ties = false;  // false: every tie stays and rounds to even
  double threshold = 2.0;   // ties whose significand is >= threshold move
  int ulps = 0;             // by one fp32 ulp: -1 towards zero, +1 away from it
};

__device__ inline TieRule tie_rule(float amax) {
  TieRule rule;
  if (!(amax > 0.f)) return rule;
  const double scale = __ddiv_rn(amax, 448.0);
  const double residual = fma(scale, 448.0, -double(amax));  // exact: 448 (s - amax / 448)
  if (residual == 0.0) return rule;
  // scale = significand * ulp * 2^52 (a normal double: amax is within 2^+-100 here)
  const uint64_t bits = __double_as_longlong(scale);
  const double significand = __longlong_as_double((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  const double ulp = __longlong_as_double((bits & 0x7ff0000000000000ull) - (uint64_t(52) << 52));
  const double rho = fabs(residual) / 448.0 / ulp;
  rule.threshold = significand / (2.0 * rho);
  rule.moves_ties = rule.threshold < 2.0;
  rule.ulps = residual > 0 ? -1 : 1;
  return rule;
}

// q moved by `ulps` fp32 ulps, away from zero (ulps > 0) or towards it.
__device__ inline float nudged(float q, int ulps) {
  const uint32_t bits = __float_as_uint(q);
  return __uint_as_float((bits & 0x80000000u) | ((bits & 0x7fffffffu) + ulps));
}

// The quotient to convert (round to nearest even) so that e4m3 comes out as the
// reference's: q itself, or a tie moved off by one ulp as the group's rule says.
__device__ inline float tie_adjusted(float q, const TieRule& rule) {
  if (rule.moves_ties && is_e4m3_tie(q)) {
    const double significand = __uint_as_float((__float_as_uint(q) & 0x7fffffu) | 0x3f800000u);
    if (significand >= rule.threshold) return nudged(q, rule.ulps);
  }
  return q;
}

}  // namespace warpflash::kernels
