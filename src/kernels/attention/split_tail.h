// The last round of a non-causal persistent launch, split along the keys so that every
// worker finishes at once. Without it, 1024 equal tiles on 132 SMs take 8 rounds for 7.76
// rounds of work: a quarter of the SMs idle through the last one. Here the tail's K/V
// blocks, tile after tile, are dealt out in equal contiguous runs, one per worker (a CTA,
// or a cluster whose CTAs compute neighbouring tiles over the same blocks). A run is
// shorter than a tile, so it covers at most two pieces of tiles. Each piece leaves its
// normalized O and its LSE in a workspace, and split_combine.cu merges a tile's pieces:
// O = sum_i exp(lse_i - lse) O_i with lse = log(sum_i exp(lse_i)).
// Pure index arithmetic, all 32-bit (block counts stay below 2^31: limits.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

struct SplitTail {
  int full_rounds = 0;  // rounds of whole tiles before the tail
  int units = 0;        // tail units (a worker's tiles of one round); 0: no split
  int n_blocks = 0;     // K/V blocks of a tile
  int share = 0;        // tail blocks per worker; the first `extra` workers take one more
  int extra = 0;
  int cluster_shift = 0;  // log2 of the CTAs per worker (1 or 2)
  FastDivmod by_n_blocks;

  // A piece must be long enough to pay for its second Q load, its workspace round trip
  // and the merge, and the split must save that much at the end.
  static constexpr int kMinPieceBlocks = 8;
  static constexpr int kMinSavedBlocks = 4;

  // Host side: the tail of `units` equal units of `n_blocks` blocks on `workers` workers,
  // or an inactive split when the units divide evenly or the pieces would be too short.
  static SplitTail plan(int64_t total_units, int workers, int n_blocks, int cluster_m) {
    SplitTail split;
    int64_t tail_units = total_units % workers;
    int64_t tail_blocks = tail_units * n_blocks;
    int64_t longest_run = (tail_blocks + workers - 1) / workers;
    if (tail_units == 0 || tail_blocks < int64_t(kMinPieceBlocks) * workers ||
        longest_run > n_blocks - kMinSavedBlocks) {
      return split;
    }
    split.full_rounds = static_cast<int>(total_units / workers);
    split.units = static_cast<int>(tail_units);
    split.n_blocks = n_blocks;
    split.share = static_cast<int>(tail_blocks / workers);
    split.extra = static_cast<int>(tail_blocks % workers);
    split.cluster_shift = cluster_m == 2 ? 1 : 0;
    split.by_n_blocks = FastDivmod(n_blocks);
    return split;
  }

  WF_HOST_DEVICE bool active() const { return units > 0; }
  WF_HOST_DEVICE bool in_tail(int round) const { return active() && round >= full_rounds; }

  // Where `worker`'s run starts in the tail's blocks (tail unit u has blocks
  // [u * n_blocks, (u + 1) * n_blocks)).
  WF_HOST_DEVICE int run_begin(int worker) const { return worker * share + (worker < extra ? worker : extra); }

  // Piece `piece` (0 or 1) of `worker`'s run: its tail unit and its blocks
  // [n_block_begin, n_block_end) of that unit's tiles; false if the run has no such piece.
  WF_HOST_DEVICE bool piece(int worker, int piece, int& unit, int& n_block_begin, int& n_block_end) const {
    int begin = run_begin(worker), end = run_begin(worker + 1);
    unit = static_cast<int>(by_n_blocks.div(unsigned(begin))) + piece;
    int unit_begin = unit * n_blocks;
    if (piece > 1 || unit_begin >= end || begin >= end) return false;
    n_block_begin = begin > unit_begin ? begin - unit_begin : 0;
    n_block_end = end - unit_begin < n_blocks ? end - unit_begin : n_blocks;
    return true;
  }

  // The tile that the CTA of rank `rank` in its cluster computes of tail unit `unit`, in a
  // grid of `ctas`: (full_rounds * workers + unit) * cluster_m + rank, so a cluster's
  // CTAs take m-blocks 2i and 2i+1 of one head, as in the rounds before.
  WF_HOST_DEVICE unsigned unit_tile(int ctas, int unit, int rank) const {
    return ((unsigned(full_rounds) * unsigned(ctas >> cluster_shift) + unsigned(unit)) << cluster_shift) +
           unsigned(rank);
  }

  // The tile index of CTA `cta`'s piece in `round` of a grid of `ctas`; false if none.
  WF_HOST_DEVICE bool tile_index(int cta, int ctas, int round, unsigned& index) const {
    int worker = cta >> cluster_shift, unit, begin, end;
    if (!piece(worker, round - full_rounds, unit, begin, end)) return false;
    index = unit_tile(ctas, unit, cta - (worker << cluster_shift));
    return true;
  }

  // Narrows a tile's blocks to the piece CTA `cta` computes in tail round `round`.
  WF_HOST_DEVICE void clip(int cta, int round, int& n_block_begin, int& n_block_end) const {
    int unit;
    piece(cta >> cluster_shift, round - full_rounds, unit, n_block_begin, n_block_end);
  }

  // The workspace slot of CTA `cta`'s piece `piece` (its tail round minus full_rounds).
  WF_HOST_DEVICE static int piece_slot(int cta, int piece) { return 2 * cta + piece; }
  WF_HOST_DEVICE int slot(int cta, int round) const { return piece_slot(cta, round - full_rounds); }
};

// The workspace for a grid of `ctas`: two slots per CTA, each a piece's O and LSE in fp32.
inline size_t split_workspace_bytes(int ctas, int block_m, int head_dim) {
  return size_t(2) * size_t(ctas) * size_t(block_m) * size_t(head_dim + 1) * sizeof(float);
}

}  // namespace warpflash::kernels
