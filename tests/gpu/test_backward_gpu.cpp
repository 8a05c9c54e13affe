// The backward pass against the double-precision reference (FlashAttention's criterion:
// each of dQ, dK, dV within 2x the error of the same math in the input precision, plus a
// small slack), with O and LSE from warpflash's own forward as in training. d = 64, 96,
// 128, 192, (192, 128) and 256, dense batches: causal and not, seqlen_q != seqlen_k, rows
// that see no key, a sliding window, GQA (groups 2, 4, 8) and MQA, softcap, learnable sinks
// and their gradient, lengths 1, 17, 127 against 129, 1000 and 4097.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/head_dims.h"
#include "common/hopper_gpu.h"
#include "common/test_seed.h"
#include "reference/attention_reference.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::kPoison;
using testing::to_bits;

// dO and the gradients as contiguous (rows, heads, head dim) views, and the workspace that
// backward() asks for (kept alive by the returned buffer).
void set_gradients(BackwardArgs& args, const DeviceBuffer<uint16_t>& d_o, const DeviceBuffer<uint16_t>& d_q,
                   const DeviceBuffer<uint16_t>& d_k, const DeviceBuffer<uint16_t>& d_v, int64_t rows_q,
                   int64_t rows_k, int64_t heads_q, int64_t heads_kv, int64_t d, int64_t d_v_dim = 0) {
  const int64_t dv = d_v_dim != 0 ? d_v_dim : d;
  args.d_o = contiguous_view(d_o.get(), rows_q, heads_q, dv);
  args.d_q = contiguous_view(d_q.get(), rows_q, heads_q, d);
  args.d_k = contiguous_view(d_k.get(), rows_k, heads_kv, d);
  args.d_v = contiguous_view(d_v.get(), rows_k, heads_kv, dv);
}
std::unique_ptr<DeviceBuffer<uint8_t>> attach_workspace(BackwardArgs& args) {
  auto workspace = std::make_unique<DeviceBuffer<uint8_t>>(backward_workspace_bytes(args));
  args.workspace = workspace->get();
  args.workspace_bytes = workspace->size();
  return workspace;
}

struct BackwardCase {
  const char* name;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv;
  bool causal;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  bool sinks = false;
  bool deterministic = false;
  int64_t chunk = 0;  // attention_chunk
};

const BackwardCase kBackwardCases[] = {
    {"one_tile", 1, 64, 128, 1, 1, false},         {"full_uneven", 2, 200, 300, 2, 2, false},
    {"causal_square", 2, 256, 256, 2, 2, true},    {"causal_more_queries", 1, 300, 100, 2, 2, true},
    {"causal_more_keys", 1, 100, 333, 2, 2, true}, {"single_query", 3, 1, 129, 2, 2, false},
    {"window", 1, 500, 500, 2, 2, false, 64, 16},  {"long", 1, 1000, 1000, 2, 2, true},
    {"gqa_causal", 1, 300, 300, 4, 2, true},       {"mqa", 2, 130, 260, 4, 1, false},
    {"softcap", 1, 257, 257, 2, 2, true, -1, -1, 30.f},
    {"sinks_gqa", 2, 200, 150, 4, 2, true, -1, -1, 0.f, true},
    // The awkward lengths and group sizes: 17, 127 against 129, 4097; GQA 4 and 8.
    {"seqlen_17", 3, 17, 17, 2, 2, true},          {"seqlen_127_129", 1, 127, 129, 2, 2, false},
    {"gqa4_window", 1, 333, 333, 8, 2, false, 100, 100},
    {"gqa8_causal", 1, 257, 257, 16, 2, true},     {"seqlen_4097_mqa", 1, 4097, 4097, 4, 1, true},
    // Deterministic mode (its own order of the dQ sums) against the same reference.
    {"deterministic_full", 2, 200, 300, 2, 2, false, -1, -1, 0.f, false, true},
    {"deterministic_gqa_causal", 1, 700, 700, 4, 2, true, -1, -1, 0.f, false, true},
    {"deterministic_more_keys", 1, 100, 333, 2, 2, true, -1, -1, 0.f, false, true},
    {"deterministic_window", 1, 500, 500, 2, 2, false, 64, 16, 0.f, false, true},
    {"deterministic_sinks_gqa", 2, 200, 150, 4, 2, true, -1, -1, 0.f, true, true},
    // The mask's bounds one at a time and together, across blocks and off the diagonal.
    {"window_left_only", 1, 400, 300, 2, 2, false, 100, -1},
    {"window_right_only", 1, 300, 400, 2, 2, false, -1, 40},
    {"causal_window", 2, 333, 500, 2, 2, true, 150, -1},
    {"chunk_causal", 1, 600, 600, 2, 2, true, -1, -1, 0.f, false, false, 128},
    {"chunk_window", 1, 300, 450, 2, 2, false, 70, 20, 0.f, false, false, 100},
};

