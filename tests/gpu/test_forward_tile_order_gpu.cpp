// Causal problems in the dynamic tile order (a workspace: L2-sized sections of heads, a
// short last section merged with the ones before it, ForwardTileScheduler::plan_sections)
// give bitwise the O and LSE of the static order (no workspace), which the reference
// tests check: each tile is one CTA's whole work in either order, so a tile computed twice
// or never (O left NaN) shows as a difference. The shapes make plans that merge the last
// section for every head dim on 132 SMs (sections of 16 MB of K/V; heads before -> after),
// BF16 / FP16: 20 heads at 2k keys: d128 16 + 4 -> 20, d192/128 12 + 8 -> 20, d256
// 8 + 8 + 4 -> 20; 40: d64 32 + 8 -> 40, d128 16 + 16 + 8 -> 16 + 24, d192/128
// 12 + 12 + 12 + 4 -> 12 + 12 + 16; 2 x 15: d96 21 + 9 -> 30, d256 8 + 8 + 8 + 6 -> 8 + 8 + 14;
// 24: d192 10 + 10 + 4 -> 10 + 14; 40 query heads on 20 K/V heads: d256 16 + 16 + 8 -> 16 + 24.
// FP8 (twice the heads a section): d128 32 + 8 -> 40, d256 16 + 4 -> 20 and 16 + 16 + 8 -> 16 + 24.
#include <cstring>
#include <random>
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

struct OrderShape {
  int64_t batch, seqlen, heads_q, heads_kv;
};
const OrderShape kOrderShapes[] = {{1, 2048, 20, 20}, {1, 2048, 40, 40}, {2, 2048, 15, 15}, {1, 2048, 24, 24},
                                   {1, 2048, 40, 20}};

// Random input bytes, drawn from a table of 4096 codes (cheap for the ~60M elements of the
// largest shape; any inputs that differ between tiles do): 16-bit values ~ N(0, 1), or e4m3
// codes of magnitude 2^-2 to 2^2 (exponent fields 5-8: no NaN code).
std::vector<uint8_t> random_input(DType dtype, int64_t elements, std::mt19937& rng) {
  const int bytes_per_element = dtype == DType::kFloat8E4M3 ? 1 : 2;
  std::vector<uint16_t> codes(4096);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> sign(0, 1), exponent(5, 8), mantissa(0, 7);
  for (uint16_t& code : codes) {
    code = bytes_per_element == 1 ? static_cast<uint16_t>(sign(rng) << 7 | exponent(rng) << 3 | mantissa(rng))
                                  : testing::to_bits(dtype, normal(rng));
  }
  std::minstd_rand pick(rng());
  std::vector<uint8_t> bytes(elements * bytes_per_element);
  for (int64_t i = 0; i < elements; ++i) {
    uint16_t code = codes[pick() & 4095];
    std::memcpy(&bytes[i * bytes_per_element], &code, bytes_per_element);  // little-endian: the low byte first
  }
  return bytes;
}

TEST(ForwardTileOrderGpu, DynamicOrderMatchesStaticOrderBitwise) {
  WARPFLASH_REQUIRE_HOPPER();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3}) {
    const int64_t in_bytes = dtype == DType::kFloat8E4M3 ? 1 : 2;
    for (HeadDims dims : compiled_head_dim_pairs(dtype)) {
      for (const OrderShape& s : kOrderShapes) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << head_dims_name(dims) << " batch " << s.batch
                                          << " seqlen " << s.seqlen << " heads " << s.heads_q << "/" << s.heads_kv);
        std::mt19937 rng(4321);
        const int64_t q_count = s.batch * s.seqlen * s.heads_q * dims.qk;
        const int64_t k_count = s.batch * s.seqlen * s.heads_kv * dims.qk;
        const int64_t v_count = s.batch * s.seqlen * s.heads_kv * dims.v;
        const int64_t o_count = s.batch * s.seqlen * s.heads_q * dims.v;
        DeviceBuffer<uint8_t> q(q_count * in_bytes), k(k_count * in_bytes), v(v_count * in_bytes);
        DeviceBuffer<uint16_t> o(o_count);
        DeviceBuffer<float> lse(s.batch * s.heads_q * s.seqlen);
        ASSERT_TRUE(q.upload(random_input(dtype, q_count, rng)) && k.upload(random_input(dtype, k_count, rng)) &&
                    v.upload(random_input(dtype, v_count, rng)));
        ForwardArgs args = testing::contiguous_forward_args(
            dtype, {s.batch, s.seqlen, s.seqlen, s.heads_q, s.heads_kv, dims.qk, dims.v}, q.get(), k.get(), v.get(),
            o.get(), lse.get());
        args.causal = true;
        DeviceBuffer<uint8_t> workspace(forward_workspace_bytes(args));
        ASSERT_GT(workspace.size(), 0u) << "a causal call asks for the tile counter";
        std::vector<uint16_t> outs[2];
        std::vector<float> lses[2];
        for (int dynamic = 0; dynamic < 2; ++dynamic) {
          args.workspace = dynamic ? workspace.get() : nullptr;
          args.workspace_bytes = dynamic ? workspace.size() : 0;
          WARPFLASH_CUDA_OK(cudaMemset(o.get(), 0xff, o_count * sizeof(uint16_t)));  // NaN: a skipped store shows
          WARPFLASH_CUDA_OK(cudaMemset(lse.get(), 0xff, lse.size() * sizeof(float)));
          Status status = forward(args);
          ASSERT_TRUE(status.ok()) << status.message();
          WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
          outs[dynamic] = o.download();
          lses[dynamic] = lse.download();
        }
        int64_t differing = 0, first_index = -1, unwritten = 0;
        for (int64_t i = 0; i < o_count; ++i) {
          if (outs[0][i] != outs[1][i] && differing++ == 0) first_index = i;
          unwritten += outs[1][i] == 0xffff;
        }
        ASSERT_EQ(unwritten, 0) << unwritten << " elements of O left unwritten (NaN) in the dynamic order";
        ASSERT_EQ(differing, 0) << differing << " elements of O differ between the orders, the first at " << first_index
                                << " (static " << outs[0][first_index] << ", dynamic " << outs[1][first_index] << ")";
        ASSERT_EQ(0, std::memcmp(lses[0].data(), lses[1].data(), lses[0].size() * sizeof(float)))
            << "the LSE differs between the orders";
      }
    }
  }
}

}  // namespace
}  // namespace warpflash
