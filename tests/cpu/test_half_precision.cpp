// The float <-> float16 / bfloat16 conversions: known bit patterns, ties to even,
// subnormals, NaN, and every 16-bit value.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "reference/attention_reference.h"
#include "reference/half_precision.h"
#include "common/output_tolerance.h"

namespace warpflash::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(HalfPrecision, Float16KnownBits) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // halfway to 65536: ties to inf
  EXPECT_EQ(float_to_half_bits(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(HalfPrecision, Float16RoundsTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);  // spacing of half just above 1
  EXPECT_EQ(float_to_half_bits(1 + ulp / 2), 0x3c00);      // tie, 1.0 is even
  EXPECT_EQ(float_to_half_bits(1 + 3 * ulp / 2), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(float_to_half_bits(std::nextafter(1 + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(float_to_half_bits(std::nextafter(1 + 3 * ulp / 2, 0.0f)), 0x3c01);
}

TEST(HalfPrecision, Float16Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
  EXPECT_EQ(float_to_half_bits(tiny), 0x0001);
  EXPECT_EQ(half_bits_to_float(0x0001), tiny);
  EXPECT_EQ(half_bits_to_float(0x03ff), 1023 * tiny);
  EXPECT_EQ(half_bits_to_float(0x8400), -std::ldexp(1.0f, -14));
  EXPECT_EQ(float_to_half_bits(tiny / 2), 0x0000);  // tie between 0 and tiny: even
  EXPECT_EQ(float_to_half_bits(-tiny / 2), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half_bits(3 * tiny / 2), 0x0002);   // tie, rounds up to even
  EXPECT_EQ(float_to_half_bits(5 * tiny / 2), 0x0002);   // tie, rounds down to even
  EXPECT_EQ(float_to_half_bits(1023.5f * tiny), 0x0400);  // carries into the smallest normal
  EXPECT_EQ(float_to_half_bits(from_bits(0x00000001)), 0x0000);  // float subnormal
}

TEST(HalfPrecision, NanStaysNan) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  const float low_payload = from_bits(0x7f800001);  // payload only in bits half drops
  for (float nan : {quiet, low_payload, -quiet}) {
    EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(nan))));
    EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(nan))));
  }
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(0x7fc0)));
}

TEST(HalfPrecision, BFloat16KnownBits) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(-2.0f), 0xc000);
  const float ulp = std::ldexp(1.0f, -7);
  EXPECT_EQ(float_to_bfloat16_bits(1 + ulp / 2), 0x3f80);      // tie to even
  EXPECT_EQ(float_to_bfloat16_bits(1 + 3 * ulp / 2), 0x3f82);  // tie to even
  EXPECT_EQ(float_to_bfloat16_bits(std::nextafter(1 + ulp / 2, 2.0f)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x7f7f7fff)), 0x7f7f);  // stays finite
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x7f7f8000)), 0x7f80);  // tie to even: inf
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x00018000)), 0x0002);  // subnormal tie
  EXPECT_EQ(bfloat16_bits_to_float(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(bfloat16_bits_to_float(0xc2f7), -123.5f);
}

TEST(HalfPrecision, EveryValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float h = half_bits_to_float(b), bf = bfloat16_bits_to_float(b);
    if (!std::isnan(h)) {
      EXPECT_EQ(float_to_half_bits(h), b) << std::hex << bits;
    }
    if (!std::isnan(bf)) {
      EXPECT_EQ(float_to_bfloat16_bits(bf), b) << std::hex << bits;
    }
  }
}

TEST(HalfPrecision, RoundingPicksTheNearestValue) {
  // Against the neighbouring representable values: none is closer, and a tie is even.
  std::mt19937 gen(12);
  std::uniform_real_distribution<float> exponent(-26, 15);
  for (int n = 0; n < 100000; ++n) {
    const float x = std::exp2(exponent(gen));
    for (bool half : {true, false}) {
      const uint16_t bits = half ? float_to_half_bits(x) : float_to_bfloat16_bits(x);
      auto distance = [&](int b) {
        const float value = half ? half_bits_to_float(static_cast<uint16_t>(b))
                                 : bfloat16_bits_to_float(static_cast<uint16_t>(b));
        return std::abs(static_cast<double>(x) - value);
      };
      const double error = distance(bits), above = distance(bits + 1);
      const double below = bits > 0 ? distance(bits - 1) : kInf;
      ASSERT_LE(error, std::min(above, below)) << x << (half ? " half" : " bfloat16");
      if (error == above || error == below) {
        EXPECT_EQ(bits % 2, 0) << x;
      }
    }
  }
  EXPECT_EQ(round_to(Precision::kFloat16, 0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to(Precision::kBFloat16, 0.1f), 0.10009765625f);
}

// The forward tests' absolute term: half an ulp of the largest output, floored at [0.5, 1).
TEST(OutputRounding, HalfAnUlpOfTheLargestOutput) {
  using testing::output_rounding;
  EXPECT_EQ(output_rounding(DType::kFloat16, 0.7), std::ldexp(1.0, -12));
  EXPECT_EQ(output_rounding(DType::kFloat16, 0.1), std::ldexp(1.0, -12));  // the floor
  EXPECT_EQ(output_rounding(DType::kFloat16, 1.01), std::ldexp(1.0, -11));
  EXPECT_EQ(output_rounding(DType::kFloat16, 2.0), std::ldexp(1.0, -10));
  EXPECT_EQ(output_rounding(DType::kBFloat16, 0.7), std::ldexp(1.0, -9));
  EXPECT_EQ(output_rounding(DType::kBFloat16, 1.5), std::ldexp(1.0, -8));
  // It bounds the rounding of every output up to that magnitude, and is reached: the
  // midpoint between 1 and FP16's next value (round to even) and BF16's likewise.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-3.f, 3.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = value(rng);
    EXPECT_LE(std::fabs(round_to(Precision::kFloat16, x) - x), output_rounding(DType::kFloat16, std::fabs(x)));
    EXPECT_LE(std::fabs(round_to(Precision::kBFloat16, x) - x), output_rounding(DType::kBFloat16, std::fabs(x)));
  }
  EXPECT_EQ(1.f + std::ldexp(1.f, -11) - round_to(Precision::kFloat16, 1.f + std::ldexp(1.f, -11)),
            output_rounding(DType::kFloat16, 1.0));
  EXPECT_EQ(1.f + std::ldexp(1.f, -8) - round_to(Precision::kBFloat16, 1.f + std::ldexp(1.f, -8)),
            output_rounding(DType::kBFloat16, 1.0));
}

}  // namespace
}  // namespace warpflash::reference