// The sinks' gradient, -sum over rows of P_sink * rowsum(dO * O), two ways: against the same
// sum in fp64 over the kernel's own O and LSE (it checks the reduction, tightly), and against
// the exact gradient within 2x the error that O in the input precision causes (FlashAttention's
// criterion: bf16's O moves this sum with cancellation by a few percent).
void check_sink_gradient(const reference::Problem& p, DType dtype, const std::vector<double>& q,
                         const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& d_o,
                         const std::vector<uint16_t>& o_bits, const std::vector<float>& lse,
                         const std::vector<float>& d_sinks, const std::vector<double>& d_sinks_exact) {
  std::vector<double> o_exact, lse_exact, o_low;
  reference::forward(p, q, k, v, o_exact, lse_exact);
  reference::forward_low_precision(
      p, dtype == DType::kBFloat16 ? reference::Precision::kBFloat16 : reference::Precision::kFloat16, q, k, v, o_low);
  const int64_t d = p.value_head_dim();
  for (int64_t h = 0; h < p.heads_q; ++h) {
    double from_kernel = 0, magnitude = 0, from_low = 0;  // the sum over the kernel's O, |terms|, over o_low
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const int64_t row = (b * p.seqlen_q + i) * p.heads_q + h, stats = (b * p.heads_q + h) * p.seqlen_q + i;
        double delta = 0, delta_low = 0, delta_abs = 0;
        for (int64_t c = 0; c < d; ++c) {
          const double x = d_o[row * d + c] * from_bits(dtype, o_bits[row * d + c]);
          delta += x, delta_abs += std::fabs(x), delta_low += d_o[row * d + c] * o_low[row * d + c];
        }
        if (lse[stats] != -INFINITY) {
          const double sink_p = std::exp(p.sinks[h] - double(lse[stats]));
          from_kernel -= sink_p * delta, magnitude += sink_p * delta_abs;
        }
        if (lse_exact[stats] != -INFINITY) from_low -= std::exp(p.sinks[h] - lse_exact[stats]) * delta_low;
      }
    }
    EXPECT_NEAR(d_sinks[h], from_kernel, 1e-4 * magnitude + 1e-5) << "d_sink of head " << h << " against its own O";
    EXPECT_NEAR(d_sinks[h], d_sinks_exact[h], 2 * std::fabs(from_low - d_sinks_exact[h]) + 1e-3 * magnitude + 1e-4)
        << "d_sink of head " << h << " (O in the input precision alone: " << from_low << ")";
  }
}

// The head dims the backward has kernels for (a build may leave some out: skipped).
const HeadDims kBackwardHeadDims[] = {{64, 64}, {96, 96}, {128, 128}, {192, 192}, {192, 128}, {256, 256}};

