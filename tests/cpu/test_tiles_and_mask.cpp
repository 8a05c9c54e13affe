// Index arithmetic of the forward kernel, checked on the CPU: which tiles exist, which
// keys each row sees, which K/V blocks a tile visits and which of them need masking.
#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/forward/config.h"
#include "kernels/forward/mask.h"
#include "kernels/forward/tile_scheduler.h"
#include "reference/attention_reference.h"

namespace warpflash::kernels {
namespace {

// Runs the kernel's persistent loop on the CPU: the tiles each CTA of `ctas` computes.
std::vector<std::vector<TileCoord>> tiles_per_cta(ForwardTileScheduler const& scheduler, int ctas) {
  std::vector<std::vector<TileCoord>> tiles(ctas);
  for (int cta = 0; cta < ctas; ++cta) {
    for (int64_t round = 0;; ++round) {
      int64_t index = scheduler.tile_index(cta, ctas, round);
      if (index >= scheduler.num_tiles()) break;
      tiles[cta].push_back(scheduler.tile(index));
    }
  }
  return tiles;
}

TEST(TileScheduler, CoversEveryTileExactlyOnce) {
  for (int order = 0; order < 3; ++order) {  // non-causal, causal m_block slowest, causal m_block fastest
    for (int ctas : {1, 5, 47, 48, 132, 500}) {
      bool causal = order > 0;
      ForwardTileScheduler scheduler{ForwardTileScheduler::m_blocks_for(1000, 128), 3, 2, causal, order == 2};
      EXPECT_EQ(scheduler.num_m_blocks, 8);
      std::set<std::tuple<int, int, int>> seen;
      size_t count = 0;
      for (auto const& tiles : tiles_per_cta(scheduler, ctas)) {
        for (TileCoord t : tiles) {
          EXPECT_TRUE(t.m_block >= 0 && t.m_block < 8 && t.head >= 0 && t.head < 3 && t.batch >= 0 && t.batch < 2);
          seen.insert({t.m_block, t.head, t.batch});
          ++count;
        }
      }
      EXPECT_EQ(seen.size(), 8u * 3 * 2) << "order " << order << ", ctas " << ctas;
      EXPECT_EQ(count, seen.size()) << "order " << order << ", ctas " << ctas;
    }
  }
}

TEST(TileScheduler, CausalDealsLongestFirstLikeASnake) {
  ForwardTileScheduler scheduler{4, 2, 1, true};
  EXPECT_EQ(scheduler.tile(0).m_block, 3);
  EXPECT_EQ(scheduler.tile(1).m_block, 3);
  EXPECT_EQ(scheduler.tile(1).head, 1);
  EXPECT_EQ(scheduler.tile(7).m_block, 0);
  // Three CTAs: round 0 takes indices 0 1 2, round 1 takes 5 4 3.
  EXPECT_EQ(scheduler.tile_index(0, 3, 1), 5);
  EXPECT_EQ(scheduler.tile_index(2, 3, 1), 3);
  EXPECT_EQ(scheduler.tile_index(1, 3, 2), 7);
}

TEST(TileScheduler, ShortCausalProblemsKeepHeadsTogether) {
  ForwardTileScheduler scheduler{4, 512, 1, true};  // seqlen 512, 128-row tiles
  scheduler.choose_causal_order(132, 128);
  ASSERT_TRUE(scheduler.causal_m_fastest);
  EXPECT_EQ(scheduler.tile(0).m_block, 3);
  EXPECT_EQ(scheduler.tile(3).m_block, 0);
  EXPECT_EQ(scheduler.tile(4).head, 1);
  ForwardTileScheduler long_problem{128, 16, 1, true};  // seqlen 16k
  long_problem.choose_causal_order(132, 128);
  EXPECT_FALSE(long_problem.causal_m_fastest);
  ForwardTileScheduler few_tiles{3, 100, 1, true};  // under 4 rounds: the snake's pairs do not balance
  few_tiles.choose_causal_order(132, 128);
  EXPECT_FALSE(few_tiles.causal_m_fastest);
  ForwardTileScheduler gpu_test_shape{4, 8, 17, true};  // tests/gpu: batch 17, seqlen 512, 8 heads
  gpu_test_shape.choose_causal_order(132, 128);
  EXPECT_TRUE(gpu_test_shape.causal_m_fastest);
  ForwardTileScheduler rows_192{3, 1024, 1, true};  // d=64's 192-row tiles keep m_block slowest
  rows_192.choose_causal_order(132, 192);
  EXPECT_FALSE(rows_192.causal_m_fastest);
}

// A causal tile costs its K/V blocks plus a fixed part (Q load, epilogue); the busiest
// CTA bounds the kernel's time. Paper-grid shapes (128 and 192 query rows a tile) and
// Llama-3-8B prefill on an H200's 132 SMs, in the order the launch chooses.
TEST(TileScheduler, CausalWorkIsBalanced) {
  struct Problem { int m_blocks, heads_batch; };
  for (Problem p : {Problem{128, 16}, Problem{64, 32}, Problem{32, 64}, Problem{16, 128}, Problem{8, 256},
                    Problem{4, 512}, Problem{128, 8}, Problem{4, 1024}, Problem{3, 1024}, Problem{6, 512},
                    Problem{11, 256}, Problem{22, 128}, Problem{86, 32}, Problem{32, 128}, Problem{64, 128}}) {
    ForwardTileScheduler scheduler{p.m_blocks, p.heads_batch, 1, true};
    scheduler.choose_causal_order(132, 128);
    double total = 0, busiest = 0;
    for (auto const& tiles : tiles_per_cta(scheduler, 132)) {
      double work = 0;
      for (TileCoord t : tiles) work += t.m_block + 1 + 0.5;
      total += work;
      busiest = std::max(busiest, work);
    }
    EXPECT_LE(busiest, 1.05 * total / 132) << p.m_blocks << " m-blocks x " << p.heads_batch;
  }
}

TEST(TileScheduler, MBlockCount) {
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(1, 128), 1);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(128, 128), 1);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(129, 128), 2);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(4097, 128), 33);
}

