// The absolute term of the forward tests' criterion (FlashAttention's: the kernel's max
// error within 2x that of attention computed in the input precision, plus this).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "warpflash/tensor.h"

namespace warpflash::testing {

// Half a unit in the last place of the largest output's magnitude in the 16-bit output
// type, at least that of values in [0.5, 1): the rounding of O to the output type, which
// the kernel pays in full where the low-precision reference can happen to round exactly.
// Outputs past 1 round twice as coarsely: a seed whose worst element was 1.01 failed
// FP16 d = 256 (thirty-ninth session, docs/perf-notes.md) with the floor of [0.5, 1).
inline double output_rounding(DType dtype, double largest_output) {
  const int mantissa_bits = dtype == DType::kBFloat16 ? 7 : 10;
  int exponent = 0;
  std::frexp(std::max(largest_output, 0.5), &exponent);  // largest_output in [2^(e-1), 2^e)
  return std::ldexp(1.0, exponent - 2 - mantissa_bits);
}

// The same for the largest magnitude in a reference output.
inline double output_rounding(DType dtype, std::vector<double> const& reference) {
  double largest = 0;
  for (double x : reference) largest = std::max(largest, std::fabs(x));
  return output_rounding(dtype, largest);
}

}  // namespace warpflash::testing