using Param = std::tuple<DType, HeadDims, BackwardCase>;  // dtype, head dims (Q/K, V), case
class BackwardGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(BackwardGpuTest, MatchesReference) {
  WARPFLASH_REQUIRE_HOPPER();
  auto [dtype, dims, c] = GetParam();
  const int64_t d = dims.qk, dv = dims.v;
  if (!testing::is_compiled(dtype, dims)) {
    GTEST_SKIP() << testing::head_dims_name(dims) << " not compiled for " << dtype_name(dtype);
  }
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  reference::Problem p{c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv, d, 1.0 / std::sqrt(double(d)),
                       c.causal};
  p.head_dim_v = dv;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.attention_chunk = c.chunk;
  p.softcap = c.softcap;
  std::vector<float> sinks(c.heads_q);
  std::uniform_real_distribution<float> sink_logit(-2.f, 3.f);
  for (float& sink : sinks) sink = sink_logit(rng);
  if (c.sinks) p.sinks.assign(sinks.begin(), sinks.end());
  auto random = [&](int64_t count, std::vector<uint16_t>& bits, std::vector<double>& values) {
    bits.resize(count);
    values.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      bits[i] = to_bits(dtype, normal(rng));
      values[i] = from_bits(dtype, bits[i]);
    }
  };
  std::vector<uint16_t> q_bits, k_bits, v_bits, do_bits;
  std::vector<double> q, k, v, d_o;
  random(p.q_elements(), q_bits, q);
  random(p.kv_elements(), k_bits, k);
  random(p.v_elements(), v_bits, v);
  random(p.o_elements(), do_bits, d_o);
  DeviceBuffer<uint16_t> q_dev(q.size()), k_dev(k.size()), v_dev(v.size()), o_dev(d_o.size()), do_dev(d_o.size()),
      dq_dev(q.size()), dk_dev(k.size()), dv_dev(v.size());
  DeviceBuffer<float> lse_dev(p.lse_elements()), sinks_dev(sinks.size()), d_sinks_dev(sinks.size());
  ASSERT_TRUE(sinks_dev.upload(sinks));
  ASSERT_TRUE(q_dev.upload(q_bits) && k_dev.upload(k_bits) && v_dev.upload(v_bits) && do_dev.upload(do_bits));
  for (auto* buffer : {&dq_dev, &dk_dev, &dv_dev}) {
    ASSERT_TRUE(buffer->upload(std::vector<uint16_t>(buffer->size(), kPoison)));
  }

  BackwardArgs args;
  ForwardArgs& f = args.forward;
  f.dtype = dtype;
  f.shape = {c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv, d, dv};
  f.q = contiguous_view(q_dev.get(), c.seqlen_q, c.heads_q, d);
  f.k = contiguous_view(k_dev.get(), c.seqlen_k, c.heads_kv, d);
  f.v = contiguous_view(v_dev.get(), c.seqlen_k, c.heads_kv, dv);
  f.o = contiguous_view(o_dev.get(), c.seqlen_q, c.heads_q, dv);
  f.lse = lse_dev.get();
  f.causal = c.causal;
  f.window_left = c.window_left;
  f.window_right = c.window_right;
  f.attention_chunk = c.chunk;
  f.softcap = c.softcap;
  if (c.sinks) f.learnable_sink = sinks_dev.get();
  Status status = forward(f);
  ASSERT_TRUE(status.ok()) << status.message();
  set_gradients(args, do_dev, dq_dev, dk_dev, dv_dev, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv, d, dv);
  if (c.sinks) args.d_sink = d_sinks_dev.get();
  args.deterministic = c.deterministic;
  auto workspace = attach_workspace(args);
  status = backward(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());

  std::vector<double> dq_ref, dk_ref, dv_ref, dq_low, dk_low, dv_low, d_sinks_ref;
  reference::backward(p, q, k, v, d_o, dq_ref, dk_ref, dv_ref, &d_sinks_ref);
  reference::backward_low_precision(
      p, dtype == DType::kBFloat16 ? reference::Precision::kBFloat16 : reference::Precision::kFloat16, q, k, v, d_o,
      dq_low, dk_low, dv_low);
  const double atol = dtype == DType::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  struct Gradient {
    const char* name;
    const DeviceBuffer<uint16_t>& got;
    const std::vector<double>& want;
    const std::vector<double>& low;
  };
  for (const Gradient& g : {Gradient{"dQ", dq_dev, dq_ref, dq_low}, Gradient{"dK", dk_dev, dk_ref, dk_low},
                            Gradient{"dV", dv_dev, dv_ref, dv_low}}) {
    std::vector<uint16_t> bits = g.got.download();
    double max_err = 0, max_low = 0;
    int64_t worst = 0;
    for (size_t i = 0; i < g.want.size(); ++i) {
      double err = std::fabs(from_bits(dtype, bits[i]) - g.want[i]);
      if (std::isnan(err)) err = INFINITY;
      if (err > max_err) max_err = err, worst = static_cast<int64_t>(i);
      max_low = std::max(max_low, std::fabs(g.low[i] - g.want[i]));
    }
    EXPECT_LE(max_err, 2 * max_low + atol)
        << g.name << ": max abs error " << max_err << " at element " << worst << " (low-precision reference: "
        << max_low << ")";
  }
  if (c.sinks) {
    check_sink_gradient(p, dtype, q, k, v, d_o, o_dev.download(), lse_dev.download(), d_sinks_dev.download(),
                        d_sinks_ref);
  }
}

// Packed sequences (FlashAttention's varlen layout) with an empty one and lengths around the
// tiles, causal, GQA: each sequence's gradients against the reference of that sequence alone.
class BackwardVarlenGpu : public ::testing::TestWithParam<int> {};  // head dim

