// The forward kernel against the double-precision reference on the shapes that break
// kernels (docs/design.md), for every compiled dtype and head-dim pair, causal and not.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/forward_args.h"
#include "common/head_dims.h"
#include "common/hopper_gpu.h"
#include "common/output_tolerance.h"
#include "common/test_seed.h"
#include "reference/attention_reference.h"
#include "reference/half_precision.h"
#include "warpflash/warpflash.h"

namespace warpflash {

void PrintTo(DType dtype, std::ostream* out) { *out << dtype_name(dtype); }

namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::head_dims_name;
using testing::is_compiled;
using testing::kPoison;
using testing::kTestHeadDims;
using testing::to_bits;

struct Shape {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv;
  bool strided;  // (batch, heads, seqlen, head_dim + 8) storage instead of contiguous BSHD
  bool workspace = true;  // pass forward_workspace_bytes() of scratch (the split last round)
};

const Shape kShapes[] = {
    {1, 1, 1, 1, 1, false},        {2, 17, 17, 4, 4, false},     {1, 127, 127, 2, 2, false},
    {1, 129, 129, 2, 2, false},    {1, 1000, 1000, 2, 1, false}, {1, 4097, 4097, 1, 1, false},
    {2, 113, 203, 4, 1, false},    {1, 203, 113, 8, 2, false},   {7, 64, 300, 16, 2, false},
    {1, 1, 1000, 4, 4, false},     {1, 1000, 17, 2, 2, false},   {2, 129, 257, 16, 2, true},
    {1, 300, 300, 4, 4, true},
    // More tiles than SMs, so each persistent CTA runs several; with causal and
    // seqlen_q > seqlen_k, tiles that see no key mixed with tiles that do.
    {3, 600, 700, 16, 4, false},   {2, 900, 300, 16, 2, false},
    // A short causal problem with enough tiles (4 m-blocks x 136 heads) for the order that
    // keeps a head's m-blocks together (ForwardTileScheduler::plan, tail_heads_together).
    {17, 512, 512, 8, 2, false},
    // Enough heads (23 x 8) for the causal pair phase with an odd m-block count (5 of 128
    // rows: pairs and units of two heads' middle m-blocks) and the tail after it.
    {23, 640, 640, 8, 2, false},
    // At least 8k keys: d=128's long kernel (128 x 160 tiles, one Q buffer), a partial
    // last K/V block; the second with more tiles than SMs, so CTAs reuse the Q buffer.
    {1, 300, 8250, 2, 1, false},   {1, 1100, 8250, 16, 2, false},
    // Non-causal with at least 8k keys and an even m-block count: d=128's and d=256's
    // clustered kernels (two CTAs share each K/V block); a partial last m-block and K/V
    // block, and more tiles than SMs.
    {1, 200, 8200, 4, 4, false},   {2, 1200, 8250, 8, 2, false},
    // The last round split along the keys (split_tail.h): 80 cluster units on 66 clusters
    // above (14 in the tail), here 12 units on all 66 clusters; and the first unsplit.
    {1, 700, 9000, 4, 2, false},   {2, 1200, 8250, 8, 2, false, /*workspace=*/false},
    // d=256's default kernel (more than 1k keys, 8k causal; 128 x 80 tiles): several tiles
    // per CTA and a partial last K/V block; causal, the short kernel's tiles that see no key.
    {1, 2500, 2100, 8, 2, false},
};

using Param = std::tuple<DType, HeadDims, bool, Shape>;

void PrintTo(const Shape& s, std::ostream* out) {
  *out << "batch " << s.batch << ", seqlen_q " << s.seqlen_q << ", seqlen_k " << s.seqlen_k << ", heads "
       << s.heads_q << "/" << s.heads_kv << (s.strided ? ", strided" : "") << (s.workspace ? "" : ", no workspace");
}

// A (batch, seqlen, heads, head_dim) tensor: dense double values for the reference and
// the 16-bit storage the GPU reads, in either layout, with a poisoned guard region
// around the data and in the padding, to catch writes out of bounds.
struct StridedTensor {
  static constexpr int64_t kGuard = 64;    // elements before and after
  int64_t batch, seqlen, heads, head_dim;
  TensorView4d view;  // data filled in once the buffer exists
  std::vector<uint16_t> storage;

