// Which (m_block, head, batch) tiles each CTA of the persistent kernel computes: pure
// index arithmetic. The static order needs no global counter (no workspace); where the
// caller gives one, problems of unequal tiles (varlen, windows, causal) take the same
// indices in dynamic order instead (kernel.h).
#pragma once

#include <cstdint>

#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/host_device.h"
#include "kernels/attention/seqlen.h"
#include "kernels/attention/split_tail.h"

namespace warpflash::kernels {

struct TileCoord {
  int m_block;
  int head;
  int batch;
};

// CTAs take tiles in rounds of gridDim.x.
// - Without a causal mask every tile costs the same: m_block runs fastest, so the CTAs
//   of a round share the K/V of a few heads in L2. With clusters of two CTAs (blockIdx.x
//   2c and 2c+1), an even grid and an even m-block count, a cluster's CTAs get m-blocks
//   2i and 2i+1 of one head in every round and share its K/V blocks by multicast.
// - With a causal mask a tile's cost grows with its m_block. Two phases:
//   1. Pairs: m-blocks i and M-1-i of a head together cost M+1 blocks, so a CTA that
//      takes such a pair (a "unit") does the same work as every other; units are dealt
//      head by head, so the CTAs of a round read the K/V of a few heads and it stays in
//      L2. With an odd M the middle m-blocks of two heads make a unit.
//   2. Tail: the last heads (at least four rounds of tiles) are ordered longest first
//      (m_block slowest). The CTAs that got one unit less take the first, longest tiles
//      (about a unit each, so they catch up); then all CTAs take rounds dealt like a
//      snake, odd rounds reversed, so the short tiles at the end even out the finish.
//   Short problems with 128-row tiles skip the pairs when the snake alone balances them
//   and order the tail head by head instead (longest first within a head): measured
//   better there (docs/perf-notes.md).
// - Causal in dynamic order (a tile counter, kernel.h; plan_sections()): no pairs, only
//   the tail, in sections of heads whose K/V fit in L2 together, longest first within a
//   section. The CTAs take the next tile as they finish, which balances by itself; the
//   sections keep every K/V block read from DRAM once. (Longest first over all heads
//   read d = 192 causal 2k's K/V twice: an L2 of ~25 MB for data all SMs share, modelled
//   and measured with ncu in docs/perf-notes.md.) Except at the end: the CTAs that take
//   the last section's longest tiles finish late unless the section holds about a longest
//   tile's work for every CTA, so a last section of the remaining few heads takes in the
//   sections before it, up to twice a section's heads (d = 192 / 128 causal 2k: 8 heads
//   after six of 12, busiest SM 5.8% over the mean, 2.5% with 20, +5-9% at 2k-8k).
// - Sequences of different lengths (varlen, seqused: plan(..., lengths_vary = true)) keep
//   this order, with num_m_blocks the longest sequence's: a sequence's m-blocks past its
//   end are empty tiles, and a unit pairs the sequence's own m-blocks (pair_m_block).
//   Ordering all tiles longest first instead had every CTA of a round on another head,
//   and the K/V blocks of 132 heads do not stay in L2 (docs/perf-notes.md).
// plan() sets the phases for a grid on the host; the device only multiplies and shifts
// (FastDivmod): the producer thread that walks this has 24 registers.
// Tile counts fit in 31 bits (validate.cpp), so all of it is 32-bit.
struct ForwardTileScheduler {
  int num_m_blocks = 0;  // of the longest sequence
  int heads = 0;
  int batch = 0;
  bool causal = false;
  // Set by plan():
  bool lengths_vary = false;         // the batch's query sequences differ in length
  bool tail_heads_together = false;  // tail order: a head's m-blocks together
  int paired_heads = 0;              // heads (times batch) in phase 1, even
  int paired_units = 0;              // paired_heads * M / 2
  int units_per_cta = 0;             // paired_units / ctas
  int extra_units = 0;               // paired_units % ctas: CTAs below it get one more unit
  int section_heads = 0;             // heads (times batch) of a tail section
  int full_sections = 0;             // sections of section_heads before the last one
  FastDivmod by_m_blocks, by_heads, by_pairs;
  // The tail's sections: full_sections of section_heads * M tiles, then the last with
  // by_last_section_heads' divisor.
  FastDivmod by_section_tiles, by_section_heads, by_last_section_heads;
  SplitTail split;  // set by the launcher of a kernel with kSplitTail

