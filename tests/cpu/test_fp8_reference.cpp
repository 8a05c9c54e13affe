// The FP8 reference: e4m3 rounding against every code, the random-sign Hadamard transform,
// quantization groups, and attention from quantized inputs.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "reference/fp8.h"

namespace warpflash::reference {
namespace {

std::vector<double> finite_codes() {  // the e4m3 values, ascending, each once (no -0)
  std::vector<double> values;
  for (int bits = 0; bits < 256; ++bits) {
    double x = e4m3_bits_to_double(static_cast<uint8_t>(bits));
    if (!std::isnan(x) && !(x == 0 && bits != 0)) values.push_back(x);
  }
  std::sort(values.begin(), values.end());
  return values;
}

TEST(E4m3, EveryCodeIsItsOwnRoundingAndTheRangeIsHoppers) {
  std::vector<double> values = finite_codes();
  EXPECT_EQ(values.size(), 253u);  // 254 finite codes, +0 and -0 one value
  EXPECT_EQ(values.back(), 448.0);
  EXPECT_EQ(values.front(), -448.0);
  EXPECT_EQ(e4m3_bits_to_double(0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_bits_to_double(0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(e4m3_bits_to_double(0x7f)) && std::isnan(e4m3_bits_to_double(0xff)));
  for (double x : values) EXPECT_EQ(round_to_e4m3(x), x) << x;
}

TEST(E4m3, RoundsToNearestTiesToEvenAndSaturates) {
  std::vector<double> values = finite_codes();
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    double low = values[i], high = values[i + 1], middle = (low + high) / 2;
    EXPECT_EQ(round_to_e4m3(std::nextafter(middle, low)), low) << middle;
    EXPECT_EQ(round_to_e4m3(std::nextafter(middle, high)), high) << middle;
    // The tie goes to the code with an even mantissa: its last bit is 0.
    double tie = round_to_e4m3(middle);
    ASSERT_TRUE(tie == low || tie == high);
    int code = 0;
    while (e4m3_bits_to_double(static_cast<uint8_t>(code)) != std::fabs(tie)) ++code;
    EXPECT_EQ(code & 1, 0) << "tie " << middle << " went to " << tie;
  }
  EXPECT_EQ(round_to_e4m3(1e6), 448.0);
  EXPECT_EQ(round_to_e4m3(-465.0), -448.0);
  EXPECT_TRUE(std::isnan(round_to_e4m3(NAN)));
}

TEST(Hadamard, IsOrthogonalAndSpreadsAnOutlier) {
  const int64_t n = 64;
  std::vector<double> signs = hadamard_signs(n, 7);
  std::mt19937 generator(3);
  std::normal_distribution<double> normal;
  std::vector<double> q(n), k(n);
  for (int64_t i = 0; i < n; ++i) q[i] = normal(generator), k[i] = normal(generator);
  double dot = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) dot += q[i] * k[i], norm += q[i] * q[i];
  random_sign_hadamard(q.data(), n, signs);
  random_sign_hadamard(k.data(), n, signs);
  double dot_after = 0, norm_after = 0;
  for (int64_t i = 0; i < n; ++i) dot_after += q[i] * k[i], norm_after += q[i] * q[i];
  EXPECT_NEAR(dot_after, dot, 1e-12 * n);
  EXPECT_NEAR(norm_after, norm, 1e-12 * n);
  std::vector<double> outlier(n, 0.0);
  outlier[5] = 100.0;
  random_sign_hadamard(outlier.data(), n, signs);
  for (double x : outlier) EXPECT_NEAR(std::fabs(x), 100.0 / std::sqrt(double(n)), 1e-12);
  EXPECT_THROW(random_sign_hadamard(q.data(), 48, hadamard_signs(48, 1)), std::invalid_argument);
}

TEST(QuantizeE4m3, BlocksGetTheirOwnScale) {
  // (1, 8, 1, 4): rows 0..3 small, rows 4..7 with an outlier.
  std::vector<double> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.01 * (i % 7 + 1) * (i % 2 ? -1 : 1);
  x[20] = 300.0;
  std::vector<double> per_tensor = quantize_e4m3(x, 1, 8, 1, 4, 0), per_block = quantize_e4m3(x, 1, 8, 1, 4, 4);
  EXPECT_EQ(per_tensor[20], 300.0);  // the group's amax is exact
  EXPECT_EQ(per_block[20], 300.0);
  double error_tensor = 0, error_block = 0;
  for (int i = 0; i < 16; ++i) {
    error_tensor += std::fabs(per_tensor[i] - x[i]);
    error_block += std::fabs(per_block[i] - x[i]);
    EXPECT_LE(std::fabs(per_block[i] - x[i]), std::fabs(x[i]) / 16 + 1e-12);  // 3 mantissa bits
  }
  EXPECT_LT(error_block, error_tensor / 10);
  EXPECT_THROW(quantize_e4m3(x, 1, 9, 1, 4, 4), std::invalid_argument);
}

// With inputs that are e4m3 values and a group amax of 448 (scale 1), only P's rounding
// remains: close to the exact forward, not equal.
TEST(ForwardFp8Emulated, OnlyPIsRoundedWhenTheInputsAreCodes) {
  Problem p;
  p.batch = 1, p.seqlen_q = 40, p.seqlen_k = 50, p.heads_q = 2, p.heads_kv = 1, p.head_dim = 16, p.causal = true;
  p.softmax_scale = 1.0 / 256;
  std::vector<double> codes = finite_codes();
  std::mt19937 generator(5);
  std::uniform_int_distribution<size_t> pick(0, codes.size() - 1);
  auto make = [&](int64_t n) {
    std::vector<double> x(n);
    for (double& e : x) e = codes[pick(generator)];
    x[0] = 448.0;
    return x;
  };
  std::vector<double> q = make(p.q_elements()), k = make(p.kv_elements()), v = make(p.kv_elements());
  std::vector<double> o8, o, lse;
  forward_fp8_emulated(p, Fp8Recipe{}, q, k, v, o8);
  forward(p, q, k, v, o, lse);
  double max_diff = 0;
  for (size_t i = 0; i < o.size(); ++i) max_diff = std::max(max_diff, std::fabs(o8[i] - o[i]));
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 448.0 / 16);
  p.softcap = 10;
  EXPECT_THROW(forward_fp8_emulated(p, Fp8Recipe{}, q, k, v, o8), std::invalid_argument);
}

}  // namespace
}  // namespace warpflash::reference