TEST(Mask, VisibleMatchesTheReference) {
  for (bool causal : {false, true}) {
    for (auto [sq, sk] : {std::pair{5, 5}, {3, 7}, {7, 3}, {1, 9}, {9, 1}}) {
      AttentionMask mask{sq, sk, causal};
      reference::Problem p;
      p.seqlen_q = sq;
      p.seqlen_k = sk;
      p.causal = causal;
      for (int i = 0; i < sq; ++i)
        for (int j = 0; j < sk + 3; ++j)
          EXPECT_EQ(mask.visible(i, j), j < sk && reference::is_visible(p, i, j)) << i << "," << j;
    }
  }
}

// Brute force over small shapes: the block range holds every visible key, and a block
// reported mask-free has no masked element.
TEST(Mask, BlockRangeAndMaskFreeBlocksAreExact) {
  const int bm = 4, bn = 3;
  for (bool causal : {false, true}) {
    for (int sq = 1; sq <= 13; ++sq) {
      for (int sk = 0; sk <= 13; ++sk) {
        AttentionMask mask{sq, sk, causal};
        for (int m = 0; m * bm < sq; ++m) {
          int end = mask.n_block_end(m, bm, bn);
          int last_needed = -1;
          for (int row = m * bm; row < (m + 1) * bm; ++row)
            for (int col = 0; col < sk; ++col)
              if (mask.visible(row, col)) last_needed = std::max(last_needed, col / bn);
          EXPECT_EQ(end, last_needed + 1) << "sq=" << sq << " sk=" << sk << " m=" << m << " causal=" << causal;
          for (int n = 0; n < end; ++n) {
            if (mask.block_needs_mask(m, n, bm, bn)) continue;
            for (int row = m * bm; row < (m + 1) * bm; ++row)
              for (int col = n * bn; col < (n + 1) * bn; ++col)
                EXPECT_TRUE(mask.visible(row, col)) << "block " << m << "," << n << " claimed mask-free";
          }
        }
      }
    }
  }
}

TEST(TileConfig, FitsTheHardware) {
  for (int d : {64, 128, 256}) {
    for (ForwardVariant variant : {ForwardVariant::kDefault, ForwardVariant::kShortCausal}) {
      if (variant == ForwardVariant::kShortCausal && d != 64) continue;  // compiled for d=64 only
      ForwardTileConfig c = forward_tile_config(d, variant);
      EXPECT_EQ(c.block_m, 64 * c.consumer_warpgroups);
      EXPECT_EQ(c.block_n % 16, 0);
      // Q tile + stages of K and V, 2-byte elements, under 227 KB.
      EXPECT_LE((c.block_m + 2 * c.stages * c.block_n) * d * 2, 227 * 1024);
    }
  }
}

TEST(TileConfig, ShortCausalVariantOnlyForD64CausalUpTo2k) {
  EXPECT_EQ(forward_variant(64, true, 2048), ForwardVariant::kShortCausal);
  EXPECT_EQ(forward_variant(64, true, 1), ForwardVariant::kShortCausal);
  EXPECT_EQ(forward_variant(64, true, 2049), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(64, false, 512), ForwardVariant::kDefault);
  EXPECT_EQ(forward_variant(128, true, 512), ForwardVariant::kDefault);
  EXPECT_EQ(forward_tile_config(64, ForwardVariant::kShortCausal).block_m, 128);
}

}  // namespace
}  // namespace warpflash::kernels
