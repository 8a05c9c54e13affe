// What the forward makes of its arguments, checked on the CPU: per-batch sequence lengths,
// which problems are uniform or plain, and which compiled kernel each one runs.
#include <cstdint>

#include <gtest/gtest.h>

#include "api/dispatch.h"
#include "kernels/attention/seqlen.h"
#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"

namespace warpflash::kernels {
namespace {

// Varlen lengths are clamped to the tensor and the tile grid, whatever cu_seqlens hold.
TEST(SequenceLengths, ClampedToTheTensorAndTheGrid) {
  const int cu[] = {0, 5, 3, 40, 100};  // a decreasing pair, one too long, one past the end
  const int used[] = {2, 9, 1, -4};
  SequenceLengths packed{cu, nullptr, /*seqlen=*/30, /*total=*/60};
  EXPECT_EQ(packed.of(0).offset, 0);
  EXPECT_EQ(packed.of(0).length, 5);
  EXPECT_EQ(packed.of(1).length, 0);
  EXPECT_EQ(packed.of(2).offset, 3);
  EXPECT_EQ(packed.of(2).length, 30);
  EXPECT_EQ(packed.of(3).offset, 40);
  EXPECT_EQ(packed.of(3).length, 20);
  EXPECT_EQ(packed.batch_coord(3), 0);
  SequenceLengths with_used{cu, used, 30, 60};
  EXPECT_EQ(with_used.of(0).length, 2);
  EXPECT_EQ(with_used.of(2).length, 1);
  EXPECT_EQ(with_used.of(3).length, 0);
  SequenceLengths dense{nullptr, used, 7, 0};
  EXPECT_EQ(dense.of(1).length, 7);
  EXPECT_EQ(dense.of(1).offset, 0);
  EXPECT_EQ(dense.batch_coord(3), 3);
  EXPECT_TRUE(SequenceLengths{}.uniform());
  // A left padding (the KV-cache kernels' of<true>) starts the keys inside the span, clamped
  // to it; the other kernels never see one (dispatch), and of() leaves it alone.
  const int pads[] = {1, 50, -3, 4};
  SequenceLengths padded{cu, used, 30, 60, pads};
  EXPECT_EQ(padded.of<true>(0).offset, 1);
  EXPECT_EQ(padded.of<true>(0).length, 1);
  EXPECT_EQ(padded.of<true>(2).offset, 3);  // clamped at 0
  EXPECT_EQ(padded.of<true>(2).length, 1);
  EXPECT_EQ(padded.of<true>(3).offset, 40);  // no keys: nothing to skip
  EXPECT_EQ(padded.of<true>(3).length, 0);
  SequenceLengths dense_padded{nullptr, nullptr, 7, 0, pads};
  EXPECT_EQ(dense_padded.of<true>(1).offset, 7);  // clamped at the length: no keys
  EXPECT_EQ(dense_padded.of<true>(1).length, 0);
  EXPECT_EQ(dense_padded.of(1).offset, 0);
  EXPECT_FALSE(dense_padded.uniform());
}

// Only dense equal-length problems without mask, sinks or softcap run on the clustered
// kernels (and split their last round), so each of them is a plain problem; only dense
// ones without softcap and with no mask or a causal one run the plain loop.
TEST(DispatchTable, UniformAndPlainProblems) {
  ForwardArgs args;
  args.shape = {1, 1000, 1000, 4, 4, 128};
  EXPECT_TRUE(uniform_tiles(args));
  EXPECT_TRUE(plain_problem(args));
  args.causal = true;
  EXPECT_FALSE(uniform_tiles(args));
  EXPECT_TRUE(plain_problem(args));
  args.window_left = 100;
  EXPECT_FALSE(plain_problem(args));
  args = ForwardArgs{};
  args.shape = {1, 1000, 1000, 4, 4, 128};
  float sink = 0.f;
  args.learnable_sink = &sink;
  EXPECT_FALSE(uniform_tiles(args));
  EXPECT_TRUE(plain_problem(args));
  args.learnable_sink = nullptr;
  args.softcap = 30.f;
  EXPECT_FALSE(uniform_tiles(args));
  EXPECT_FALSE(plain_problem(args));
  args.softcap = 0.f;
  int cu[2] = {0, 1000};
  args.cu_seqlens_k = cu;
  EXPECT_FALSE(uniform_tiles(args));
  EXPECT_FALSE(plain_problem(args));
  args.cu_seqlens_k = nullptr;
  args.window_right = 2000;  // past every key: no bound at all
  EXPECT_TRUE(uniform_tiles(args));
  EXPECT_TRUE(plain_problem(args));
}

// GQA packs the query heads of a K/V head as one tile's rows where that fills tiles
// better (decode, speculative decoding, short prefill chunks), with dense queries and
// nothing per query head; with one position the view addresses the same elements (row r
// of K/V head g is query head g * pack + r), with several it describes the positions.
TEST(PackedGqa, OnlyForDecodeAndTheViewAddressesTheSameElements) {
  ForwardArgs args;
  args.shape = {3, 1, 500, 32, 8, 128};
  args.q = contiguous_view(nullptr, 1, 32, 128);
  args.o = TensorView4d{nullptr, 7 * 32 * 128, 32 * 128, 130};  // O with padded heads
  EXPECT_EQ(pack_gqa_factor(args), 4);
  ForwardArgs view = packed_gqa_view(args, 4);
  EXPECT_EQ(view.shape.seqlen_q, 4);
  EXPECT_EQ(view.shape.heads_q, 8);
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t g = 0; g < 8; ++g) {
      for (int64_t r = 0; r < 4; ++r) {
        int64_t head = g * 4 + r;
        EXPECT_EQ(b * view.q.batch_stride + r * view.q.seqlen_stride + g * view.q.head_stride,
                  b * args.q.batch_stride + head * args.q.head_stride);
        EXPECT_EQ(b * view.o.batch_stride + r * view.o.seqlen_stride + g * view.o.head_stride,
                  b * args.o.batch_stride + head * args.o.head_stride);
        // The LSE: (batch, heads_q, 1) and (batch, heads_kv, pack) alike.
        EXPECT_EQ((b * view.shape.heads_q + g) * view.shape.seqlen_q + r, b * args.shape.heads_q + head);
      }
    }
  }
  ForwardArgs other = args;
  other.shape.seqlen_q = 1000;  // tiles of 128 rows already nearly full
  EXPECT_EQ(pack_gqa_factor(other), 1);
  other.shape.seqlen_q = 4;
  other.q = contiguous_view(nullptr, 4, 32, 128);
  EXPECT_EQ(pack_gqa_factor(other), 4);
  view = packed_gqa_view(other, 4);
  EXPECT_EQ(view.shape.seqlen_q, 16);
  EXPECT_EQ(view.q.seqlen_stride, other.q.seqlen_stride);
  EXPECT_EQ(view.q.head_stride, 4 * other.q.head_stride);
  other = args;
  other.shape.heads_kv = 32;
  EXPECT_EQ(pack_gqa_factor(other), 1);
  float sink = 0.f;
  other = args;
  other.learnable_sink = &sink;
  EXPECT_EQ(pack_gqa_factor(other), 1);
  int cu[4] = {0, 1, 2, 3};
  other = args;
  other.cu_seqlens_q = cu;
  EXPECT_EQ(pack_gqa_factor(other), 1);
}

