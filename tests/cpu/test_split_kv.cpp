// Splits of tiles along the keys, checked on the CPU: the split last round (split_tail.h)
// and split-KV (split_kv.h) compute every (tile, K/V block) exactly once, in the balance
// the kernels rely on, and are chosen only where they pay.
#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/split_kv.h"
#include "kernels/attention/split_tail.h"
#include "kernels/attention/tile_scheduler.h"
#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"

namespace warpflash::kernels {
namespace {

// The split last round (split_tail.h), walked as the kernel walks it: every (tile, K/V
// block) is computed exactly once, cluster partners take the same blocks of neighbouring
// tiles, no run has more than two pieces, and every CTA does the same work to one block.
TEST(SplitTail, CoversEveryBlockOnceAndBalances) {
  for (int cluster_m : {1, 2}) {
    for (int m_blocks : {2, 10, 128}) {
      for (int heads : {1, 4, 8}) {
        for (int n_blocks : {20, 52, 103, 205}) {
          for (int workers : {66, 5}) {
            ForwardTileScheduler scheduler{m_blocks, heads, 1, false};
            int ctas = workers * cluster_m;
            scheduler.plan(ctas, 128);
            scheduler.split = SplitTail::plan(scheduler.num_tiles() / cluster_m, workers, n_blocks, cluster_m);
            if (!scheduler.split.active()) continue;
            std::vector<int> visits(size_t(scheduler.num_tiles()) * n_blocks, 0);
            std::vector<int> work(ctas, 0);
            for (int cta = 0; cta < ctas; ++cta) {
              int tail_pieces = 0;
              for (int round = 0;; ++round) {
                unsigned index = scheduler.tile_index<true>(cta, ctas, round);
                if (index >= scheduler.num_tiles()) break;
                int begin = 0, end = n_blocks;
                if (scheduler.split.in_tail(round)) {
                  scheduler.split.clip(cta, round, begin, end);
                  ++tail_pieces;
                  EXPECT_EQ(scheduler.split.slot(cta, round), 2 * cta + tail_pieces - 1);
                  if (cluster_m == 2) {  // the partner: the next m-block, the same blocks
                    int partner = cta ^ 1, partner_begin = 0, partner_end = n_blocks;
                    scheduler.split.clip(partner, round, partner_begin, partner_end);
                    EXPECT_EQ(scheduler.tile_index<true>(partner, ctas, round), index ^ 1u);
                    EXPECT_EQ(partner_begin, begin);
                    EXPECT_EQ(partner_end, end);
                  }
                }
                ASSERT_LT(begin, end);
                for (int n = begin; n < end; ++n) ++visits[size_t(index) * n_blocks + n];
                work[cta] += end - begin;
              }
              EXPECT_LE(tail_pieces, 2);
            }
            EXPECT_EQ(std::count(visits.begin(), visits.end(), 1), std::ptrdiff_t(visits.size()))
                << cluster_m << " " << m_blocks << " " << heads << " " << n_blocks << " " << workers;
            auto [least, most] = std::minmax_element(work.begin(), work.end());
            EXPECT_LE(*most - *least, 1);
          }
        }
      }
    }
  }
}

// Split-KV (split_kv.h): the pieces of a tile take neighbouring indices and cover its
// blocks exactly once, in runs that differ by at most one block.
TEST(SplitKv, PiecesCoverEveryBlockOnceInEqualRuns) {
  for (int splits : {1, 2, 3, 7, 128}) {
    SplitKv split(splits);
    for (int begin : {0, 5}) {
      for (int blocks : {0, 1, 6, 7, 64, 1000, 1 << 24}) {
        int covered = begin, shortest = 1 << 30, longest = 0;
        for (int piece = 0; piece < splits; ++piece) {
          int piece_begin = begin, piece_end = begin + blocks;
          split.clip(piece, piece_begin, piece_end);
          ASSERT_EQ(piece_begin, covered) << splits << " " << blocks << " piece " << piece;
          ASSERT_GE(piece_end, piece_begin);
          covered = piece_end;
          shortest = std::min(shortest, piece_end - piece_begin);
          longest = std::max(longest, piece_end - piece_begin);
        }
        EXPECT_EQ(covered, begin + blocks) << splits << " " << blocks;
        EXPECT_LE(longest - shortest, 1) << splits << " " << blocks;
      }
    }
    for (unsigned index : {0u, 1u, 5u, 1000u, 2147483000u}) {
      int piece;
      unsigned tile = split.tile_of(index, piece);
      EXPECT_EQ(tile * unsigned(splits) + unsigned(piece), index);
      EXPECT_LT(piece, splits);
    }
    EXPECT_EQ(split.num_indices(10), 10u * unsigned(splits));
  }
}

// Split-KV's runs (split_kv.h): each worker's pieces (indices w and workers + w) cover
// consecutive blocks of at most two tiles; together they cover every block of every tile
// once, in runs that differ by at most one block per piece where the tiles are equally
// long; the merge finds exactly the pieces of a tile.
TEST(SplitKv, RunsCoverEveryBlockOnceAndBalance) {
  for (auto [tiles, workers] : {std::pair{8, 132}, {64, 132}, {1, 132}, {66, 132}, {7, 16}, {3, 7}}) {
    SplitKv split = SplitKv::runs(tiles, workers);
    ASSERT_TRUE(split.active());
    EXPECT_EQ(split.num_indices(unsigned(tiles)), 2u * unsigned(workers));
    for (int blocks : {2 * workers / tiles, 7, 1024, 1 << 20}) {
      if (int64_t(workers) * blocks >= (int64_t(1) << 31)) continue;
      std::vector<int> next_block(tiles, 0);  // pieces arrive in worker order per tile
      int shortest = 1 << 30, longest = 0;
      for (int worker = 0; worker < workers; ++worker) {
        int run = 0;
        for (int round = 0; round < 2; ++round) {
          int piece;
          unsigned index = unsigned(round * workers + worker);
          unsigned tile = split.tile_of(index, piece);
          ASSERT_LT(tile, unsigned(tiles));
          int begin = 0, end = blocks;
          split.clip(piece, begin, end);
          ASSERT_LE(begin, end);
          if (begin == end) continue;
          ASSERT_EQ(begin, next_block[tile]) << tiles << " " << workers << " worker " << worker;
          next_block[tile] = end;
          run += end - begin;
          EXPECT_EQ(split.piece_index(worker, int(tile)), index);
          EXPECT_GE(worker, split.first_worker(int(tile)));
          EXPECT_LT(worker, split.end_worker(int(tile)));
        }
        shortest = std::min(shortest, run);
        longest = std::max(longest, run);
      }
      for (int tile = 0; tile < tiles; ++tile) EXPECT_EQ(next_block[tile], blocks) << tiles << " " << workers;
      EXPECT_LE(longest - shortest, 2) << tiles << " " << workers << " " << blocks;
      EXPECT_GE(shortest, int(int64_t(blocks) * tiles / workers) - 1);
    }
    // The merge's workers of a tile: consecutive, each with a piece of it.
    for (int tile = 0; tile < tiles; ++tile) {
      for (int worker = split.first_worker(tile); worker < split.end_worker(tile); ++worker) {
        int piece;
        EXPECT_EQ(split.tile_of(split.piece_index(worker, tile), piece), unsigned(tile));
        int begin = 0, end = 1 << 20;
        split.clip(piece, begin, end);
        EXPECT_LT(begin, end) << tiles << " " << workers << " tile " << tile << " worker " << worker;
      }
    }
  }
}

TEST(SplitKv, ChosenOnlyWhereTilesLeaveSmsIdle) {
  auto splits = [](int64_t tiles, int64_t n_blocks) { return choose_split(tiles, n_blocks, 132).splits; };
  auto workers = [](int64_t tiles, int64_t n_blocks) { return choose_split(tiles, n_blocks, 132).workers; };
  // Decode on 132 SMs: batch 32 x 8 K/V heads fill two rounds, batch 12 x 8 read at the
  // DRAM's rate: unsplit. Batch 8 x 8 heads in two pieces a tile (128 CTAs), batch 1 x 8
  // heads in 16ths, not two rounds (33) nor 15.
  EXPECT_EQ(splits(256, 52), 1);
  EXPECT_EQ(workers(256, 52), 0);
  EXPECT_EQ(splits(96, 64), 1);
  EXPECT_EQ(workers(96, 64), 0);
  EXPECT_EQ(splits(64, 205), 2);
  EXPECT_EQ(splits(8, 52), 16);
  EXPECT_EQ(splits(8, 820), 16);
  EXPECT_EQ(workers(8, 820), 0);
  EXPECT_EQ(splits(1, 820), kMaxSplits);
  // Batch 9 x 8 heads (72 tiles): one piece a tile leaves 60 SMs idle and two are more
  // than one round: runs over all 132 SMs.
  EXPECT_EQ(workers(72, 64), 132);
  EXPECT_EQ(splits(72, 64), 1);
  EXPECT_EQ(choose_split(72, 64, 132, /*runs=*/false).workers, 0);  // d = 192 / 192
  EXPECT_FALSE(split_runs_compiled(192, 192));
  EXPECT_TRUE(split_runs_compiled(192, 128));
  EXPECT_EQ(splits(50, 64), 2);  // 100 CTAs
  EXPECT_EQ(workers(50, 64), 0);
  // Pieces and runs stay at least kMinSplitBlocks blocks long.
  EXPECT_EQ(splits(8, 3), 1);
  EXPECT_EQ(workers(8, 3), 0);
  EXPECT_LE(splits(8, 9), 9 / kMinSplitBlocks);
  EXPECT_EQ(workers(72, 3), 0);
  EXPECT_EQ(workers(72, 4), 132);
  // workers x blocks within FastDivmod's 31 bits.
  EXPECT_EQ(workers(72, int64_t(1) << 24), 0);
}

TEST(SplitTail, OnlyWhereItPays) {
  // 1024 tiles of 205 blocks on 132 SMs (d=256, 16k): 100 tiles in the tail, split.
  SplitTail split = SplitTail::plan(1024, 132, 205, 1);
  EXPECT_TRUE(split.active());
  EXPECT_EQ(split.full_rounds, 7);
  EXPECT_EQ(split.units, 100);
  EXPECT_EQ(split.share, 100 * 205 / 132);
  EXPECT_FALSE(SplitTail::plan(1056, 132, 205, 1).active());  // even rounds
  EXPECT_FALSE(SplitTail::plan(1024, 132, 7, 1).active());    // pieces too short
  EXPECT_FALSE(SplitTail::plan(131, 132, 205, 1).active());   // almost a full round: saves too little
  EXPECT_TRUE(SplitTail::plan(16, 66, 103, 2).active());      // fewer units than workers
}

}  // namespace
}  // namespace warpflash::kernels