  ForwardTileScheduler() = default;
  ForwardTileScheduler(int num_m_blocks_, int heads_, int batch_, bool causal_)
      : num_m_blocks(num_m_blocks_), heads(heads_), batch(batch_), causal(causal_) {}

  WF_HOST_DEVICE static int m_blocks_for(int64_t seqlen_q, int block_m) {
    return static_cast<int>((seqlen_q + block_m - 1) / block_m);
  }

  WF_HOST_DEVICE unsigned num_tiles() const { return unsigned(num_m_blocks) * unsigned(heads) * unsigned(batch); }

  // Host side, for a grid of `ctas` CTAs and tiles of `block_m` rows.
  void plan(int ctas, int block_m, bool lengths_vary_ = false) {
    lengths_vary = lengths_vary_;
    if (num_m_blocks == 0) return;
    by_m_blocks = FastDivmod(num_m_blocks);
    by_heads = FastDivmod(heads);
    by_pairs = FastDivmod(num_m_blocks / 2 > 0 ? num_m_blocks / 2 : 1);
    if (!causal) return;
    int64_t heads_batch = static_cast<int64_t>(heads) * batch;
    tail_heads_together = block_m == 128 && num_m_blocks <= 12 && (2 * ctas) % num_m_blocks == 0 &&
                          num_tiles() >= 4u * ctas;
    int64_t tail_heads = (4 * static_cast<int64_t>(ctas) + num_m_blocks - 1) / num_m_blocks;
    int64_t paired =
        tail_heads_together || heads_batch <= tail_heads ? 0 : heads_batch - tail_heads;
    paired_heads = static_cast<int>(paired & ~int64_t(1));
    paired_units = static_cast<int>(int64_t(paired_heads) / 2 * num_m_blocks);
    units_per_cta = paired_units / ctas;
    extra_units = paired_units % ctas;
    set_sections(static_cast<int>(heads_batch - paired_heads));
  }

  // Host side, after plan(), for a causal problem in dynamic order on `ctas` CTAs: all
  // tiles in the tail's order, in sections of `heads_per_section` heads (times batch).
  // A last section of the remainder (fewer heads than the others) takes in whole sections
  // before it while its work per CTA is under 90% of a longest tile's (M blocks; a head's
  // tiles are M (M + 1) / 2 blocks), as long as it stays within twice a section's heads
  // (its K/V in L2). (Whole last sections stay: merged into 32 MB of K/V, d = 256's and
  // d = 192's lost 0-2%; so do tiles of fewer than 16 blocks: at 1k, 8 blocks, the merge
  // measured 0.99; docs/perf-notes.md.)
  void plan_sections(int heads_per_section, int ctas) {
    if (!causal || num_m_blocks == 0 || tail_heads_together) return;
    paired_heads = paired_units = units_per_cta = extra_units = 0;
    set_sections(heads_per_section);
    if (num_m_blocks < 16) return;
    int tail_heads = heads * batch;
    // The heads whose tiles (M (M + 1) / 2 blocks each) give every CTA 90% of M blocks.
    int64_t balanced_heads = (int64_t(18) * ctas + 10 * (num_m_blocks + 1) - 1) / (10 * (num_m_blocks + 1));
    int last = static_cast<int>(by_last_section_heads.divisor);
    if (last == section_heads || last >= balanced_heads || balanced_heads > 2 * int64_t(section_heads)) return;
    int full = static_cast<int>((tail_heads - balanced_heads) / section_heads);
    set_sections(section_heads, full > 0 ? full : 0);
  }

  // Sections of `heads_per_section` of the tail's heads (all of them where it is < 1):
  // `full` of them (by default all but the remainder, or the last whole one), then the
  // rest in the last section.
  void set_sections(int heads_per_section, int full = -1) {
    int tail_heads = heads * batch - paired_heads;
    section_heads = heads_per_section < 1 || heads_per_section > tail_heads ? tail_heads : heads_per_section;
    full_sections = full >= 0 ? full : (tail_heads - 1) / section_heads;
    by_section_tiles = FastDivmod(static_cast<unsigned>(section_heads) * num_m_blocks);
    by_section_heads = FastDivmod(static_cast<unsigned>(section_heads));
    by_last_section_heads = FastDivmod(static_cast<unsigned>(tail_heads - full_sections * section_heads));
  }

