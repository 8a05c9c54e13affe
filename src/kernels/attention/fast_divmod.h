// Division by a divisor fixed for a whole launch, as a multiply-high and a shift (Granlund
// and Montgomery's method): the host computes the constants once; the device needs two
// registers where a general 32-bit division needs a dozen instructions and several more.
// Valid for dividends below 2^31.
#pragma once

#include <cstdint>

#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

struct FastDivmod {
  unsigned divisor = 1;
  unsigned multiplier = 0;
  unsigned shift = 0;

  FastDivmod() = default;
  // divisor >= 1.
  explicit FastDivmod(unsigned d) : divisor(d) {
    while ((uint64_t(1) << shift) < d) ++shift;  // shift = ceil(log2(d))
    multiplier = static_cast<unsigned>(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
    if (d == 1) multiplier = 0;
  }

  WF_HOST_DEVICE unsigned div(unsigned n) const {
#if defined(__CUDA_ARCH__)
    unsigned high = __umulhi(n, multiplier);
#else
    unsigned high = static_cast<unsigned>((uint64_t(n) * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
  // n = quotient * divisor + remainder.
  WF_HOST_DEVICE unsigned divmod(unsigned n, unsigned& remainder) const {
    unsigned quotient = div(n);
    remainder = n - quotient * divisor;
    return quotient;
  }
};

}  // namespace warpflash::kernels
