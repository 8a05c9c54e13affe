// The FP8 forward (e4m3 Q, K, V with FlashAttention-3's per-(batch, K/V head) descales,
// BF16 O) against the double-precision reference of the dequantized inputs. The FP8
// criterion: the kernel's error is at most twice that of exact attention that only rounds
// P to e4m3 (as the kernel must, for the FP8 P V GEMM), plus BF16's rounding of O.
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/hopper_gpu.h"
#include "common/test_seed.h"
#include "reference/attention_reference.h"
#include "reference/fp8.h"
#include "reference/half_precision.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;

struct Fp8Case {
  const char* name;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv;
  bool causal = false;
  int64_t window_left = -1;
  bool descales = true;  // per (batch, K/V head); false: the codes are the values
  bool packed = false;   // varlen: the batch's sequences one after the other, lengths below
  std::vector<int> lengths_q = {}, lengths_k = {};
};

const Fp8Case kCases[] = {
    {"one_row", 1, 1, 1, 1, 1},
    {"odd_lengths", 2, 17, 129, 2, 2},
    {"tile_edges", 1, 129, 127, 4, 2},
    {"long_gqa", 1, 1000, 1000, 8, 2},
    {"causal_mqa", 2, 1000, 1000, 4, 1, true},
    {"causal_fewer_queries", 1, 127, 1000, 4, 4, true},
    {"causal_rows_without_keys", 1, 1000, 129, 2, 1, true},
    {"window_causal", 1, 700, 700, 2, 2, true, 100},
    {"long_keys", 1, 64, 4097, 2, 1},
    {"codes_without_descales", 1, 300, 300, 2, 2, false, -1, false},
    {"varlen_causal", 5, 0, 0, 4, 2, true, -1, true, true, {0, 17, 300, 129, 1}, {5, 17, 300, 400, 0}},
};

using Param = std::tuple<int, Fp8Case>;

constexpr uint16_t kPoison = 0x7fff;  // a bf16 NaN

std::vector<int> prefix_sums(const std::vector<int>& lengths) {
  std::vector<int> cu(1, 0);
  for (int n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

// A (rows, heads, width) tensor in e4m3 with one descale per (sequence, K/V head): codes
// and the values they stand for.
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<double> values;
};
Quantized quantize(const std::vector<double>& x, const std::vector<int>& cu, int64_t heads, int64_t group,
                   int64_t width, std::vector<float>& descales, bool with_descales, int64_t heads_kv) {
  Quantized out{std::vector<uint8_t>(x.size()), std::vector<double>(x.size())};
  const int64_t sequences = static_cast<int64_t>(cu.size()) - 1;
  descales.assign(sequences * heads_kv, 1.f);
  for (int64_t b = 0; b < sequences; ++b) {
    for (int64_t g = 0; g < heads_kv; ++g) {
      double amax = 0;
      auto for_each = [&](auto&& visit) {
        for (int64_t r = cu[b]; r < cu[b + 1]; ++r) {
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            for (int64_t c = 0; c < width; ++c) visit((r * heads + h) * width + c);
          }
        }
      };
      for_each([&](int64_t i) { amax = std::max(amax, std::fabs(x[i])); });
      float descale = with_descales && amax > 0 ? static_cast<float>(amax / reference::kE4m3Max) : 1.f;
      descales[b * heads_kv + g] = descale;
      for_each([&](int64_t i) {
        out.codes[i] = reference::double_to_e4m3_bits(x[i] / descale);
        out.values[i] = reference::e4m3_bits_to_double(out.codes[i]) * descale;
      });
    }
  }
  return out;
}

