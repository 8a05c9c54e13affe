// quantize_fp8() against the double-precision reference (reference::quantize_e4m3 and
// reference::random_sign_hadamard) for every head dim, both dtypes, block_rows 0, 64 and
// 128, with and without the Hadamard transform, on the shapes that break kernels.
//
// What must match: the scales equal the reference's rounded to fp32 (without the
// transform exactly; with it to 1e-5, the fp32 rounding of the transform's amax), and
// every e4m3 byte equals the reference's rounding. With the transform the kernel sums in
// fp32 and the reference in double, so a value within an fp32 rounding of an e4m3 tie may
// land on the neighbouring code: at most 1e-4 of the elements (at least one) may differ,
// each by one code. Output and scales are poisoned before the run, with guard regions
// around them and in the padding of strided views, so unwritten or stray bytes fail.
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/hopper_gpu.h"
#include "common/test_seed.h"
#include "reference/fp8.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::to_bits;

constexpr int64_t kGuard = 64;           // elements before and after every buffer
constexpr uint8_t kE4m3Poison = 0x7f;    // NaN in e4m3
constexpr double kHadamardScaleTolerance = 1e-5;

struct Shape {
  int64_t batch, seqlen, heads;
  bool strided;             // head-major input with padded rows, padded output rows
  double magnitude = 1.0;   // of the bf16 inputs (fp16 inputs use fp16_magnitude)
  double fp16_magnitude = 1.0;
};

const Shape kShapes[] = {
    {1, 1, 3, false},
    {2, 17, 3, false},
    {2, 129, 3, true},
    {2, 1000, 3, false},
    {1, 1000, 2, true},
    // Groups past 2^+-100 (bf16) and fp16 subnormals / large fp16 values.
    {1, 129, 2, false, 0x1p-120, 0x1p-18},
    {1, 129, 2, false, 0x1p+110, 0x1p+12},
};

struct Param {
  DType dtype;
  int64_t head_dim;
  int64_t block_rows;
  bool hadamard;
  Shape shape;
};

void PrintTo(const Param& p, std::ostream* out) {
  *out << dtype_name(p.dtype) << " d" << p.head_dim << " block_rows " << p.block_rows
       << (p.hadamard ? " hadamard" : "") << ", batch " << p.shape.batch << " seqlen " << p.shape.seqlen << " heads "
       << p.shape.heads << (p.shape.strided ? " strided" : "") << " magnitude " << p.shape.magnitude;
}

// A (batch, seqlen, heads, head_dim) view over a buffer of `Element`s with kGuard poisoned
// elements on either side; strided: (batch, heads, seqlen, row) storage, row = head_dim +
// padding.
template <class Element>
struct Storage {
  TensorView4d view;
  std::vector<Element> host;
  Storage(const Shape& s, int64_t head_dim, int64_t padding, Element poison) {
    if (s.strided) {
      int64_t row = head_dim + padding;
      view = {nullptr, s.heads * s.seqlen * row, row, s.seqlen * row};
    } else {
      view = {nullptr, s.seqlen * s.heads * head_dim, s.heads * head_dim, head_dim};
    }
    host.assign(2 * kGuard + s.batch * view.batch_stride, poison);
  }
  int64_t offset(int64_t b, int64_t r, int64_t h, int64_t d) const {
    return kGuard + b * view.batch_stride + r * view.seqlen_stride + h * view.head_stride + d;
  }
};

// Codes in order of value: ..., -2^-9, 0, 2^-9, ..., so that neighbours differ by one.
int64_t code_rank(uint8_t bits) { return (bits & 0x80) ? -int64_t(bits & 0x7f) : int64_t(bits & 0x7f); }
int64_t rank_of_value(double value) {
  for (int bits = 0; bits < 0x7f; ++bits) {
    if (reference::e4m3_bits_to_double(uint8_t(bits)) == std::fabs(value)) return value < 0 ? -bits : bits;
  }
  return 1000;  // not a code (NaN)
}

class QuantizeGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(QuantizeGpuTest, MatchesReference) {
  WARPFLASH_REQUIRE_HOPPER();
  const Param param = GetParam();
  const Shape& shape = param.shape;
  const int64_t d = param.head_dim, rows = shape.batch * shape.seqlen * shape.heads;
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  const double magnitude = param.dtype == DType::kBFloat16 ? shape.magnitude : shape.fp16_magnitude;
  std::normal_distribution<double> normal(0.0, magnitude);