// Whatever the problem, forward_variant() picks a kernel the build compiled, with the
// loop the problem needs (the table is generated from kernels.manifest): a head-dim pair
// that is compiled serves every problem. Uniform problems are plain ones (above).
TEST(DispatchTable, EveryPickedVariantIsCompiled) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (HeadDims dims : compiled_head_dim_pairs(dtype)) {
      for (bool causal : {false, true}) {
        for (int kind = 0; kind < 3; ++kind) {  // uniform, plain but not uniform, neither
          bool uniform = kind == 0, plain = kind <= 1;
          if (uniform && causal) continue;
          for (int64_t seqlen_q : {1, 128, 200, 2048, 2049, 16384, 16385}) {
            for (int64_t seqlen_k : {1, 512, 1024, 1025, 2048, 2049, 8191, 8192, 16384}) {
              ForwardVariant variant = forward_variant(dims.qk, causal, seqlen_q, seqlen_k, uniform);
              EXPECT_NE(find_forward_launcher(dtype, dims.qk, dims.v, variant, plain), nullptr)
                  << dtype_name(dtype) << " d" << dims.qk << "/" << dims.v << " variant " << int(variant)
                  << " causal " << causal << " plain " << plain << " " << seqlen_q << "x" << seqlen_k;
              if (!uniform) EXPECT_NE(variant, ForwardVariant::kLongClustered);
            }
          }
        }
      }
    }
  }
}