class Fp8ForwardGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(Fp8ForwardGpuTest, WithinTwiceTheErrorOfRoundingP) {
  WARPFLASH_REQUIRE_HOPPER();
  auto [head_dim, c] = GetParam();
  std::vector<int> compiled = compiled_head_dims(DType::kFloat8E4M3);
  if (std::find(compiled.begin(), compiled.end(), head_dim) == compiled.end()) {
    GTEST_SKIP() << "d" << head_dim << " not compiled for float8_e4m3fn";
  }
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  std::vector<int> lengths_q = c.packed ? c.lengths_q : std::vector<int>(c.batch, static_cast<int>(c.seqlen_q));
  std::vector<int> lengths_k = c.packed ? c.lengths_k : std::vector<int>(c.batch, static_cast<int>(c.seqlen_k));
  std::vector<int> cu_q = prefix_sums(lengths_q), cu_k = prefix_sums(lengths_k);
  const int64_t total_q = cu_q.back(), total_k = cu_k.back(), d = head_dim, group = c.heads_q / c.heads_kv;
  // Scaled unlike each other, so that a descale applied to the wrong tensor shows.
  auto normal_values = [&](int64_t n, double scale) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<double> x(n);
    for (double& v : x) v = normal(rng);
    return x;
  };
  std::vector<float> q_descale, k_descale, v_descale;
  Quantized q = quantize(normal_values(total_q * c.heads_q * d, 3.0), cu_q, c.heads_q, group, d, q_descale,
                         c.descales, c.heads_kv);
  Quantized k = quantize(normal_values(total_k * c.heads_kv * d, 0.5), cu_k, c.heads_kv, 1, d, k_descale, c.descales,
                         c.heads_kv);
  Quantized v = quantize(normal_values(total_k * c.heads_kv * d, 2.0), cu_k, c.heads_kv, 1, d, v_descale, c.descales,
                         c.heads_kv);

  auto padded = [](const std::vector<uint8_t>& codes) {  // TMA needs a valid address even for no rows
    std::vector<uint8_t> out = codes;
    out.resize(std::max<size_t>(out.size(), 256), 0);
    return out;
  };
  std::vector<uint8_t> q_codes = padded(q.codes), k_codes = padded(k.codes), v_codes = padded(v.codes);
  DeviceBuffer<uint8_t> q_dev(q_codes.size()), k_dev(k_codes.size()), v_dev(v_codes.size());
  const int64_t o_elements = total_q * c.heads_q * d;
  DeviceBuffer<uint16_t> o_dev(std::max<int64_t>(o_elements, 1));
  DeviceBuffer<float> lse_dev(std::max<int64_t>(total_q * c.heads_q, 1)), qd_dev(q_descale.size()),
      kd_dev(k_descale.size()), vd_dev(v_descale.size());
  DeviceBuffer<int> cu_q_dev(cu_q.size()), cu_k_dev(cu_k.size());
  ASSERT_TRUE(q_dev.upload(q_codes) && k_dev.upload(k_codes) && v_dev.upload(v_codes) &&
              o_dev.upload(std::vector<uint16_t>(o_dev.size(), kPoison)) &&
              lse_dev.upload(std::vector<float>(lse_dev.size(), NAN)) && qd_dev.upload(q_descale) &&
              kd_dev.upload(k_descale) && vd_dev.upload(v_descale) && cu_q_dev.upload(cu_q) && cu_k_dev.upload(cu_k));

  ForwardArgs args;
  args.dtype = DType::kFloat8E4M3;
  const int64_t batch = static_cast<int64_t>(lengths_q.size());
  int64_t max_q = *std::max_element(lengths_q.begin(), lengths_q.end());
  int64_t max_k = *std::max_element(lengths_k.begin(), lengths_k.end());
  args.shape = {batch, max_q, max_k, c.heads_q, c.heads_kv, d, d};
  args.q = contiguous_view(q_dev.get(), max_q, c.heads_q, d);
  args.k = contiguous_view(k_dev.get(), max_k, c.heads_kv, d);
  args.v = contiguous_view(v_dev.get(), max_k, c.heads_kv, d);
  args.o = contiguous_view(o_dev.get(), max_q, c.heads_q, d);
  if (c.packed) {
    args.cu_seqlens_q = cu_q_dev.get();
    args.cu_seqlens_k = cu_k_dev.get();
    args.total_q = total_q;
    args.total_k = total_k;
  }
  args.lse = lse_dev.get();
  args.causal = c.causal;
  args.window_left = c.window_left;
  if (c.descales) {
    args.q_descale = qd_dev.get();
    args.k_descale = kd_dev.get();
    args.v_descale = vd_dev.get();
  }
  Status status = forward(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> o_out = o_dev.download();
  std::vector<float> lse_out = lse_dev.download();

  for (int64_t b = 0; b < batch; ++b) {
    const int64_t sq = lengths_q[b], sk = lengths_k[b];
    SCOPED_TRACE(::testing::Message() << "sequence " << b << ": seqlen_q " << sq << ", seqlen_k " << sk);
    if (sq == 0) continue;
    reference::Problem p{1, sq, sk, c.heads_q, c.heads_kv, d, 1.0 / std::sqrt(double(d)), c.causal};
    p.window_left = c.window_left;
    auto rows = [&](const std::vector<double>& x, int64_t first, int64_t count, int64_t heads) {
      return std::vector<double>(x.begin() + first * heads * d, x.begin() + (first + count) * heads * d);
    };
    std::vector<double> q_seq = rows(q.values, cu_q[b], sq, c.heads_q), k_seq = rows(k.values, cu_k[b], sk, c.heads_kv),
                        v_seq = rows(v.values, cu_k[b], sk, c.heads_kv);
    std::vector<double> o_ref, lse_ref, o_p_rounded;
    reference::forward(p, q_seq, k_seq, v_seq, o_ref, lse_ref);
    reference::Fp8Recipe only_p;
    only_p.quantize_inputs = false;
    reference::forward_fp8_emulated(p, only_p, q_seq, k_seq, v_seq, o_p_rounded);
    double max_err = 0, max_p = 0, max_ref = 0, sq_err = 0, sq_p = 0, sq_ref = 0;
    for (size_t i = 0; i < o_ref.size(); ++i) {
      double got = reference::bfloat16_bits_to_float(o_out[cu_q[b] * c.heads_q * d + i]);
      double err = std::fabs(got - o_ref[i]), err_p = std::fabs(o_p_rounded[i] - o_ref[i]);
      max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
      max_p = std::max(max_p, err_p);
      max_ref = std::max(max_ref, std::fabs(o_ref[i]));
      sq_err += std::isnan(err) ? INFINITY : err * err;
      sq_p += err_p * err_p;
      sq_ref += o_ref[i] * o_ref[i];
    }
    // The largest single error depends on which P values round which way: the kernel
    // rounds P against its running (and lazily kept) row max, not the row's final max, so
    // its roundings differ from the reference's. Rounding every P of a row the same way
    // (2^-4 relative) would move O by up to 2^-4 max |v|; half that bounds the element,
    // twice the reference's error bounds the whole (the L2 check below).
    const double bf16_rounding = std::ldexp(1.0, -8);
    double max_v = 0;
    for (double x : v_seq) max_v = std::max(max_v, std::fabs(x));
    EXPECT_LE(max_err, std::max(2 * max_p, std::ldexp(max_v, -5)) + bf16_rounding * max_ref)
        << "max abs error (P rounded to e4m3: " << max_p << ", max |v| " << max_v << ")";
    if (sq_ref > 0) {
      double rel = std::sqrt(sq_err / sq_ref), rel_p = std::sqrt(sq_p / sq_ref);
      EXPECT_LE(rel, 2 * rel_p + bf16_rounding) << "relative L2 error (P rounded to e4m3: " << rel_p << ")";
    }
    int bad_lse = 0;
    for (int64_t h = 0; h < c.heads_q; ++h) {
      for (int64_t r = 0; r < sq; ++r) {
        int64_t index = c.packed ? h * total_q + cu_q[b] + r : (b * c.heads_q + h) * sq + r;
        double got = lse_out[index], want = lse_ref[h * sq + r];
        bool ok = std::isinf(want) ? (std::isinf(got) && got < 0) : std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want));
        if (!ok && bad_lse++ < 5) ADD_FAILURE() << "lse head " << h << " row " << r << " = " << got << ", reference " << want;
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  auto [head_dim, c] = info.param;
  std::ostringstream name;
  name << "e4m3_d" << head_dim << "_" << c.name;
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8ForwardGpuTest,
                         ::testing::Combine(::testing::Values(64, 128, 256), ::testing::ValuesIn(kCases)), param_name);

TEST(Fp8ForwardValidation, RejectsWhatFp8DoesNotSupport) {
  ForwardArgs args;
  args.dtype = DType::kFloat8E4M3;
  args.shape = {1, 16, 16, 2, 2, 128, 128};
  static uint8_t dummy[1];
  args.q = contiguous_view(dummy, 16, 2, 128);
  args.k = args.q;
  args.v = args.q;
  args.o = contiguous_view(dummy, 16, 2, 128);
  args.softcap = 10.f;
  Status status = validate_forward(args);
  EXPECT_EQ(status.code(), StatusCode::kNotSupported);
  EXPECT_NE(status.message().find("softcap"), std::string::npos) << status.message();
  args.softcap = 0.f;
  args.dtype = DType::kBFloat16;
  static float descale[1];
  args.k_descale = descale;
  status = validate_forward(args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("k_descale"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace warpflash
