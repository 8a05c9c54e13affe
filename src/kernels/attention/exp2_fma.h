// 2^x on the FMA pipe, for kernels whose exponentials are bound by the MUFU pipe's rate
// (16 a clock per SM: 8 cycles a warp instruction) rather than by their issue slots:
// moving a share of them onto the FMA and integer pipes shortens that phase
// (FlashAttention-4's emulated exponential; the backward at d = 64 and 128,
// BackwardTraits::kExp2OnFmaEvery). The forward's softmax is not: there the same share cost
// 5-18% (docs/perf-notes.md, forty-fifth section).
#pragma once

#include <cute/config.hpp>

namespace warpflash::kernels {

// 2^x for x <= 0 (P = exp2(S * scale - LSE) <= 1): x = j + f with j = floor(x), taken from
// the low mantissa bits of x + 1.5 * 2^23 added rounding down (a conversion instruction
// would run at the MUFU pipe's rate); 2^f on [0, 1) by a cubic (the least-squares fit of its
// relative error with p(0) = 1: at most 1.7e-4, below a 16-bit P's rounding); 2^j added into
// the exponent bits. x below -127 (and -inf) gives 0.
CUTE_DEVICE float exp2_on_fma_pipe(float x) {
  constexpr float kShifter = 12582912.f;  // 1.5 * 2^23: integers in its binade are exact
  float shifted = __fadd_rd(fmaxf(x, -127.f), kShifter);
  float j = shifted - kShifter;
  float f = x - j;
  float p = fmaf(fmaf(fmaf(0.07632784f, f, 0.22830570f), f, 0.69503675f), f, 1.f);
  int scaled = __float_as_int(p) + (__float_as_int(shifted) - __float_as_int(kShifter)) * (1 << 23);
  return x < -127.f ? 0.f : __int_as_float(scaled);
}

}  // namespace warpflash::kernels