  StridedTensor(int64_t b, int64_t s, int64_t h, int64_t d, bool strided)
      : batch(b), seqlen(s), heads(h), head_dim(d) {
    if (strided) {
      int64_t row = d + 8;
      view = {nullptr, h * s * row, row, s * row};
    } else {
      view = {nullptr, s * h * d, h * d, d};
    }
    storage.assign(kGuard * 2 + std::max<int64_t>(b * view.batch_stride, 1), kPoison);
  }
  int64_t offset(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return kGuard + b * view.batch_stride + s * view.seqlen_stride + h * view.head_stride + d;
  }
  int64_t dense_index(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return ((b * seqlen + s) * heads + h) * head_dim + d;
  }
  // Random values, rounded to the dtype; returns them densely as doubles.
  std::vector<double> fill_random(DType dtype, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<double> dense(batch * seqlen * heads * head_dim);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < head_dim; ++d) {
            uint16_t bits = to_bits(dtype, normal(rng));
            storage[offset(b, s, h, d)] = bits;
            dense[dense_index(b, s, h, d)] = from_bits(dtype, bits);
          }
    return dense;
  }
};

struct Errors {
  double max_abs = 0, sum_sq = 0, ref_sum_sq = 0;
  double rel_l2() const { return std::sqrt(sum_sq / std::max(ref_sum_sq, 1e-300)); }
};

Errors compare(const std::vector<double>& out, const std::vector<double>& ref) {
  Errors e;
  for (size_t i = 0; i < ref.size(); ++i) {
    double diff = std::fabs(out[i] - ref[i]);
    if (!(diff <= e.max_abs)) e.max_abs = std::isnan(diff) ? INFINITY : diff;
    e.sum_sq += std::isnan(diff) ? INFINITY : diff * diff;
    e.ref_sum_sq += ref[i] * ref[i];
  }
  return e;
}

class ForwardGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardGpuTest, MatchesReference) {
  WARPFLASH_REQUIRE_HOPPER();
  auto [dtype, dims, causal, shape] = GetParam();
  if (!is_compiled(dtype, dims)) GTEST_SKIP() << head_dims_name(dims) << " not compiled for " << dtype_name(dtype);
  const int64_t head_dim = dims.qk, head_dim_v = dims.v;
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  StridedTensor q(shape.batch, shape.seqlen_q, shape.heads_q, head_dim, shape.strided);
  StridedTensor k(shape.batch, shape.seqlen_k, shape.heads_kv, head_dim, shape.strided);
  StridedTensor v(shape.batch, shape.seqlen_k, shape.heads_kv, head_dim_v, shape.strided);
  StridedTensor o(shape.batch, shape.seqlen_q, shape.heads_q, head_dim_v, shape.strided);
  std::vector<double> q_dense = q.fill_random(dtype, rng);
  std::vector<double> k_dense = k.fill_random(dtype, rng);
  std::vector<double> v_dense = v.fill_random(dtype, rng);

  DeviceBuffer<uint16_t> q_dev(q.storage.size()), k_dev(k.storage.size()), v_dev(v.storage.size()),
      o_dev(o.storage.size());
  int64_t lse_count = shape.batch * shape.heads_q * shape.seqlen_q;
  DeviceBuffer<float> lse_dev(lse_count + 2 * StridedTensor::kGuard);
  std::vector<float> lse_host(lse_dev.size(), NAN);
  ASSERT_TRUE(q_dev.upload(q.storage) && k_dev.upload(k.storage) && v_dev.upload(v.storage) &&
              o_dev.upload(o.storage) && lse_dev.upload(lse_host));

  ForwardArgs args;
  args.dtype = dtype;
  args.shape = {shape.batch, shape.seqlen_q, shape.seqlen_k, shape.heads_q, shape.heads_kv, head_dim, head_dim_v};
  auto with_data = [](TensorView4d view, uint16_t* base) {
    view.data = base + StridedTensor::kGuard;
    return view;
  };
  args.q = with_data(q.view, q_dev.get());
  args.k = with_data(k.view, k_dev.get());
  args.v = with_data(v.view, v_dev.get());
  args.o = with_data(o.view, o_dev.get());
  args.lse = lse_dev.get() + StridedTensor::kGuard;
  args.causal = causal;
  DeviceBuffer<float> workspace(shape.workspace ? forward_workspace_bytes(args) / sizeof(float) : 0);
  args.workspace = workspace.get();
  args.workspace_bytes = workspace.size() * sizeof(float);
  Status status = forward(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());