TEST_P(BackwardVarlenGpu, MatchesReferencePerSequence) {
  WARPFLASH_REQUIRE_HOPPER();
  const int64_t d = GetParam();
  if (!testing::is_compiled(DType::kBFloat16, HeadDims{int(d), int(d)})) {
    GTEST_SKIP() << "d = " << d << " not compiled";
  }
  const DType dtype = DType::kBFloat16;
  const std::vector<int> lengths_q = {100, 0, 257, 64, 129}, lengths_k = {100, 0, 300, 1, 129};
  const int64_t heads_q = 4, heads_kv = 2, batch = static_cast<int64_t>(lengths_q.size());
  std::vector<int> cu_q(1, 0), cu_k(1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    cu_q.push_back(cu_q.back() + lengths_q[b]);
    cu_k.push_back(cu_k.back() + lengths_k[b]);
  }
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random = [&](int64_t count, std::vector<uint16_t>& bits, std::vector<double>& values) {
    bits.resize(count);
    values.resize(count);
    for (int64_t i = 0; i < count; ++i) values[i] = from_bits(dtype, bits[i] = to_bits(dtype, normal(rng)));
  };
  std::vector<uint16_t> q_bits, k_bits, v_bits, do_bits;
  std::vector<double> q, k, v, d_o;
  random(total_q * heads_q * d, q_bits, q);
  random(total_k * heads_kv * d, k_bits, k);
  random(total_k * heads_kv * d, v_bits, v);
  random(total_q * heads_q * d, do_bits, d_o);
  DeviceBuffer<uint16_t> q_dev(q.size()), k_dev(k.size()), v_dev(v.size()), o_dev(q.size()), do_dev(q.size()),
      dq_dev(q.size()), dk_dev(k.size()), dv_dev(v.size());
  DeviceBuffer<float> lse_dev(heads_q * total_q);
  DeviceBuffer<int> cu_q_dev(cu_q.size()), cu_k_dev(cu_k.size());
  ASSERT_TRUE(q_dev.upload(q_bits) && k_dev.upload(k_bits) && v_dev.upload(v_bits) && do_dev.upload(do_bits) &&
              cu_q_dev.upload(cu_q) && cu_k_dev.upload(cu_k));
  BackwardArgs args;
  ForwardArgs& f = args.forward;
  f.dtype = dtype;
  f.shape = {batch, *std::max_element(lengths_q.begin(), lengths_q.end()),
             *std::max_element(lengths_k.begin(), lengths_k.end()), heads_q, heads_kv, d};
  f.cu_seqlens_q = cu_q_dev.get();
  f.cu_seqlens_k = cu_k_dev.get();
  f.total_q = total_q;
  f.total_k = total_k;
  f.q = contiguous_view(q_dev.get(), total_q, heads_q, d);
  f.k = contiguous_view(k_dev.get(), total_k, heads_kv, d);
  f.v = contiguous_view(v_dev.get(), total_k, heads_kv, d);
  f.o = contiguous_view(o_dev.get(), total_q, heads_q, d);
  f.lse = lse_dev.get();
  f.causal = true;
  Status status = forward(f);
  ASSERT_TRUE(status.ok()) << status.message();
  set_gradients(args, do_dev, dq_dev, dk_dev, dv_dev, total_q, total_k, heads_q, heads_kv, d);
  auto workspace = attach_workspace(args);
  status = backward(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> dq = dq_dev.download(), dk = dk_dev.download(), dv = dv_dev.download();
  for (int64_t b = 0; b < batch; ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b);
    reference::Problem p{1, lengths_q[b], lengths_k[b], heads_q, heads_kv, d, 1.0 / std::sqrt(double(d)), true};
    auto slice = [&](const std::vector<double>& all, int64_t first, int64_t rows, int64_t heads) {
      return std::vector<double>(all.begin() + first * heads * d, all.begin() + (first + rows) * heads * d);
    };
    std::vector<double> qs = slice(q, cu_q[b], lengths_q[b], heads_q), dos = slice(d_o, cu_q[b], lengths_q[b], heads_q);
    std::vector<double> ks = slice(k, cu_k[b], lengths_k[b], heads_kv), vs = slice(v, cu_k[b], lengths_k[b], heads_kv);
    std::vector<double> dq_ref, dk_ref, dv_ref, dq_low, dk_low, dv_low;
    reference::backward(p, qs, ks, vs, dos, dq_ref, dk_ref, dv_ref);
    reference::backward_low_precision(p, reference::Precision::kBFloat16, qs, ks, vs, dos, dq_low, dk_low, dv_low);
    struct Gradient {
      const char* name;
      const std::vector<uint16_t>& got;
      int64_t first;
      const std::vector<double>& want;
      const std::vector<double>& low;
    };
    for (const Gradient& g : {Gradient{"dQ", dq, cu_q[b] * heads_q * d, dq_ref, dq_low},
                              Gradient{"dK", dk, cu_k[b] * heads_kv * d, dk_ref, dk_low},
                              Gradient{"dV", dv, cu_k[b] * heads_kv * d, dv_ref, dv_low}}) {
      double max_err = 0, max_low = 0;
      for (size_t i = 0; i < g.want.size(); ++i) {
        double err = std::fabs(from_bits(dtype, g.got[g.first + i]) - g.want[i]);
        max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
        max_low = std::max(max_low, std::fabs(g.low[i] - g.want[i]));
      }
      EXPECT_LE(max_err, 2 * max_low + std::ldexp(1.0, -8))
          << g.name << " (low-precision reference: " << max_low << ")";
    }
  }
}