// Paged caches run the kernels that load pages (ForwardTraits::kPagedKv): two consumer
// warpgroups, so the producer warpgroup has the registers, and blocks the four producer
// warps of the gather split into whole swizzle atoms (paged_kv.h, GatherRows).
// (Left-padded caches run there too: ForwardTraits::kLeftPadding.)
TEST(DispatchTable, PagedCachesRunTheKernelsThatLoadPages) {
  const int table[1] = {0};
  for (int64_t head_dim : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      for (int64_t seqlen_q : {1, 512, 16384}) {
        for (bool left_padded : {false, true}) {
          ForwardArgs args;
          args.shape = {2, seqlen_q, 16384, 8, 8, head_dim};
          args.causal = causal;
          (left_padded ? args.leftpad_k : args.page_table) = table;
          ForwardVariant variant = forward_variant_of(args);
          EXPECT_EQ(variant, head_dim == 64    ? ForwardVariant::kShortCausal
                             : head_dim == 128 ? ForwardVariant::kDefault
                                               : ForwardVariant::kShort);
          ForwardTileConfig tiles = forward_tile_config_of(args);
          EXPECT_EQ(tiles.consumer_warpgroups, 2) << "d" << head_dim;
          EXPECT_EQ(tiles.block_n % 32, 0) << "d" << head_dim;
          EXPECT_EQ(tiles.cluster_m, 1) << "d" << head_dim;
        }
      }
    }
  }
}

// d=128's long tiles (128 x 160) are chosen by the keys a row sees, not seqlen_k: a
// sliding window or a chunk spanning fewer than kLongMinKeySpan keys runs the default tiles.
TEST(DispatchTable, ShortWindowsOfLongSequencesTakeTheDefaultTiles) {
  static_assert(kLongMinKeySpan == 4096, "the cases below straddle it");
  struct Case {
    int64_t window_left, window_right, chunk;
    bool causal;
    ForwardVariant expected;
  };
  const Case cases[] = {
      {-1, -1, 0, true, ForwardVariant::kLong},         // causal over 16k keys
      {4096, -1, 0, true, ForwardVariant::kLong},       // Mistral's window: 4097 keys
      {2048, -1, 0, true, ForwardVariant::kDefault},    // 2049 keys
      {4094, 0, 0, false, ForwardVariant::kDefault},    // 4095 keys
      {4095, 0, 0, false, ForwardVariant::kLong},       // 4096 keys
      {128, -1, 0, false, ForwardVariant::kLong},       // no right bound: up to 16k keys
      {1000, 1000, 0, false, ForwardVariant::kDefault},
      {-1, -1, 2048, true, ForwardVariant::kDefault},   // chunked attention (Llama 4)
  };
  for (const Case& c : cases) {
    ForwardArgs args;
    args.shape = {1, 16384, 16384, 16, 16, 128};
    args.causal = c.causal;
    args.window_left = c.window_left;
    args.window_right = c.window_right;
    args.attention_chunk = c.chunk;
    EXPECT_EQ(forward_variant_of(args), c.expected)
        << "window (" << c.window_left << ", " << c.window_right << ") chunk " << c.chunk << " causal " << c.causal;
  }
}

// FP8 runs the general loop for every problem: one kernel per head dim, and d=128's long
// tiles from 2k keys (not with K or V scales per 128 rows, which a 192-key block crosses).
TEST(DispatchTable, Fp8KernelsServeEveryProblem) {
  static_assert(kFp8LongMinSeqlenK == 2048, "the lengths below straddle it");
  for (int head_dim : compiled_head_dims(DType::kFloat8E4M3)) {
    for (int64_t seqlen_k : {1, 2047, 2048, 4096, 16384}) {
      for (bool block_scales : {false, true}) {
        ForwardArgs args;
        args.dtype = DType::kFloat8E4M3;
        args.shape = {2, 1024, seqlen_k, 8, 8, head_dim};
        const float scales[1] = {1.f};
        if (block_scales) args.k_block_scale = scales;
        ForwardVariant variant = forward_variant_of(args);
        bool is_long = head_dim == 128 && seqlen_k >= 2048 && !block_scales;
        EXPECT_EQ(variant, is_long ? ForwardVariant::kLong : ForwardVariant::kDefault) << "e4m3 d" << head_dim;
        EXPECT_EQ(forward_tile_config_of(args).block_n, is_long ? 192 : head_dim == 256 ? 64 : 128);
        args.kv_block_rows = 0;  // one scale per (batch, head): any block
        EXPECT_EQ(forward_variant_of(args), head_dim == 128 && seqlen_k >= 2048 ? ForwardVariant::kLong
                                                                                  : ForwardVariant::kDefault);
        for (bool plain : {false, true}) {
          EXPECT_NE(find_forward_launcher(DType::kFloat8E4M3, head_dim, head_dim, variant, plain), nullptr)
              << "e4m3 d" << head_dim << " variant " << int(variant);
        }
      }
    }
  }
}

