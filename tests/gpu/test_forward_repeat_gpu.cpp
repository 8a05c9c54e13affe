// Repeated runs on the same inputs give bitwise identical O and LSE: the forward has no
// atomics and a fixed order of work, so any difference between runs is a race (a buffer
// reused before every reader is done). Shapes with many tiles per persistent CTA, on every
// compiled head-dim pair and kernel variant that they pick.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/forward_args.h"
#include "common/head_dims.h"
#include "common/hopper_gpu.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::head_dims_name;
using testing::to_bits;

struct RepeatShape {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv;
  bool causal;
  bool vary_lengths = false;  // seqused: sequences of different lengths, the dynamic tile order
};

// 920 tiles (d=256: the short kernel, O through the Q buffer), a long causal problem, and
// long non-causal ones (the long, clustered and split kernels where the head dim has them);
// sequences of different lengths, whose CTAs take tiles from a counter.
const RepeatShape kRepeatShapes[] = {
    {23, 640, 640, 8, 2, false}, {23, 640, 640, 8, 2, true},       {1, 2500, 2100, 8, 2, true},
    {2, 1200, 8250, 8, 2, false}, {1, 700, 9000, 4, 2, false},     {23, 640, 640, 8, 2, true, true},
    {5, 1500, 1500, 8, 2, false, true},
};
constexpr int kRuns = 8;

TEST(ForwardRepeatGpu, RepeatedRunsAreBitwiseIdentical) {
  WARPFLASH_REQUIRE_HOPPER();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (HeadDims dims : compiled_head_dim_pairs(dtype)) {
      for (const RepeatShape& s : kRepeatShapes) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << head_dims_name(dims) << " batch " << s.batch
                                          << " " << s.seqlen_q << "x" << s.seqlen_k << (s.causal ? " causal" : "")
                                          << (s.vary_lengths ? " seqused" : ""));
        std::mt19937 rng(1234);
        std::normal_distribution<float> normal(0.f, 1.f);
        auto random_bits = [&](int64_t count) {
          std::vector<uint16_t> bits(count);
          for (uint16_t& b : bits) b = to_bits(dtype, normal(rng));
          return bits;
        };
        const int64_t q_count = s.batch * s.seqlen_q * s.heads_q * dims.qk;
        const int64_t k_count = s.batch * s.seqlen_k * s.heads_kv * dims.qk;
        const int64_t v_count = s.batch * s.seqlen_k * s.heads_kv * dims.v;
        const int64_t o_count = s.batch * s.seqlen_q * s.heads_q * dims.v;
        DeviceBuffer<uint16_t> q(q_count), k(k_count), v(v_count), o(o_count);
        DeviceBuffer<float> lse(s.batch * s.heads_q * s.seqlen_q);
        ASSERT_TRUE(q.upload(random_bits(q_count)) && k.upload(random_bits(k_count)) &&
                    v.upload(random_bits(v_count)));
        ForwardArgs args = testing::contiguous_forward_args(
            dtype, {s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, dims.qk, dims.v}, q.get(), k.get(),
            v.get(), o.get(), lse.get());
        args.causal = s.causal;
        std::vector<int> used_q(s.batch), used_k(s.batch);
        for (int64_t b = 0; b < s.batch; ++b) {
          used_q[b] = static_cast<int>(s.seqlen_q - (b * 137) % s.seqlen_q);
          used_k[b] = static_cast<int>(s.seqlen_k - (b * 101) % s.seqlen_k);
        }
        DeviceBuffer<int> used_q_dev(s.batch), used_k_dev(s.batch);
        if (s.vary_lengths) {
          ASSERT_TRUE(used_q_dev.upload(used_q) && used_k_dev.upload(used_k));
          args.seqused_q = used_q_dev.get();
          args.seqused_k = used_k_dev.get();
        }
        DeviceBuffer<float> workspace(forward_workspace_bytes(args) / sizeof(float));
        args.workspace = workspace.get();
        args.workspace_bytes = workspace.size() * sizeof(float);
        std::vector<uint16_t> first_o;
        std::vector<float> first_lse;
        for (int run = 0; run < kRuns; ++run) {
          WARPFLASH_CUDA_OK(cudaMemset(o.get(), 0xff, o_count * sizeof(uint16_t)));
          WARPFLASH_CUDA_OK(cudaMemset(lse.get(), 0xff, lse.size() * sizeof(float)));  // NaN: a skipped store shows
          Status status = forward(args);
          ASSERT_TRUE(status.ok()) << status.message();
          WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
          std::vector<uint16_t> out = o.download();
          std::vector<float> out_lse = lse.download();
          if (run == 0) {
            first_o = out;
            first_lse = out_lse;
            continue;
          }
          int64_t differing = 0, first_index = -1;
          for (int64_t i = 0; i < o_count; ++i) {
            if (out[i] != first_o[i] && differing++ == 0) first_index = i;
          }
          ASSERT_EQ(differing, 0) << "run " << run << ": " << differing << " elements of O differ from run 0, the first at "
                                  << first_index;
          ASSERT_EQ(0, std::memcmp(out_lse.data(), first_lse.data(), out_lse.size() * sizeof(float)))
              << "run " << run << ": the LSE differs from run 0";
        }
      }
    }
  }
}

}  // namespace
}  // namespace warpflash