// deterministic = true: dQ (the only sum over CTAs) bitwise identical over runs.
class BackwardDeterministicGpu : public ::testing::TestWithParam<int> {};  // head dim

TEST_P(BackwardDeterministicGpu, RepeatedRunsAreBitwiseIdentical) {
  WARPFLASH_REQUIRE_HOPPER();
  const int64_t d = GetParam();
  if (!testing::is_compiled(DType::kBFloat16, HeadDims{int(d), int(d)})) {
    GTEST_SKIP() << "d = " << d << " not compiled";
  }
  const int64_t batch = 2, seqlen = 1000, heads_q = 8, heads_kv = 2;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random_bits = [&](int64_t count) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& b : bits) b = to_bits(DType::kBFloat16, normal(rng));
    return bits;
  };
  const int64_t q_count = batch * seqlen * heads_q * d, kv_count = batch * seqlen * heads_kv * d;
  DeviceBuffer<uint16_t> q(q_count), k(kv_count), v(kv_count), o(q_count), d_o(q_count), d_q(q_count), d_k(kv_count),
      d_v(kv_count);
  DeviceBuffer<float> lse(batch * heads_q * seqlen);
  ASSERT_TRUE(q.upload(random_bits(q_count)) && k.upload(random_bits(kv_count)) && v.upload(random_bits(kv_count)) &&
              d_o.upload(random_bits(q_count)));
  BackwardArgs args;
  ForwardArgs& f = args.forward;
  f.dtype = DType::kBFloat16;
  f.shape = {batch, seqlen, seqlen, heads_q, heads_kv, d};
  f.q = contiguous_view(q.get(), seqlen, heads_q, d);
  f.k = contiguous_view(k.get(), seqlen, heads_kv, d);
  f.v = contiguous_view(v.get(), seqlen, heads_kv, d);
  f.o = contiguous_view(o.get(), seqlen, heads_q, d);
  f.lse = lse.get();
  f.causal = true;
  ASSERT_TRUE(forward(f).ok());
  set_gradients(args, d_o, d_q, d_k, d_v, seqlen, seqlen, heads_q, heads_kv, d);
  args.deterministic = true;
  auto workspace = attach_workspace(args);
  std::vector<uint16_t> first_dq, first_dk;
  for (int run = 0; run < 6; ++run) {
    Status status = backward(args);
    ASSERT_TRUE(status.ok()) << status.message();
    WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> dq = d_q.download(), dk = d_k.download();
    if (run == 0) {
      first_dq = dq;
      first_dk = dk;
      continue;
    }
    ASSERT_EQ(dq, first_dq) << "run " << run << ": dQ differs from run 0";
    ASSERT_EQ(dk, first_dk) << "run " << run << ": dK differs from run 0";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  auto [dtype, dims, c] = info.param;
  std::ostringstream name;
  name << (dtype == DType::kBFloat16 ? "bf16" : "fp16") << "_" << testing::head_dims_name(dims) << "_" << c.name;
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Backward, BackwardGpuTest,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::ValuesIn(kBackwardHeadDims), ::testing::ValuesIn(kBackwardCases)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Backward, BackwardVarlenGpu, ::testing::Values(64, 96, 128, 192, 256),
                         ::testing::PrintToStringParamName());
INSTANTIATE_TEST_SUITE_P(Backward, BackwardDeterministicGpu, ::testing::Values(64, 96, 128, 192, 256),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace warpflash
