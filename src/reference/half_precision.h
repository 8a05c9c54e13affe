// Bit-exact conversions between float and the 16-bit input types (IEEE binary16 and
// bfloat16), round-to-nearest-even, without CUDA: the CPU side of the tests uses them to
// make inputs and to emulate low-precision attention.
#pragma once

#include <cstdint>
#include <cstring>

namespace warpflash::reference {

namespace detail {

inline uint32_t float_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline float bits_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// `value >> shift` rounded to nearest, ties to even (shift in 1..31).
inline uint32_t shift_round_even(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

}  // namespace detail

inline uint16_t float_to_half_bits(float x) {
  const uint32_t bits = detail::float_bits(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    // NaN: keep the top of the payload and force the quiet bit so it cannot become inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) {
    return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and above round to inf
  }
  const int exponent = static_cast<int>(magnitude >> 23);  // biased by 127
  if (exponent >= 113) {
    // Normal half: rebias the exponent (127 -> 15) and round away 13 mantissa bits; a
    // carry out of the mantissa correctly bumps the exponent.
    return static_cast<uint16_t>(sign | detail::shift_round_even(magnitude - (112u << 23), 13));
  }
  // Subnormal half (or zero): count units of 2^-24. The float is m * 2^(exponent - 150)
  // with the implicit bit in m, so units = m / 2^(126 - exponent).
  const int shift = 126 - exponent;
  if (shift > 24) {
    return static_cast<uint16_t>(sign);  // below 2^-25 (a tie at 2^-25 goes to even 0)
  }
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | detail::shift_round_even(mantissa, shift));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf or NaN
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mantissa) * detail::bits_float(0x33800000u);
    return sign ? -magnitude : magnitude;
  }
  return detail::bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_bfloat16_bits(float x) {
  const uint32_t bits = detail::float_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN stays NaN
  }
  // bfloat16 is the top half of a float, so rounding the low 16 bits away is enough;
  // it handles subnormals and overflow to inf the same way.
  return static_cast<uint16_t>(detail::shift_round_even(bits, 16));
}

inline float bfloat16_bits_to_float(uint16_t b) {
  return detail::bits_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace warpflash::reference
