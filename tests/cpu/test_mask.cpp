// The mask policies' index arithmetic, checked on the CPU by brute force over small shapes:
// which keys each row sees, which K/V blocks a Q tile visits and which of them need
// masking, and which Q tiles see a K/V block.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/mask.h"
#include "kernels/forward/problem.h"
#include "reference/attention_reference.h"

namespace warpflash::kernels {
namespace {

// The masks of the tests: none, causal, sliding windows (one side, both, negative
// offsets through seqlen_q != seqlen_k), chunks alone and with causal.
struct MaskCase {
  bool causal;
  int left, right, chunk;  // FlashAttention's window_size (-1: unbounded) and attention_chunk
};
const MaskCase kMaskCases[] = {{false, -1, -1, 0}, {true, -1, -1, 0}, {true, 2, -1, 0}, {false, 2, 0, 0},
                               {false, 0, 1, 0},   {false, 3, -1, 0}, {false, -1, 2, 0}, {false, -1, -1, 3},
                               {true, -1, -1, 4},  {false, 1, 1, 5},  {false, 0, 0, 0}};

AttentionMask make_mask(MaskCase c, int sq, int sk) {
  ForwardArgs args;
  args.shape.seqlen_q = sq;
  args.shape.seqlen_k = sk;
  args.causal = c.causal;
  args.window_left = c.left;
  args.window_right = c.right;
  args.attention_chunk = c.chunk;
  return forward_mask(args).mask.for_lengths(sq, sk);
}

std::string mask_case_name(MaskCase c, int sq, int sk) {
  return "sq=" + std::to_string(sq) + " sk=" + std::to_string(sk) + " causal=" + std::to_string(c.causal) +
         " window=" + std::to_string(c.left) + "," + std::to_string(c.right) + " chunk=" + std::to_string(c.chunk);
}

reference::Problem reference_problem(MaskCase c, int sq, int sk) {
  reference::Problem p;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.causal = c.causal;
  p.window_left = c.left;
  p.window_right = c.right;
  p.attention_chunk = c.chunk;
  return p;
}

// The block range [first, last + 1) that brute force finds: blocks holding a visible
// element, each added as seen.
struct NeededBlocks {
  int first = 1 << 20, last = -1;
  void add(int block) {
    first = std::min(first, block);
    last = std::max(last, block);
  }
};

// [begin, end) is exactly the needed range, or empty when nothing is needed.
void expect_range(int begin, int end, NeededBlocks needed, const std::string& where) {
  if (needed.last < 0) {
    EXPECT_LE(end, begin) << where;
    return;
  }
  EXPECT_EQ(begin, needed.first) << where;
  EXPECT_EQ(end, needed.last + 1) << where;
}

TEST(Mask, VisibleMatchesTheReference) {
  for (MaskCase c : kMaskCases) {
    for (auto [sq, sk] : {std::pair{5, 5}, {3, 7}, {7, 3}, {1, 9}, {9, 1}, {12, 12}}) {
      AttentionMask mask = make_mask(c, sq, sk);
      reference::Problem p = reference_problem(c, sq, sk);
      for (int i = 0; i < sq; ++i)
        for (int j = 0; j < sk + 3; ++j)
          EXPECT_EQ(mask.visible(i, j) && j < sk, reference::is_visible(p, i, j))
              << i << "," << j << " causal " << c.causal << " window " << c.left << "," << c.right << " chunk "
              << c.chunk;
    }
  }
}

// Calls f(c, sq, sk, mask, m) for every mask case, sequence lengths sq in 1..13 and sk in
// 0..13, and Q tile m of bm rows.
template <class F>
void for_each_q_tile(int bm, F&& f) {
  for (MaskCase c : kMaskCases)
    for (int sq = 1; sq <= 13; ++sq)
      for (int sk = 0; sk <= 13; ++sk) {
        AttentionMask mask = make_mask(c, sq, sk);
        for (int m = 0; m * bm < sq; ++m) f(c, sq, sk, mask, m);
      }
}

// The block range is exactly the blocks with a visible key (blocks outside a window are
// skipped), and a block reported mask-free has no masked element.
TEST(Mask, BlockRangeAndMaskFreeBlocksAreExact) {
  const int bm = 4, bn = 3;
  for_each_q_tile(bm, [&](MaskCase c, int sq, int sk, const AttentionMask& mask, int m) {
    int begin = mask.n_block_begin(m, bm, bn), end = mask.n_block_end(m, bm, bn);
    NeededBlocks needed;
    for (int row = m * bm; row < (m + 1) * bm; ++row)
      for (int col = 0; col < sk; ++col)
        if (mask.visible(row, col)) needed.add(col / bn);
    std::string where = mask_case_name(c, sq, sk) + " m=" + std::to_string(m);
    expect_range(begin, end, needed, where);
    for (int n = begin; n < end && needed.last >= 0; ++n) {
      bool by_thresholds = n >= mask.right_mask_begin(m, bm, bn) || n < mask.left_mask_end(m, bm, bn);
      EXPECT_EQ(by_thresholds, mask.block_needs_mask(m, n, bm, bn)) << "block " << n << ", " << where;
      if (mask.block_needs_mask(m, n, bm, bn)) continue;
      for (int row = m * bm; row < (m + 1) * bm; ++row)
        for (int col = n * bn; col < (n + 1) * bn; ++col)
          EXPECT_TRUE(mask.visible(row, col) && col < sk) << "block " << n << " claimed mask-free, " << where;
    }
  });
}

// Each threshold alone covers its side: masking, in a block at or past right_mask_begin,
// the scores at or past their row's key_end and, in a block before left_mask_end, those
// before their row's key_begin masks exactly the invisible scores of every visited block
// (so a loop holding the thresholds may mask each bound in a pass of its own).
TEST(Mask, OneSidedPassesByThresholdMaskExactly) {
  const int bm = 4, bn = 3;
  for_each_q_tile(bm, [&](MaskCase c, int sq, int sk, const AttentionMask& mask, int m) {
    int right = mask.right_mask_begin(m, bm, bn), left = mask.left_mask_end(m, bm, bn);
    for (int n = mask.n_block_begin(m, bm, bn); n < mask.n_block_end(m, bm, bn); ++n)
      for (int row = m * bm; row < std::min((m + 1) * bm, sq); ++row)
        for (int col = n * bn; col < (n + 1) * bn; ++col) {
          bool masked = (n >= right && col >= mask.key_end(row)) || (n < left && col < mask.key_begin(row));
          EXPECT_EQ(masked, !(mask.visible(row, col) && col < sk))
              << "row " << row << ", col " << col << ", " << mask_case_name(c, sq, sk);
        }
  });
}

// Packed GQA (decode): `pack` query rows per position. Each row sees exactly its
// position's keys, and the block ranges and mask-free blocks of tiles of packed rows are
// exact as above.
TEST(Mask, PackedRowsSeeTheirPositionsKeys) {
  const int bm = 4, bn = 3;
  for (MaskCase c : kMaskCases) {
    for (int pack : {2, 3, 4}) {
      for (int sq : {1, 2, 5}) {
        for (int sk : {0, 1, 7, 13}) {
          AttentionMask plain = make_mask(c, sq, sk);
          AttentionMask mask = plain;
          mask.set_pack(pack);
          mask = mask.for_lengths(sq * pack, sk);
          std::string where = mask_case_name(c, sq, sk) + " pack=" + std::to_string(pack);
          ASSERT_EQ(mask.seqlen_q, sq) << where;
          ASSERT_EQ(mask.rows(), sq * pack) << where;
          for (int row = 0; row < sq * pack; ++row) {
            EXPECT_EQ(mask.key_begin(row), plain.key_begin(row / pack)) << "row " << row << ", " << where;
            EXPECT_EQ(mask.key_end(row), plain.key_end(row / pack)) << "row " << row << ", " << where;
          }
          for (int m = 0; m * bm < sq * pack; ++m) {
            int begin = mask.n_block_begin(m, bm, bn), end = mask.n_block_end(m, bm, bn);
            NeededBlocks needed;
            for (int row = m * bm; row < std::min((m + 1) * bm, sq * pack); ++row)
              for (int col = 0; col < sk; ++col)
                if (mask.visible(row, col)) needed.add(col / bn);
            // The kernels visit the range of the tile's rows up to its end (rows past the
            // last position see more keys, never fewer): it covers the needed blocks.
            if (needed.last >= 0) {
              EXPECT_LE(begin, needed.first) << "m=" << m << ", " << where;
              EXPECT_GE(end, needed.last + 1) << "m=" << m << ", " << where;
            }
            for (int n = begin; n < end; ++n) {
              if (mask.block_needs_mask(m, n, bm, bn)) continue;
              for (int row = m * bm; row < std::min((m + 1) * bm, sq * pack); ++row)
                for (int col = n * bn; col < (n + 1) * bn; ++col)
                  EXPECT_TRUE(mask.visible(row, col) && col < sk) << "block " << n << " claimed mask-free, " << where;
            }
          }
        }
      }
    }
  }
}

// The inverse (the backward walks the Q tiles of a K/V block): exactly the Q tiles with a
// row that sees a key of the block, for both policies.
TEST(Mask, QTilesOfAKeyBlockAreExact) {
  const int bm = 4, bn = 3;
  for (MaskCase c : kMaskCases) {
    for (int sq = 0; sq <= 13; ++sq) {
      for (int sk = 1; sk <= 13; ++sk) {
        AttentionMask mask = make_mask(c, sq, sk);
        bool plain = c.left < 0 && c.chunk == 0 && (c.causal || c.right < 0);
        CausalMask causal_mask{sq, sk, c.causal};
        for (int n = 0; n * bn < sk + bn; ++n) {
          NeededBlocks needed;
          for (int row = 0; row < sq; ++row)
            for (int col = n * bn; col < std::min((n + 1) * bn, sk); ++col)
              if (mask.visible(row, col)) needed.add(row / bm);
          std::string where = mask_case_name(c, sq, sk) + " n=" + std::to_string(n);
          expect_range(mask.m_block_begin(n, bm, bn), mask.m_block_end(n, bm, bn), needed, where);
          if (plain) {
            expect_range(causal_mask.m_block_begin(n, bm, bn), causal_mask.m_block_end(n, bm, bn), needed,
                         where + " (CausalMask)");
          }
        }
      }
    }
  }
}

// The backward's deterministic order (kernels/backward/kernel.h) waits, for query tile m,
// for the K/V blocks n + 1 .. n_block_end(m) - 1 before block n adds its dQ: it ends only if
// exactly the blocks [n_block_begin(m), n_block_end(m)) visit m, each once (a visiting block
// is one whose m_block_begin(n) <= m < m_block_end(n)). Small tiles, so that every mask case
// crosses many of them.
TEST(Mask, BlocksVisitingAQueryTileAreConsecutive) {
  const int bm = 4, bn = 3;
  for (MaskCase c : kMaskCases) {
    for (int sq = 0; sq <= 13; ++sq) {
      for (int sk = 1; sk <= 13; ++sk) {
        AttentionMask mask = make_mask(c, sq, sk);
        for (int m = 0; m * bm < sq; ++m) {
          std::vector<int> visitors;
          for (int n = 0; n * bn < sk; ++n) {
            if (mask.m_block_begin(n, bm, bn) <= m && m < mask.m_block_end(n, bm, bn)) visitors.push_back(n);
          }
          int begin = mask.n_block_begin(m, bm, bn), end = mask.n_block_end(m, bm, bn);
          std::vector<int> expected;
          for (int n = begin; n < end; ++n) expected.push_back(n);
          EXPECT_EQ(visitors, expected) << mask_case_name(c, sq, sk) << " m=" << m;
        }
      }
    }
  }
}

}  // namespace
}  // namespace warpflash::kernels