  reference::Problem problem{shape.batch, shape.seqlen_q, shape.seqlen_k, shape.heads_q, shape.heads_kv,
                             head_dim, 1.0 / std::sqrt(double(head_dim)), causal};
  problem.head_dim_v = head_dim_v;
  std::vector<double> o_ref, lse_ref, o_low;
  reference::forward(problem, q_dense, k_dense, v_dense, o_ref, lse_ref);
  reference::forward_low_precision(problem,
                                   dtype == DType::kBFloat16 ? reference::Precision::kBFloat16
                                                             : reference::Precision::kFloat16,
                                   q_dense, k_dense, v_dense, o_low);

  std::vector<uint16_t> o_out = o_dev.download();
  std::vector<float> lse_out = lse_dev.download();
  ASSERT_EQ(o_out.size(), o.storage.size());
  // Everything outside the output elements (guards, padding) must still be poison.
  std::vector<bool> is_output(o_out.size(), false);
  std::vector<double> o_dense(o_ref.size());
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t s = 0; s < shape.seqlen_q; ++s)
      for (int64_t h = 0; h < shape.heads_q; ++h)
        for (int64_t d = 0; d < head_dim_v; ++d) {
          is_output[o.offset(b, s, h, d)] = true;
          o_dense[o.dense_index(b, s, h, d)] = from_bits(dtype, o_out[o.offset(b, s, h, d)]);
        }
  for (size_t i = 0; i < o_out.size(); ++i) {
    if (!is_output[i]) ASSERT_EQ(o_out[i], kPoison) << "write outside O at storage index " << i;
  }

  // FlashAttention's criterion: within 2x of the error that attention computed in the
  // input precision makes, plus the rounding of the largest output element.
  Errors kernel = compare(o_dense, o_ref), low = compare(o_low, o_ref);
  double atol = testing::output_rounding(dtype, o_ref);
  EXPECT_LE(kernel.max_abs, 2 * low.max_abs + atol) << "max abs error (low-precision reference: " << low.max_abs << ")";
  EXPECT_LE(kernel.rel_l2(), 2 * low.rel_l2() + 1e-4) << "relative L2 error (low-precision reference: " << low.rel_l2() << ")";

  int64_t bad_lse = 0;
  for (int64_t i = 0; i < lse_count; ++i) {
    double got = lse_out[StridedTensor::kGuard + i], want = lse_ref[i];
    bool ok = std::isinf(want) ? (std::isinf(got) && got < 0) : std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want));
    if (!ok && bad_lse++ < 5) ADD_FAILURE() << "lse[" << i << "] = " << got << ", reference " << want;
  }
  EXPECT_EQ(bad_lse, 0);
  for (int64_t i = 0; i < StridedTensor::kGuard; ++i) {
    ASSERT_TRUE(std::isnan(lse_out[i]) && std::isnan(lse_out[lse_count + StridedTensor::kGuard + i]))
        << "write outside LSE";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  auto [dtype, dims, causal, shape] = info.param;
  std::ostringstream name;
  name << (dtype == DType::kBFloat16 ? "bf16" : "fp16") << "_" << head_dims_name(dims) << (causal ? "_causal" : "_full")
       << "_b"
       << shape.batch << "_q" << shape.seqlen_q << "_k" << shape.seqlen_k << "_h" << shape.heads_q << "_kv"
       << shape.heads_kv << (shape.strided ? "_strided" : "") << (shape.workspace ? "" : "_no_workspace");
  return name.str();
}