  // The linear tile index `cta` (of the `ctas` planned for) computes in `round`;
  // >= num_tiles() when done. With kSplitTail, the tail rounds of an active split take
  // pieces of tiles (SplitTail).
  template <bool kSplitTail = false>
  WF_HOST_DEVICE unsigned tile_index(int cta, int ctas, int round) const {
    if constexpr (kSplitTail) {
      if (split.in_tail(round)) {
        unsigned index;
        return split.tile_index(cta, ctas, round, index) ? index : ~0u;
      }
    }
    if (!causal) return unsigned(round) * ctas + cta;
    int ahead = cta < extra_units ? 1 : 0;  // got one more unit
    if (round < 2 * (units_per_cta + ahead)) return 2 * (unsigned(round / 2) * ctas + cta) + (round & 1);
    // The tail. Rotated so that the CTAs with one unit less come first: they alone take
    // tail round 0 (its first ctas - extra_units tiles); the others start at round 1.
    int tail_round = round - 2 * units_per_cta - ahead;
    int rotated = cta - extra_units + (ahead ? ctas : 0);
    unsigned in_round = (tail_round & 1) ? ctas - 1 - rotated : rotated;
    return 2 * unsigned(paired_units) + unsigned(tail_round) * ctas - (tail_round > 0 ? extra_units : 0) + in_round;
  }

  WF_HOST_DEVICE TileCoord tile(unsigned index) const {
    unsigned m_block, head_batch;
    if (!causal) {
      head_batch = by_m_blocks.divmod(index, m_block);
    } else if (index < 2 * unsigned(paired_units)) {
      unsigned in_group, i, second = index & 1;
      unsigned group = by_m_blocks.divmod(index >> 1, in_group);  // two heads: M tiles, M units
      if (in_group < 2 * by_pairs.divisor && num_m_blocks > 1) {   // m-blocks M-1-i, then i
        head_batch = 2 * group + by_pairs.divmod(in_group, i);
        m_block = second ? i : num_m_blocks - 1 - i;
      } else {  // the middle m-blocks of both heads
        head_batch = 2 * group + second;
        m_block = num_m_blocks / 2;
      }
    } else {
      unsigned tail_index = index - 2 * unsigned(paired_units), inner;
      if (tail_heads_together) {
        head_batch = paired_heads + by_m_blocks.divmod(tail_index, inner);
      } else {  // in its section, m_block slowest (longest first), heads fastest
        unsigned in_section, section = by_section_tiles.divmod(tail_index, in_section);
        bool last = section >= unsigned(full_sections);
        if (last) {
          section = unsigned(full_sections);
          in_section = tail_index - section * by_section_tiles.divisor;
        }
        inner = (last ? by_last_section_heads : by_section_heads).divmod(in_section, head_batch);
        head_batch += paired_heads + section * by_section_heads.divisor;
      }
      m_block = num_m_blocks - 1 - inner;
    }
    unsigned head;
    unsigned batch_index = by_heads.divmod(head_batch, head);
    return TileCoord{static_cast<int>(m_block), static_cast<int>(head), static_cast<int>(batch_index)};
  }

  // The tile of `index` when the query sequences may differ in length: m_block >= the
  // sequence's m-blocks marks an empty tile.
  WF_HOST_DEVICE TileCoord tile(unsigned index, SequenceLengths const& seq_q, int block_m) const {
    TileCoord coord = tile(index);
    if (lengths_vary && causal && index < 2 * unsigned(paired_units)) {
      coord.m_block = pair_m_block(coord.m_block, m_blocks_for(seq_q.of(coord.batch).length, block_m));
    }
    return coord;
  }

  // Unit i of a head pairs m-blocks M-1-i and i (M = num_m_blocks; with an odd M the
  // middle m-blocks of two heads make a unit). A sequence of M_b = sequence_m_blocks < M
  // m-blocks takes M_b-1-i and i in the same two slots while i < M_b-1-i, its middle
  // m-block (odd M_b) once in the first slot, and nothing after (M_b: past its end), so
  // its units cost the same as each other and it is done in the first units of a head.
  WF_HOST_DEVICE int pair_m_block(int m_block, int sequence_m_blocks) const {
    int half = num_m_blocks / 2, last = sequence_m_blocks - 1;
    if (sequence_m_blocks >= num_m_blocks) return m_block;
    if (num_m_blocks % 2 == 1 && m_block == half) return sequence_m_blocks;  // the pairs cover it
    bool second = m_block < half;
    int i = second ? m_block : num_m_blocks - 1 - m_block;
    if (second) return i < last - i ? i : sequence_m_blocks;
    return i <= last - i ? last - i : sequence_m_blocks;
  }
};

}  // namespace warpflash::kernels