  Storage<uint16_t> input(shape, d, 8, testing::kPoison);
  Storage<uint8_t> output(shape, d, 16, kE4m3Poison);
  std::vector<double> x(rows * d);  // dense (batch, seqlen, heads, head_dim)
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t r = 0; r < shape.seqlen; ++r)
      for (int64_t h = 0; h < shape.heads; ++h)
        for (int64_t c = 0; c < d; ++c) {
          uint16_t bits = to_bits(param.dtype, static_cast<float>(normal(rng)));
          input.host[input.offset(b, r, h, c)] = bits;
          x[((b * shape.seqlen + r) * shape.heads + h) * d + c] = from_bits(param.dtype, bits);
        }
  const int64_t num_blocks = quantize_fp8_num_blocks(shape.seqlen, param.block_rows);
  const int64_t scale_count = shape.batch * shape.heads * num_blocks;
  std::vector<float> scales_host(scale_count + 2 * kGuard, NAN);

  DeviceBuffer<uint16_t> input_dev(input.host.size());
  DeviceBuffer<uint8_t> output_dev(output.host.size());
  DeviceBuffer<float> scales_dev(scales_host.size());
  ASSERT_TRUE(input_dev.upload(input.host) && output_dev.upload(output.host) && scales_dev.upload(scales_host));

  QuantizeFp8Args args;
  args.dtype = param.dtype;
  args.batch = shape.batch, args.seqlen = shape.seqlen, args.heads = shape.heads, args.head_dim = d;
  args.input = input.view;
  args.input.data = input_dev.get() + kGuard;
  args.output = output.view;
  args.output.data = output_dev.get() + kGuard;
  args.scales = scales_dev.get() + kGuard;
  args.block_rows = param.block_rows;
  args.hadamard = param.hadamard;
  args.seed = 1000 + seed % 7;
  Status status = quantize_fp8(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> codes = output_dev.download();
  std::vector<float> scales = scales_dev.download();
  ASSERT_EQ(codes.size(), output.host.size());
  ASSERT_EQ(scales.size(), scales_host.size());

  // The reference: the transform in double, then per group amax / 448 and e4m3(x / scale).
  if (param.hadamard) {
    const std::vector<double> signs = reference::hadamard_signs(d, args.seed);
    for (int64_t row = 0; row < rows; ++row) reference::random_sign_hadamard(&x[row * d], d, signs);
  }
  const int64_t group_rows = param.block_rows == 0 ? shape.seqlen : param.block_rows;
  const std::vector<double> dequantized =
      reference::quantize_e4m3(x, shape.batch, shape.seqlen, shape.heads, d, group_rows);

  int64_t scale_errors = 0, code_errors = 0, off_by_one = 0;
  std::vector<bool> written(codes.size(), false);
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < shape.heads; ++h)
      for (int64_t block = 0; block < num_blocks; ++block) {
        const int64_t r0 = block * group_rows, r1 = std::min(shape.seqlen, r0 + group_rows);
        double amax = 0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = 0; c < d; ++c) {
            amax = std::max(amax, std::fabs(x[((b * shape.seqlen + r) * shape.heads + h) * d + c]));
          }
        const double scale = amax > 0 ? amax / reference::kE4m3Max : 1.0;
        const double got_scale = scales[kGuard + (b * shape.heads + h) * num_blocks + block];
        const bool scale_ok = param.hadamard ? std::fabs(got_scale - scale) <= kHadamardScaleTolerance * scale
                                             : got_scale == static_cast<float>(scale);
        if (!scale_ok && scale_errors++ < 5) {
          ADD_FAILURE() << "scale (b " << b << ", h " << h << ", block " << block << ") = " << got_scale
                        << ", reference " << static_cast<float>(scale);
        }
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = 0; c < d; ++c) {
            const int64_t dense = ((b * shape.seqlen + r) * shape.heads + h) * d + c;
            const int64_t at = output.offset(b, r, h, c);
            written[at] = true;
            const double want = reference::round_to_e4m3(dequantized[dense] / scale);  // the reference's code
            const double got = reference::e4m3_bits_to_double(codes[at]);
            if (got == want) continue;
            const bool neighbour = std::abs(code_rank(codes[at]) - rank_of_value(want)) == 1;
            // The kernel transforms and scales in fp32: a value within fp32 rounding of the
            // midpoint between two codes may take either (fp16 subnormal inputs, few bits
            // each, land there exactly); other neighbours are the transform's fp32 error.
            const double midpoint = (got + want) / 2, scaled = x[dense] / scale;
            const bool at_midpoint = std::fabs(scaled - midpoint) <= 1e-6 * std::fabs(midpoint);
            if (param.hadamard && neighbour) {
              if (!at_midpoint) ++off_by_one;
            } else if (code_errors++ < 5) {
              ADD_FAILURE() << "e4m3 (b " << b << ", row " << r << ", h " << h << ", col " << c << ") = " << got
                            << ", reference " << want << " (input after transform " << x[dense] << ", scale "
                            << scale << ")";
            }
          }
      }
  EXPECT_EQ(scale_errors, 0);
  EXPECT_EQ(code_errors, 0);
  EXPECT_LE(off_by_one, std::max<int64_t>(1, rows * d / 10000)) << "codes one off the reference's, of " << rows * d;
  for (size_t i = 0; i < codes.size(); ++i) {
    if (!written[i]) ASSERT_EQ(codes[i], kE4m3Poison) << "write outside the output at storage index " << i;
  }
  for (int64_t i = 0; i < kGuard; ++i) {
    ASSERT_TRUE(std::isnan(scales[i]) && std::isnan(scales[kGuard + scale_count + i])) << "write outside the scales";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  std::ostringstream name;
  name << (p.dtype == DType::kBFloat16 ? "bf16" : "fp16") << "_d" << p.head_dim << "_rows" << p.block_rows
       << (p.hadamard ? "_hadamard" : "") << "_b" << p.shape.batch << "_s" << p.shape.seqlen << "_h" << p.shape.heads
       << (p.shape.strided ? "_strided" : "")
       << (p.shape.magnitude < 1 ? "_tiny" : p.shape.magnitude > 1 ? "_huge" : "");
  return name.str();
}

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (int64_t head_dim : {64, 96, 128, 192, 256})
      for (int64_t block_rows : {0, 64, 128})
        for (bool hadamard : {false, true}) {
          if (hadamard && (head_dim & (head_dim - 1)) != 0) continue;  // 96, 192: no transform
          for (const Shape& shape : kShapes) params.push_back({dtype, head_dim, block_rows, hadamard, shape});
        }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantizeGpuTest, ::testing::ValuesIn(all_params()), param_name);