TEST(TileConfig, VariantsByHeadDimAndLength) {
  EXPECT_EQ(forward_variant(64, true, 2048, 2048), ForwardVariant::kShortCausal);
  EXPECT_EQ(forward_variant(64, true, 1, 1), ForwardVariant::kShortCausal);
  EXPECT_EQ(forward_variant(64, true, 2049, 2049), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(64, false, 512, 512), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(64, false, 4, 8192), ForwardVariant::kShortCausal);  // decode's 4 packed rows
  EXPECT_EQ(forward_variant(64, false, 128, 128), ForwardVariant::kShortCausal);
  EXPECT_EQ(forward_variant(64, false, 129, 8192), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(64, false, 512, 16384), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(128, true, 512, 512), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(128, false, 512, 4095), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(128, false, 512, 4096), ForwardVariant::kLongClustered);
  EXPECT_EQ(forward_variant(128, false, 384, 4096), ForwardVariant::kDefault);  // 3 m-blocks: no pair
  EXPECT_EQ(forward_variant(128, true, 4096, 4096), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(128, true, 8192, 8192), ForwardVariant::kLong);
  EXPECT_EQ(forward_variant(128, false, 100, 8192), ForwardVariant::kLong);  // one m-block: no pair
  EXPECT_EQ(forward_variant(128, false, 200, 8192), ForwardVariant::kLongClustered);
  EXPECT_EQ(forward_variant(128, false, 16384, 16384), ForwardVariant::kLongClustered);
  EXPECT_EQ(forward_variant(128, false, 16383 - 127, 16384), ForwardVariant::kLong);  // 127 m-blocks
  EXPECT_EQ(forward_variant(128, true, 16384, 16384), ForwardVariant::kLong);
  EXPECT_EQ(forward_variant(256, false, 16384, 16384), ForwardVariant::kDefault);  // no clustered d=256
  EXPECT_EQ(forward_variant(256, false, 16384, 8191), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(256, false, 16385, 16384), ForwardVariant::kDefault);  // 129 m-blocks
  EXPECT_EQ(forward_variant(256, true, 16384, 16384), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(64, false, 16384, 16384), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(256, false, 16384, 2049), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(256, true, 512, 2048), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, false, 1, 1), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, false, 2048, 512), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, false, 512, 1024), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, false, 512, 1025), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(256, true, 2048, 2049), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, true, 8192, 8192), ForwardVariant::kShort);
  EXPECT_EQ(forward_variant(256, true, 8192, 8193), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(96, false, 16384, 16384), ForwardVariant::kDefault);   // no clustered d=96
  EXPECT_EQ(forward_variant(192, false, 16384, 16384), ForwardVariant::kDefault);  // nor d=192
  EXPECT_EQ(forward_variant(192, true, 512, 512), ForwardVariant::kDefault);
  EXPECT_EQ(forward_tile_config(64, 64, ForwardVariant::kShortCausal).block_m, 128);
  EXPECT_EQ(forward_tile_config(128, 128, ForwardVariant::kLong).block_m, 128);
  EXPECT_EQ(forward_tile_config(128, 128, ForwardVariant::kLongClustered).block_m, kClusteredBlockM);
  EXPECT_EQ(forward_tile_config(128, 128, ForwardVariant::kDefault, /*fp8=*/true).block_n, 128);
  EXPECT_EQ(forward_tile_config(256, 256, ForwardVariant::kDefault, /*fp8=*/true).block_n, 64);
  EXPECT_EQ(forward_tile_config(128, 128, ForwardVariant::kLongClustered).cluster_m, 2);
  EXPECT_EQ(forward_tile_config(192, 192).block_n, 112);
  EXPECT_EQ(forward_tile_config(192, 128).block_n, 128);
}

}  // namespace
}  // namespace warpflash::kernels
