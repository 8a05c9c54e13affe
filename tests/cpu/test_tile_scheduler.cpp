// The tile scheduler, checked on the CPU: every tile computed exactly once, in the order
// and balance the kernels rely on (the splits of tiles along the keys: test_split_kv.cpp).
#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/split_tail.h"
#include "kernels/attention/split_kv.h"
#include "kernels/attention/tile_scheduler.h"
#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"

namespace warpflash::kernels {
namespace {

// Runs the kernel's persistent loop on the CPU: the tiles each CTA of `ctas` computes.
std::vector<std::vector<TileCoord>> tiles_per_cta(ForwardTileScheduler const& scheduler, int ctas) {
  std::vector<std::vector<TileCoord>> tiles(ctas);
  for (int cta = 0; cta < ctas; ++cta) {
    for (int round = 0;; ++round) {
      unsigned index = scheduler.tile_index(cta, ctas, round);
      if (index >= scheduler.num_tiles()) break;
      tiles[cta].push_back(scheduler.tile(index));
    }
  }
  return tiles;
}

TEST(TileScheduler, CoversEveryTileExactlyOnce) {
  for (int seqlen : {100, 300, 512, 1000, 1100}) {  // odd and even m-block counts
    for (int block_m : {128, 192}) {
      for (int causal = 0; causal < 2; ++causal) {
        for (int heads_batch : {21, 136, 600}) {
          for (int ctas : {1, 5, 47, 48, 132, 500}) {
            int m_blocks = ForwardTileScheduler::m_blocks_for(seqlen, block_m);
            ForwardTileScheduler scheduler{m_blocks, 3, heads_batch / 3, causal == 1};
            scheduler.plan(ctas, block_m);
            std::set<std::tuple<int, int, int>> seen;
            size_t count = 0;
            for (auto const& tiles : tiles_per_cta(scheduler, ctas)) {
              for (TileCoord t : tiles) {
                EXPECT_TRUE(t.m_block >= 0 && t.m_block < m_blocks && t.head >= 0 && t.head < 3 && t.batch >= 0 &&
                            t.batch < heads_batch / 3);
                seen.insert({t.m_block, t.head, t.batch});
                ++count;
              }
            }
            EXPECT_EQ(seen.size(), size_t(scheduler.num_tiles())) << seqlen << " " << block_m << " " << ctas;
            EXPECT_EQ(count, seen.size()) << seqlen << " " << block_m << " " << causal << " " << ctas;
          }
        }
      }
    }
  }
}

TEST(TileScheduler, FastDivmodMatchesDivision) {
  for (unsigned d : {1u, 2u, 3u, 7u, 11u, 128u, 132u, 1000u, 65537u, 2147483647u}) {
    FastDivmod by_d(d);
    for (unsigned n : {0u, 1u, d - 1, d, d + 1, 12345u, 2147483646u, 2147483647u}) {
      unsigned remainder = 0;
      EXPECT_EQ(by_d.divmod(n, remainder), n / d) << n << " / " << d;
      EXPECT_EQ(remainder, n % d) << n << " % " << d;
    }
  }
}

TEST(TileScheduler, CausalPairsThenALongestFirstTail) {
  // 6 heads of 4 m-blocks on 2 CTAs: the tail keeps ceil(4 * 2 / 4) = 2 heads, 4 are paired.
  ForwardTileScheduler scheduler{4, 6, 1, true};
  scheduler.plan(2, 192);
  EXPECT_EQ(scheduler.paired_heads, 4);
  // Unit 0 is head 0's m-blocks 3 and 0; unit 1 its m-blocks 2 and 1.
  EXPECT_EQ(scheduler.tile(0).m_block, 3);
  EXPECT_EQ(scheduler.tile(1).m_block, 0);
  EXPECT_EQ(scheduler.tile(2).m_block, 2);
  EXPECT_EQ(scheduler.tile(3).m_block, 1);
  EXPECT_EQ(scheduler.tile(3).head, 0);
  EXPECT_EQ(scheduler.tile(4).head, 1);
  // A CTA does both tiles of a unit: CTA 1 takes unit 1 (tiles 2, 3), then unit 3.
  EXPECT_EQ(scheduler.tile_index(1, 2, 0), 2u);
  EXPECT_EQ(scheduler.tile_index(1, 2, 1), 3u);
  EXPECT_EQ(scheduler.tile_index(1, 2, 2), 6u);
  // The tail (heads 4 and 5) starts after 8 units, longest first, as a snake.
  EXPECT_EQ(scheduler.tile(16).m_block, 3);
  EXPECT_EQ(scheduler.tile(16).head, 4);
  EXPECT_EQ(scheduler.tile(17).head, 5);
  EXPECT_EQ(scheduler.tile(23).m_block, 0);
  EXPECT_EQ(scheduler.tile_index(0, 2, 8), 16u);
  EXPECT_EQ(scheduler.tile_index(0, 2, 9), 19u);
  // With 3 CTAs (same plan: 8 units), CTAs 0 and 1 get 3 units, CTA 2 gets 2 and alone
  // takes tail round 0; tail round 1 is reversed: CTA 1, then 0, then 2.
  scheduler.units_per_cta = 2;
  scheduler.extra_units = 2;
  EXPECT_EQ(scheduler.tile_index(2, 3, 4), 16u);
  EXPECT_EQ(scheduler.tile_index(1, 3, 6), 17u);
  EXPECT_EQ(scheduler.tile_index(0, 3, 6), 18u);
  EXPECT_EQ(scheduler.tile_index(2, 3, 5), 19u);
  // An odd m-block count: the middle m-blocks of two heads make a unit.
  ForwardTileScheduler odd{3, 40, 1, true};
  odd.plan(2, 192);
  EXPECT_EQ(odd.tile(0).m_block, 2);
  EXPECT_EQ(odd.tile(1).m_block, 0);
  EXPECT_EQ(odd.tile(4).m_block, 1);
  EXPECT_EQ(odd.tile(4).head, 0);
  EXPECT_EQ(odd.tile(5).m_block, 1);
  EXPECT_EQ(odd.tile(5).head, 1);
}

// Causal in dynamic order: every tile once, in sections of heads, longest first within a
// section, so the CTAs at work read the K/V of one section's heads.
TEST(TileScheduler, CausalSectionsCoverEveryTileOnceLongestFirst) {
  for (auto [m_blocks, heads, batch, per_section] :
       {std::tuple{16, 10, 8, 21}, std::tuple{64, 10, 2, 4}, std::tuple{5, 3, 1, 7}, std::tuple{32, 32, 4, 16}}) {
    ForwardTileScheduler scheduler{m_blocks, heads, batch, true};
    scheduler.plan(132, 128);
    scheduler.plan_sections(per_section, 132);
    const int sections = scheduler.full_sections + 1;
    std::set<std::tuple<int, int, int>> seen;
    int previous_m_block = m_blocks, previous_section = 0;
    for (unsigned index = 0; index < scheduler.num_tiles(); ++index) {
      TileCoord tile = scheduler.tile(index);
      int head_batch = tile.batch * heads + tile.head;
      int section = std::min(head_batch / per_section, scheduler.full_sections);
      ASSERT_TRUE(seen.insert({tile.m_block, tile.head, tile.batch}).second) << "index " << index;
      ASSERT_GE(section, previous_section) << "index " << index;
      if (section == previous_section) EXPECT_LE(tile.m_block, previous_m_block) << "index " << index;
      if (section > previous_section) EXPECT_EQ(tile.m_block, m_blocks - 1) << "index " << index;
      previous_m_block = tile.m_block;
      previous_section = section;
    }
    EXPECT_EQ(seen.size(), scheduler.num_tiles());
    EXPECT_EQ(previous_section, sections - 1);
    EXPECT_EQ(previous_m_block, 0);
  }
}

// A last section of the remaining few heads holds about a longest tile's work for every
// CTA (90%), taking in whole sections before it, up to twice a section's heads; otherwise
// the sections stay as given.
TEST(TileScheduler, CausalLastSectionBalancesTheCtas) {
  struct Case {
    int m_blocks, heads, batch, per_section, full_sections, last_heads;
  };
  for (Case c : {Case{16, 10, 8, 12, 5, 20},  // 8 heads left: 8 x 136 blocks < 0.9 x 132 x 16
                 Case{16, 10, 8, 10, 7, 10},  // a whole last section: unchanged
                 Case{64, 10, 2, 3, 5, 5},    // 2 heads left; 5 balance 64-block tiles
                 Case{64, 16, 2, 5, 5, 7},    // 2 heads left: one section taken in
                 Case{16, 10, 8, 21, 3, 17},  // 17 heads left suffice: unchanged
                 Case{10, 10, 16, 25, 6, 10}, // 10-block tiles: unchanged
                 Case{64, 10, 2, 1, 19, 1},   // 4 heads needed, more than 2 x 1: unchanged
                 Case{16, 10, 8, 100, 0, 80}}) {
    ForwardTileScheduler scheduler{c.m_blocks, c.heads, c.batch, true};
    scheduler.plan(132, 128);
    scheduler.plan_sections(c.per_section, 132);
    EXPECT_EQ(scheduler.full_sections, c.full_sections) << c.m_blocks << " " << c.per_section;
    EXPECT_EQ(int(scheduler.by_last_section_heads.divisor), c.last_heads) << c.m_blocks << " " << c.per_section;
    TileCoord last = scheduler.tile(scheduler.num_tiles() - 1);
    EXPECT_EQ(last.m_block, 0);
    EXPECT_EQ(last.batch * c.heads + last.head, c.heads * c.batch - 1);
  }
}

// The heads per section: those whose K/V fill 16 MB, the heads of a K/V head sharing it.
TEST(TileScheduler, HeadsPerL2Section) {
  ForwardArgs args;
  args.shape = {8, 2048, 2048, 10, 10, 192, 192};  // 1.5 MB of K/V a head
  EXPECT_EQ(heads_per_l2_section(args, 2), 10);
  args.shape = {4, 8192, 8192, 32, 8, 128, 128};  // Llama-3-8B: 4 MB a K/V head, 1 MB a query head
  EXPECT_EQ(heads_per_l2_section(args, 2), 16);
  args.shape = {1, 262144, 262144, 1, 1, 256, 256};  // more than a section: one head
  EXPECT_EQ(heads_per_l2_section(args, 2), 1);
}

TEST(TileScheduler, ShortCausalProblemsKeepHeadsTogether) {
  ForwardTileScheduler scheduler{4, 512, 1, true};  // seqlen 512, 128-row tiles
  scheduler.plan(132, 128);
  ASSERT_TRUE(scheduler.tail_heads_together);
  EXPECT_EQ(scheduler.paired_heads, 0);
  EXPECT_EQ(scheduler.tile(0).m_block, 3);
  EXPECT_EQ(scheduler.tile(3).m_block, 0);
  EXPECT_EQ(scheduler.tile(4).head, 1);
  ForwardTileScheduler long_problem{128, 16, 1, true};  // seqlen 16k
  long_problem.plan(132, 128);
  EXPECT_FALSE(long_problem.tail_heads_together);
  ForwardTileScheduler rows_192{3, 1024, 1, true};  // d=64's 192-row tiles
  rows_192.plan(132, 192);
  EXPECT_FALSE(rows_192.tail_heads_together);
  ForwardTileScheduler gpu_test_shape{4, 8, 17, true};  // tests/gpu: batch 17, seqlen 512, 8 heads
  gpu_test_shape.plan(132, 128);
  EXPECT_TRUE(gpu_test_shape.tail_heads_together);
}

// The CTAs of one round read few heads' K/V (it stays in L2): in every round of the pair
// phase, 132 CTAs touch at most 132 / (M / 2) + 2 heads.
TEST(TileScheduler, CausalRoundsShareHeads) {
  for (int m_blocks : {16, 32, 64}) {
    ForwardTileScheduler scheduler{m_blocks, 2048 / m_blocks * 4, 1, true};
    scheduler.plan(132, 128);
    ASSERT_GT(scheduler.paired_heads, 0);
    int paired_tiles = scheduler.paired_heads * m_blocks;
    for (int round = 0; (round + 1) * 132 * 2 <= paired_tiles; round += 2) {
      std::set<int> heads;
      for (int cta = 0; cta < 132; ++cta) heads.insert(scheduler.tile(scheduler.tile_index(cta, 132, round)).head);
      EXPECT_LE(heads.size(), size_t(132 / (m_blocks / 2) + 2)) << m_blocks << " m-blocks, round " << round;
    }
  }
}

// A causal tile costs its K/V blocks plus a fixed part (Q load, epilogue); the busiest
// CTA bounds the kernel's time. Paper-grid shapes (128 and 192 query rows a tile; a
// 192-row tile at 128-column blocks costs its rows / 128 blocks) and Llama-3-8B prefill on
// an H200's 132 SMs.
TEST(TileScheduler, CausalWorkIsBalanced) {
  struct Problem { int m_blocks, block_m, heads_batch; };
  for (Problem p : {Problem{128, 128, 16}, Problem{64, 128, 32}, Problem{32, 128, 64}, Problem{16, 128, 128},
                    Problem{8, 128, 256}, Problem{4, 128, 512}, Problem{128, 128, 8}, Problem{4, 128, 1024},
                    Problem{11, 192, 256}, Problem{22, 192, 128}, Problem{43, 192, 64}, Problem{86, 192, 32},
                    Problem{32, 128, 128}, Problem{64, 128, 128}}) {
    ForwardTileScheduler scheduler{p.m_blocks, p.heads_batch, 1, true};
    scheduler.plan(132, p.block_m);
    double total = 0, busiest = 0;
    for (auto const& tiles : tiles_per_cta(scheduler, 132)) {
      double work = 0;
      for (TileCoord t : tiles) work += ((t.m_block + 1) * p.block_m + 127) / 128 + 1.5;
      total += work;
      busiest = std::max(busiest, work);
    }
    EXPECT_LE(busiest, 1.05 * total / 132) << p.m_blocks << " m-blocks x " << p.heads_batch;
  }
}

// Sequences of different lengths (varlen): the batch's cu_seqlens on the host.
struct PackedLengths {
  std::vector<int> cu_seqlens{0};
  SequenceLengths lengths() const {
    int longest = 0;
    for (size_t b = 1; b < cu_seqlens.size(); ++b) longest = std::max(longest, cu_seqlens[b] - cu_seqlens[b - 1]);
    return SequenceLengths{cu_seqlens.data(), nullptr, longest, cu_seqlens.back()};
  }
  int batch() const { return static_cast<int>(cu_seqlens.size()) - 1; }
};

// Lengths from `shortest` to `longest` until `tokens` are packed (the benchmark's batches).
PackedLengths random_lengths(unsigned seed, int shortest, int longest, int tokens) {
  PackedLengths packed;
  unsigned state = seed * 2654435761u + 12345u;
  while (packed.cu_seqlens.back() < tokens) {
    state = state * 1664525u + 1013904223u;
    int length = shortest + static_cast<int>((state >> 8) % unsigned(longest - shortest + 1));
    packed.cu_seqlens.push_back(packed.cu_seqlens.back() + std::min(length, tokens - packed.cu_seqlens.back()));
  }
  return packed;
}

ForwardTileScheduler varlen_scheduler(SequenceLengths const& seq, int heads, int batch, bool causal, int ctas,
                                      int block_m) {
  ForwardTileScheduler scheduler{ForwardTileScheduler::m_blocks_for(seq.seqlen, block_m), heads, batch, causal};
  scheduler.plan(ctas, block_m, /*lengths_vary=*/true);
  return scheduler;
}

// Every m-block of every sequence exactly once; the other tiles lie past their sequence.
TEST(TileScheduler, VaryingLengthsCoverEverySequenceTileOnce) {
  std::vector<PackedLengths> batches = {random_lengths(1, 1, 1000, 5000), random_lengths(2, 100, 3000, 16384),
                                        random_lengths(3, 1, 300, 2000), PackedLengths{{0, 0, 129, 129, 1129}}};
  for (PackedLengths const& packed : batches) {
    SequenceLengths seq = packed.lengths();
    for (int block_m : {128, 192}) {
      for (bool causal : {false, true}) {
        for (int ctas : {1, 7, 132}) {
          ForwardTileScheduler scheduler = varlen_scheduler(seq, 3, packed.batch(), causal, ctas, block_m);
          std::set<std::tuple<int, int, int>> seen;
          size_t count = 0, expected = 0;
          for (int cta = 0; cta < ctas; ++cta) {
            for (int round = 0;; ++round) {
              unsigned index = scheduler.tile_index(cta, ctas, round);
              if (index >= scheduler.num_tiles()) break;
              TileCoord t = scheduler.tile(index, seq, block_m);
              if (t.m_block * block_m >= seq.of(t.batch).length) continue;  // an empty tile
              seen.insert({t.m_block, t.head, t.batch});
              ++count;
            }
          }
          for (int b = 0; b < packed.batch(); ++b) {
            expected += 3 * ForwardTileScheduler::m_blocks_for(seq.of(b).length, block_m);
          }
          EXPECT_EQ(count, expected) << block_m << " " << causal << " " << ctas;
          EXPECT_EQ(seen.size(), expected) << block_m << " " << causal << " " << ctas;
        }
      }
    }
  }
}

// The benchmark's varlen batches (16k tokens of lengths 128..8k, causal) on 132 CTAs, a
// tile costing its K/V blocks plus a fixed part (an empty one 0.3 blocks):
// - the static order: the CTAs of a round read the K/V of few heads (it stays in L2);
// - the dynamic order (kernel.h: the first index is the CTA's, then each CTA that is done
//   takes the next one from a counter), simulated: the busiest CTA is within 3% of the mean.
//   (The static order's busiest is 12-26% above the mean here.)
TEST(TileScheduler, VaryingLengthsShareHeadsAndBalanceDynamically) {
  for (unsigned seed = 0; seed < 4; ++seed) {
    PackedLengths packed = random_lengths(seed, 128, 8192, 16384);
    SequenceLengths seq = packed.lengths();
    for (int heads : {16, 32}) {
      ForwardTileScheduler scheduler = varlen_scheduler(seq, heads, packed.batch(), true, 132, 128);
      auto cost = [&](unsigned index) {
        TileCoord t = scheduler.tile(index, seq, 128);
        return t.m_block * 128 >= seq.of(t.batch).length ? 0.3 : t.m_block + 1 + 1.5;
      };
      size_t most_heads = 0;
      for (int round = 0; (round / 2 + 1) * 132 <= scheduler.paired_units; ++round) {  // the pair phase
        std::set<std::pair<int, int>> round_heads;
        for (int cta = 0; cta < 132; ++cta) {
          TileCoord t = scheduler.tile(scheduler.tile_index(cta, 132, round), seq, 128);
          if (t.m_block * 128 < seq.of(t.batch).length) round_heads.insert({t.batch, t.head});
        }
        most_heads = std::max(most_heads, round_heads.size());
      }
      EXPECT_LE(most_heads, 8u) << "seed " << seed << ", " << heads << " heads";

      std::set<std::pair<double, int>> busy_until;  // (time, cta)
      std::vector<double> work(132, 0.0);
      for (int cta = 0; cta < 132; ++cta) busy_until.insert({work[cta] = cost(cta), cta});
      for (unsigned index = 132; index < scheduler.num_tiles(); ++index) {
        auto [time, cta] = *busy_until.begin();
        busy_until.erase(busy_until.begin());
        work[cta] = time + cost(index);
        busy_until.insert({work[cta], cta});
      }
      double total = 0, busiest = 0;
      for (double w : work) total += w, busiest = std::max(busiest, w);
      EXPECT_LE(busiest, 1.03 * total / 132) << "seed " << seed << ", " << heads << " heads";
    }
  }
}

TEST(TileScheduler, MBlockCount) {
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(1, 128), 1);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(128, 128), 1);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(129, 128), 2);
  EXPECT_EQ(ForwardTileScheduler::m_blocks_for(4097, 128), 33);
}

}  // namespace
}  // namespace warpflash::kernels
