// The attention mask as index arithmetic: which keys a query row sees, which K/V
// blocks a Q tile needs, and which of those need per-element masking.
#pragma once

#include "kernels/common/host_device.h"

namespace warpflash::kernels {

struct AttentionMask {
  int seqlen_q = 0;
  int seqlen_k = 0;
  bool causal = false;

  // Causal masks align to the bottom-right corner: the last query sees every key.
  WF_HOST_DEVICE int diagonal_offset() const { return seqlen_k - seqlen_q; }

  // One past the last key that query `row` sees (<= 0: none).
  WF_HOST_DEVICE int key_end(int row) const {
    int causal_end = row + diagonal_offset() + 1;
    return causal && causal_end < seqlen_k ? causal_end : seqlen_k;
  }

  WF_HOST_DEVICE bool visible(int row, int col) const { return col < key_end(row); }

  // One past the last K/V block that any row of the Q tile sees (0: the tile sees none).
  WF_HOST_DEVICE int n_block_end(int m_block, int block_m, int block_n) const {
    int key_end = seqlen_k;
    if (causal) {
      int last_row_end = (m_block + 1) * block_m + diagonal_offset();
      key_end = key_end < last_row_end ? key_end : last_row_end;
    }
    return key_end <= 0 ? 0 : (key_end + block_n - 1) / block_n;
  }

  // Whether some element of the (m_block, n_block) tile is masked: the block crosses
  // the end of the keys or the causal diagonal.
  WF_HOST_DEVICE bool block_needs_mask(int m_block, int n_block, int block_m, int block_n) const {
    int last_col = (n_block + 1) * block_n - 1;
    if (last_col >= seqlen_k) return true;
    return causal && last_col > m_block * block_m + diagonal_offset();
  }
};

}  // namespace warpflash::kernels
