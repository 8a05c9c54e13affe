// Split-KV (flash-decoding): the K/V blocks of each Q tile are divided among CTAs, so that
// problems with fewer tiles than SMs (decode: one query row per sequence, a few heads)
// still keep every SM reading the KV cache. Each piece leaves its normalized O and its LSE
// in the workspace, and split_combine.cu merges a tile's pieces. Two ways to divide:
// - Fixed (the caller's num_splits): `splits` pieces per tile with neighbouring indices
//   (index = tile * splits + piece), so they run at the same time on neighbouring CTAs.
// - Runs (num_splits = 0, where one piece a tile fits in a round of CTAs but leaves many
//   SMs idle: problem.h's choose_split): the tiles' blocks, tile after tile, in equal runs,
//   one per worker CTA (stream-K). A run is shorter than a tile (tiles < workers), so it
//   covers pieces of at most two tiles: its pieces are indices worker and workers + worker
//   (rounds 0 and 1 of a grid of `workers` CTAs). The run boundaries are fractions of a
//   tile (worker w covers [w * tiles, (w + 1) * tiles) of the tiles' tiles * workers
//   units), and a piece takes that fraction of its tile's own blocks: equal runs where the
//   tiles are equally long, proportional pieces where the cached lengths differ.
// Pure index arithmetic, 32-bit (tile counts times splits stay below 2^31: validate.cpp;
// workers times a tile's blocks below 2^31: choose_split).
#pragma once

#include <cstddef>

#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

struct SplitKv {
  int splits = 1;   // fixed: pieces per tile
  int workers = 0;  // runs: the CTAs that share the blocks (0: fixed pieces)
  int tiles = 0;    // runs: the tiles
  FastDivmod by_splits;  // the divisor: splits, or workers for runs

  SplitKv() = default;
  explicit SplitKv(int splits_) : splits(splits_), by_splits(static_cast<unsigned>(splits_)) {}
  // Runs over `tiles_` tiles for `workers_` CTAs; tiles_ < workers_.
  static SplitKv runs(int tiles_, int workers_) {
    SplitKv split;
    split.workers = workers_;
    split.tiles = tiles_;
    split.by_splits = FastDivmod(static_cast<unsigned>(workers_));
    return split;
  }

  WF_HOST_DEVICE bool active() const { return splits > 1 || workers > 0; }
  WF_HOST_DEVICE unsigned num_indices(unsigned tiles_) const {
    return workers > 0 ? 2u * unsigned(workers) : tiles_ * unsigned(splits);
  }
  // Runs: the first tile of worker w's run.
  WF_HOST_DEVICE int first_tile(int worker) const { return int(by_splits.div(unsigned(worker) * unsigned(tiles))); }
  // The tile of piece index `index`, and the piece, which clip() narrows to (fixed: which
  // of the tile's pieces; runs: the index itself).
  WF_HOST_DEVICE unsigned tile_of(unsigned index, int& piece) const {
    unsigned p;
    unsigned q = by_splits.divmod(index, p);
    if (workers > 0) {
      piece = int(index);  // round q of worker p
      int tile = first_tile(int(p)) + int(q);
      return unsigned(tile < tiles ? tile : tiles - 1);  // past the last: an empty piece (clip)
    }
    piece = int(p);
    return q;
  }
  // Narrows a tile's blocks [begin, end) to those of piece `piece` (tile_of's): fixed,
  // runs that differ by at most one block, empty where the tile has fewer blocks than
  // pieces; runs, the worker's fraction of the tile, empty where it has none. Without a
  // split (one piece, divisor 1) the range stays. (piece + 1) * blocks and workers *
  // blocks stay below 2^31: FastDivmod's multiply-high and add stay in 32 bits
  // (kMaxSplits 128, at most 2^24 blocks; choose_split).
  // kRuns: compiled with the runs' arithmetic (not where it spilled: kernel traits'
  // kSplitRuns).
  template <bool kRuns = true>
  WF_HOST_DEVICE void clip(int piece, int& n_block_begin, int& n_block_end) const {
    unsigned blocks = n_block_end > n_block_begin ? unsigned(n_block_end - n_block_begin) : 0u;
    int begin = n_block_begin;
    unsigned from = unsigned(piece), to = unsigned(piece + 1);  // in units of 1 / splits
    if (kRuns && workers > 0) {  // in units of 1 / workers of the tile
      // The run starts `start` units into its first tile (worker * tiles = first_tile *
      // workers + start) and ends `tiles` units later, past the first tile for round 1.
      unsigned worker, start;
      int round = int(by_splits.divmod(unsigned(piece), worker));
      by_splits.divmod(worker * unsigned(tiles), start);
      int end = int(start) + tiles - round * workers;
      from = round == 0 ? start : 0u;
      end = end < workers ? end : workers;
      to = end > int(from) ? unsigned(end) : from;  // empty where the run ends before
    }
    n_block_begin = begin + int(by_splits.div(from * blocks));
    n_block_end = begin + int(by_splits.div(to * blocks));
  }
  // Runs: the workers whose runs cover some of tile `tile`, [first, end), and the index of
  // worker w's piece of it (its workspace slot).
  WF_HOST_DEVICE int first_worker(int tile) const { return int(unsigned(tile) * unsigned(workers) / unsigned(tiles)); }
  WF_HOST_DEVICE int end_worker(int tile) const {
    return int((unsigned(tile + 1) * unsigned(workers) + unsigned(tiles) - 1) / unsigned(tiles));
  }
  WF_HOST_DEVICE unsigned piece_index(int worker, int tile) const {
    return unsigned(tile - first_tile(worker)) * unsigned(workers) + unsigned(worker);
  }
};

// A piece's slot in the workspace: O (block_m, head_dim_v) then LSE (block_m), fp32.
inline size_t split_kv_slot_floats(int block_m, int head_dim_v) { return size_t(block_m) * size_t(head_dim_v + 1); }

}  // namespace warpflash::kernels
