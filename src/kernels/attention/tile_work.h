// What one Q tile computes: the lengths and offsets of its batch's sequences, the mask
// with those lengths, and the K/V blocks it visits. Every role of a kernel derives it from
// the tile's coordinates, so none passes it to another.
#pragma once

#include <type_traits>

#include "kernels/attention/host_device.h"
#include "kernels/attention/mask.h"
#include "kernels/attention/seqlen.h"

namespace warpflash::kernels {

struct TileWork {
  AttentionMask mask;  // with the tile's sequence lengths
  int offset_q;        // first row of the tile's sequences in the token dimension
  int offset_k;
  int n_block_begin;   // K/V blocks [n_block_begin, n_block_end); none when end <= begin
  int n_block_end;

  WF_HOST_DEVICE bool empty() const { return n_block_end <= n_block_begin; }
};

// The mask with the lengths of batch `batch`'s sequences (kLeftPadding: as
// SequenceLengths::of, the keys after a left padding).
template <bool kLeftPadding = false>
WF_HOST_DEVICE AttentionMask tile_mask(SequenceLengths const& seq_q, SequenceLengths const& seq_k,
                                       AttentionMask const& mask, int batch) {
  return mask.for_lengths(seq_q.of(batch).length, seq_k.template of<kLeftPadding>(batch).length);
}

// A tile whose rows all lie past its query sequence (varlen and seqused grids are sized
// for the longest) or that sees no key visits no block.
// With Mask = CausalMask (the plain kernels: dense equal-length sequences, no mask or a
// causal one) only the parameters' lengths and the causal block range, as before the
// general policy existed.
template <int kBlockM, int kBlockN, class Mask = AttentionMask, bool kLeftPadding = false>
WF_HOST_DEVICE TileWork tile_work(SequenceLengths const& seq_q, SequenceLengths const& seq_k,
                                  AttentionMask const& mask, int m_block, int batch) {
  if constexpr (std::is_same_v<Mask, CausalMask>) {
    CausalMask plain{seq_q.seqlen, seq_k.seqlen, mask.window_right == 0};
    AttentionMask lengths = mask;  // (the plain problems never pack: no division)
    lengths.seqlen_q = seq_q.seqlen;
    lengths.seqlen_k = seq_k.seqlen;
    return TileWork{lengths, 0, 0, 0, plain.n_block_end(m_block, kBlockM, kBlockN)};
  }
  SequenceLengths::Sequence q = seq_q.of(batch), k = seq_k.template of<kLeftPadding>(batch);
  TileWork work{mask.for_lengths(q.length, k.length), q.offset, k.offset, 0, 0};
  if (m_block * kBlockM < q.length) {
    work.n_block_begin = work.mask.n_block_begin(m_block, kBlockM, kBlockN);
    work.n_block_end = work.mask.n_block_end(m_block, kBlockM, kBlockN);
  }
  return work;
}

}  // namespace warpflash::kernels