// All-zero groups get scale 1 and zero codes; seqlen 0 with block_rows 0 writes scale 1.
TEST(QuantizeGpuEdgeCases, ZeroGroupsAndEmptySequences) {
  WARPFLASH_REQUIRE_HOPPER();
  const int64_t seqlen = 300, heads = 2, d = 128;
  DeviceBuffer<uint16_t> input(seqlen * heads * d);
  DeviceBuffer<uint8_t> output(seqlen * heads * d);
  DeviceBuffer<float> scales(heads * 5);  // block_rows 64: 5 blocks
  WARPFLASH_CUDA_OK(cudaMemset(input.get(), 0, input.size() * 2));
  for (int64_t block_rows : {0, 64, 128}) {
    for (bool hadamard : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "block_rows " << block_rows << (hadamard ? ", hadamard" : ""));
      WARPFLASH_CUDA_OK(cudaMemset(output.get(), kE4m3Poison, output.size()));
      WARPFLASH_CUDA_OK(cudaMemset(scales.get(), 0xff, scales.size() * 4));
      QuantizeFp8Args args;
      args.batch = 1, args.seqlen = seqlen, args.heads = heads, args.head_dim = d;
      args.input = contiguous_view(input.get(), seqlen, heads, d);
      args.output = contiguous_view(output.get(), seqlen, heads, d);
      args.scales = scales.get();
      args.block_rows = block_rows;
      args.hadamard = hadamard;
      Status status = quantize_fp8(args);
      ASSERT_TRUE(status.ok()) << status.message();
      WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
      for (uint8_t code : output.download()) ASSERT_EQ(code, 0);
      std::vector<float> got = scales.download();
      for (int64_t i = 0; i < heads * quantize_fp8_num_blocks(seqlen, block_rows); ++i) ASSERT_EQ(got[i], 1.f) << i;
    }
  }
  WARPFLASH_CUDA_OK(cudaMemset(scales.get(), 0xff, scales.size() * 4));
  QuantizeFp8Args args;
  args.batch = 1, args.seqlen = 0, args.heads = heads, args.head_dim = d;
  args.scales = scales.get();
  args.block_rows = 0;
  Status status = quantize_fp8(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got = scales.download();
  EXPECT_EQ(got[0], 1.f);
  EXPECT_EQ(got[1], 1.f);
  EXPECT_TRUE(std::isnan(got[2]));
}

// A host pointer is reported, not faulted on.
TEST(QuantizeGpuEdgeCases, HostPointerIsAnError) {
  WARPFLASH_REQUIRE_HOPPER();
  const int64_t seqlen = 64, d = 64;
  std::vector<uint16_t> host(seqlen * d);
  DeviceBuffer<uint8_t> output(seqlen * d);
  DeviceBuffer<float> scales(1);
  QuantizeFp8Args args;
  args.batch = 1, args.seqlen = seqlen, args.heads = 1, args.head_dim = d;
  args.input = contiguous_view(host.data(), seqlen, 1, d);
  args.output = contiguous_view(output.get(), seqlen, 1, d);
  args.scales = scales.get();
  Status status = quantize_fp8(args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("input.data"), std::string::npos) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace warpflash
