// Index arithmetic of the forward kernel, checked on the CPU: which tiles exist, which
// keys each row sees, which K/V blocks a tile visits and which of them need masking.
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "kernels/forward/config.h"
#include "kernels/forward/mask.h"
#include "kernels/forward/tile_scheduler.h"
#include "reference/attention_reference.h"

namespace warpflash::kernels {
namespace {

TEST(TileScheduler, CoversEveryTileExactlyOnce) {
  for (bool longest_first : {false, true}) {
    ForwardTileScheduler scheduler{ForwardTileScheduler::m_blocks_for(1000, 128), 3, 2, longest_first};
    EXPECT_EQ(scheduler.num_m_blocks, 8);
    std::set<std::tuple<int, int, int>> seen;
    for (int64_t i = 0; i < scheduler.num_tiles(); ++i) {
      TileCoord t = scheduler.tile(i);
      EXPECT_TRUE(t.m_block >= 0 && t.m_block < 8 && t.head >= 0 && t.head < 3 && t.batch >= 0 && t.batch < 2);
      seen.insert({t.m_block, t.head, t.batch});
    }
    EXPECT_EQ(seen.size(), 8u * 3 * 2);
  }
}

TEST(TileScheduler, CausalStartsWithTheLongestTiles) {
  ForwardTileScheduler scheduler{4, 2, 1, true};
  EXPECT_EQ(scheduler.tile(0).m_block, 3);
  EXPECT_EQ(scheduler.tile(3).m_block, 0);
  EXPECT_EQ(scheduler.tile(4).head, 1);
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
    ForwardTileConfig c = forward_tile_config(d);
    EXPECT_EQ(c.block_m, 64 * c.consumer_warpgroups);
    EXPECT_EQ(c.block_n % 16, 0);
    // Q tile + stages of K and V, 2-byte elements, under 227 KB.
    EXPECT_LE((c.block_m + 2 * c.stages * c.block_n) * d * 2, 227 * 1024);
  }
}

}  // namespace
}  // namespace warpflash::kernels