// Every shape for the head dims with kernels chosen by length (64, 128, 256); the head
// dims with one kernel (96, 192) skip the shapes of 8k keys and more, which are there to
// reach the long, clustered and split kernels (4097 keys already run a long loop), and
// whose CPU reference would double the tests' time.
std::vector<Param> shape_params() {
  std::vector<Param> params;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (HeadDims dims : kTestHeadDims) {
      bool one_kernel = dims.qk == 96 || dims.qk == 192;
      for (bool causal : {false, true}) {
        for (const Shape& shape : kShapes) {
          if (!(one_kernel && shape.seqlen_k >= 8192)) params.emplace_back(dtype, dims, causal, shape);
        }
      }
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardGpuTest, ::testing::ValuesIn(shape_params()), param_name);

// Rows that see no key: O = 0 and LSE = -inf, never NaN; for every compiled pair (the
// K/V tensor maps describe Q's first row then, at V's head dim).
TEST(ForwardGpuEdgeCases, EmptyKeysGiveZeroOutputAndMinusInfLse) {
  WARPFLASH_REQUIRE_HOPPER();
  for (HeadDims dims : compiled_head_dim_pairs(DType::kBFloat16)) {
    SCOPED_TRACE(head_dims_name(dims));
    const int64_t seqlen_q = 70, heads = 2;
    DeviceBuffer<uint16_t> q(seqlen_q * heads * dims.qk), o(seqlen_q * heads * dims.v);
    DeviceBuffer<float> lse(heads * seqlen_q);
    WARPFLASH_CUDA_OK(cudaMemset(q.get(), 0x3f, q.size() * 2));
    WARPFLASH_CUDA_OK(cudaMemset(o.get(), 0xff, o.size() * 2));
    WARPFLASH_CUDA_OK(cudaMemset(lse.get(), 0xff, lse.size() * 4));
    ForwardArgs args;
    args.shape = {1, seqlen_q, 0, heads, heads, dims.qk, dims.v};
    args.q = contiguous_view(q.get(), seqlen_q, heads, dims.qk);
    args.o = contiguous_view(o.get(), seqlen_q, heads, dims.v);
    args.lse = lse.get();
    Status status = forward(args);
    ASSERT_TRUE(status.ok()) << status.message();
    WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
    for (uint16_t bits : o.download()) ASSERT_EQ(bits, 0);
    for (float x : lse.download()) ASSERT_TRUE(std::isinf(x) && x < 0) << x;
  }
}

TEST(ForwardGpuEdgeCases, EmptyBatchOrQueriesIsANoOp) {
  WARPFLASH_REQUIRE_HOPPER();
  ForwardArgs args;
  args.shape = {0, 128, 128, 4, 4, compiled_head_dims(DType::kBFloat16).at(0)};
  Status status = forward(args);  // null pointers are fine: nothing is read or written
  EXPECT_TRUE(status.ok()) << status.message();
  args.shape = {2, 0, 128, 4, 4, args.shape.head_dim};
  status = forward(args);
  EXPECT_TRUE(status.ok()) << status.message();
}

// A host pointer must be reported, not fault inside the kernel.
TEST(ForwardGpuEdgeCases, HostPointerIsAnError) {
  WARPFLASH_REQUIRE_HOPPER();
  const int64_t head_dim = compiled_head_dims(DType::kBFloat16).at(0);
  std::vector<uint16_t> host(128 * head_dim);
  DeviceBuffer<uint16_t> device(128 * head_dim);
  ForwardArgs args;
  args.shape = {1, 128, 128, 1, 1, head_dim};
  args.q = contiguous_view(host.data(), 128, 1, head_dim);
  args.k = args.v = args.o = contiguous_view(device.get(), 128, 1, head_dim);
  Status status = forward(args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("q.data"), std::string::npos) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
}

// A workspace smaller than the split needs is reported, not overrun.
TEST(ForwardGpuEdgeCases, TooSmallWorkspaceIsAnError) {
  WARPFLASH_REQUIRE_HOPPER();
  std::vector<int> compiled = compiled_head_dims(DType::kBFloat16);
  if (std::find(compiled.begin(), compiled.end(), 128) == compiled.end()) GTEST_SKIP() << "d=128 not compiled";
  const int64_t seqlen_q = 700, seqlen_k = 16000, heads = 4, head_dim = 128;
  DeviceBuffer<uint16_t> q(seqlen_q * heads * head_dim), kv(seqlen_k * heads * head_dim);
  DeviceBuffer<uint16_t> o(seqlen_q * heads * head_dim);
  DeviceBuffer<float> workspace(64);
  ForwardArgs args = testing::contiguous_forward_args(DType::kBFloat16, {1, seqlen_q, seqlen_k, heads, heads, head_dim},
                                                      q.get(), kv.get(), kv.get(), o.get(), /*lse=*/nullptr);
  ASSERT_GT(forward_workspace_bytes(args), workspace.size() * sizeof(float));
  args.workspace = workspace.get();
  args.workspace_bytes = workspace.size() * sizeof(float);
  Status status = forward(args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("workspace_bytes = 256"), std::string::npos) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace warpflash
