// Split-KV (flash-decoding): each Q tile's K/V blocks are divided among `splits` pieces,
// computed by different CTAs, so that problems with fewer tiles than SMs (decode: one
// query row per sequence, a few heads) still keep every SM reading the KV cache. Each
// piece leaves its normalized O and its LSE in the workspace, and split_combine.cu merges
// a tile's pieces. The pieces of a tile have neighbouring indices (index = tile * splits
// + piece), so they run at the same time on neighbouring CTAs.
// Pure index arithmetic, 32-bit (tile counts times splits stay below 2^31: validate.cpp).
#pragma once

#include <cstddef>

#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

struct SplitKv {
  int splits = 1;
  FastDivmod by_splits;

  SplitKv() = default;
  explicit SplitKv(int splits_) : splits(splits_), by_splits(static_cast<unsigned>(splits_)) {}

  WF_HOST_DEVICE bool active() const { return splits > 1; }
  WF_HOST_DEVICE unsigned num_indices(unsigned tiles) const { return tiles * unsigned(splits); }
  // The tile of piece index `index`, and which of its pieces it is.
  WF_HOST_DEVICE unsigned tile_of(unsigned index, int& piece) const {
    unsigned p;
    unsigned tile = by_splits.divmod(index, p);
    piece = int(p);
    return tile;
  }
  // Narrows a tile's blocks [begin, end) to those of piece `piece`: runs that differ by at
  // most one block, empty where the tile has fewer blocks than pieces. Without a split
  // (one piece, divisor 1) the range stays. (piece + 1) * blocks <= 2^31: FastDivmod's
  // multiply-high and add stay in 32 bits (kMaxSplits 128, at most 2^24 blocks).
  WF_HOST_DEVICE void clip(int piece, int& n_block_begin, int& n_block_end) const {
    unsigned blocks = n_block_end > n_block_begin ? unsigned(n_block_end - n_block_begin) : 0u;
    int begin = n_block_begin;
    n_block_begin = begin + int(by_splits.div(unsigned(piece) * blocks));
    n_block_end = begin + int(by_splits.div(unsigned(piece + 1) * blocks));
  }
};

// A piece's slot in the workspace: O (block_m, head_dim_v) then LSE (block_m), fp32.
inline size_t split_kv_slot_floats(int block_m, int head_dim_v) { return size_t(block_m) * size_t(head_dim_v + 1); }

}  // namespace warpflash::kernels
