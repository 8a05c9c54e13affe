// The attention mask as index arithmetic, shared by every kernel: which keys a query row
// sees, which K/V blocks a Q tile visits, which of those need per-element masking, and
// (for the backward) which Q tiles see a K/V block.
// Two policy types: CausalMask (none or causal, dense sequences) and AttentionMask (no
// mask, causal, sliding window and chunked attention (Llama 4), per sequence, as runtime
// values). Query row i sees keys [key_begin(i), key_end(i)), bounds that never decrease
// with i, so a tile's first row has the lowest bounds and its last row the highest.
// AttentionMask also serves packed GQA (the query heads that share a K/V head in one
// tile, row = position * pack + head in the group): a row's bounds are its position's.
#pragma once

#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

// The plain policy: dense equal-length sequences with no mask or a causal one. What the
// kernels ran before windows and varlen existed, kept as its own type so that problems
// without them keep that loop (one limit per row, a few compares per block, all from the
// kernel's parameters): the general policy below costs 4-10% there (docs/perf-notes.md).
struct CausalMask {
  int seqlen_q = 0;
  int seqlen_k = 0;
  bool causal = false;

  WF_HOST_DEVICE int diagonal_offset() const { return seqlen_k - seqlen_q; }
  // One past the last key that query `row` sees (<= 0: none).
  WF_HOST_DEVICE int key_end(int row) const {
    int causal_end = row + diagonal_offset() + 1;
    return causal && causal_end < seqlen_k ? causal_end : seqlen_k;
  }
  WF_HOST_DEVICE int key_begin(int) const { return 0; }
  // One past the last K/V block that any row of the Q tile sees (0: the tile sees none).
  WF_HOST_DEVICE int n_block_end(int m_block, int block_m, int block_n) const {
    int key_end = seqlen_k;
    if (causal) {
      int last_row_end = (m_block + 1) * block_m + diagonal_offset();
      key_end = key_end < last_row_end ? key_end : last_row_end;
    }
    return key_end <= 0 ? 0 : (key_end + block_n - 1) / block_n;
  }
  WF_HOST_DEVICE bool block_needs_mask(int m_block, int n_block, int block_m, int block_n) const {
    int last_col = (n_block + 1) * block_n - 1;
    if (last_col >= seqlen_k) return true;
    return causal && last_col > m_block * block_m + diagonal_offset();
  }
  // The inverse, for kernels that walk the Q tiles of one K/V block (the backward): the Q
  // tiles [begin, end) with a row that sees a key of block n_block; end <= begin: none.
  WF_HOST_DEVICE int m_block_begin(int n_block, int block_m, int block_n) const {
    int first_row = causal ? n_block * block_n - diagonal_offset() : 0;
    return first_row > 0 ? first_row / block_m : 0;
  }
  WF_HOST_DEVICE int m_block_end(int n_block, int block_m, int block_n) const {
    return n_block * block_n < seqlen_k ? (seqlen_q + block_m - 1) / block_m : 0;
  }
};

// The general policy: any combination of causal, sliding window and chunk, per sequence.
struct AttentionMask {
  // A window bound that limits nothing (FlashAttention's -1). Sequence lengths stay below
  // 2^30 (limits.h), so row + offset +- a bound fits in 32 bits.
  static constexpr int kUnbounded = 1 << 30;

  int seqlen_q = 0;  // of the sequence pair the tile belongs to
  int seqlen_k = 0;
  // Sliding window around the bottom-right aligned diagonal (FlashAttention's semantics):
  // query i sees key j when i + offset - window_left <= j <= i + offset + window_right,
  // offset = seqlen_k - seqlen_q. Causal is window_right = 0.
  int window_left = kUnbounded;
  int window_right = kUnbounded;
  // Chunked attention: chunk > 0 limits query i to the keys of its chunk, the keys j with
  // floor(j / chunk) == floor((i + offset) / chunk). Divided by multiply and shift; the
  // dividend is made non-negative by chunk_bias, a multiple of chunk >= every seqlen_q.
  int chunk = 0;
  int chunk_bias = 0;
  FastDivmod by_chunk;
  // Packed GQA: `pack` query rows per position (the heads of a K/V head's group), so row
  // r is position r / pack and seqlen_q counts positions; 1 otherwise. A divisor of 1
  // divides to the row itself, so the unpacked kernels need no branch. Only the forward
  // packs: the inverse below (m_block_*) counts positions.
  int pack = 1;
  FastDivmod by_pack;

  // Host side: chunked attention for queries up to max_seqlen_q long (validated: the
  // dividends stay below 2^31).
  void set_chunk(int chunk_, int max_seqlen_q) {
    chunk = chunk_;
    if (chunk <= 0) return;
    by_chunk = FastDivmod(static_cast<unsigned>(chunk));
    chunk_bias = (max_seqlen_q + chunk - 1) / chunk * chunk;
  }

  // Host side: `pack` query rows per position (packed GQA).
  void set_pack(int pack_) {
    pack = pack_;
    by_pack = FastDivmod(static_cast<unsigned>(pack_));
  }

  // The mask of a sequence pair with `rows_q` query rows (seqlen_q * pack) and seqlen_k keys.
  WF_HOST_DEVICE AttentionMask for_lengths(int rows_q, int seqlen_k_) const {
    AttentionMask mask = *this;
    mask.seqlen_q = position(rows_q);
    mask.seqlen_k = seqlen_k_;
    return mask;
  }

  WF_HOST_DEVICE int position(int row) const { return int(by_pack.div(unsigned(row))); }
  // The query rows of the sequence (seqlen_q, times pack when packed).
  WF_HOST_DEVICE int rows() const { return seqlen_q * pack; }

  WF_HOST_DEVICE bool has_left_bound() const { return window_left < kUnbounded || chunk > 0; }
  WF_HOST_DEVICE bool has_right_bound() const { return window_right < kUnbounded || chunk > 0; }

  // Causal masks align to the bottom-right corner: the last query sees the last key.
  WF_HOST_DEVICE int diagonal_offset() const { return seqlen_k - seqlen_q; }

  // The first key of the chunk of query position i.
  WF_HOST_DEVICE int chunk_begin(int i) const {
    unsigned key = unsigned(i + diagonal_offset() + chunk_bias);
    return int(by_chunk.div(key) * unsigned(chunk)) - chunk_bias;
  }

  // First key query `row` sees (>= 0).
  WF_HOST_DEVICE int key_begin(int row) const {
    int i = position(row);
    int begin = window_left < kUnbounded ? i + diagonal_offset() - window_left : 0;
    if (chunk > 0) {
      int chunk_start = chunk_begin(i);
      begin = begin > chunk_start ? begin : chunk_start;
    }
    return begin > 0 ? begin : 0;
  }

  // One past the last key query `row` sees (<= key_begin(row): none).
  WF_HOST_DEVICE int key_end(int row) const {
    int i = position(row);
    int end = seqlen_k;
    if (window_right < kUnbounded) {
      int window_end = i + diagonal_offset() + window_right + 1;
      end = window_end < end ? window_end : end;
    }
    if (chunk > 0) {
      int chunk_end = chunk_begin(i) + chunk;
      end = chunk_end < end ? chunk_end : end;
    }
    return end;
  }

  WF_HOST_DEVICE bool visible(int row, int col) const { return col >= key_begin(row) && col < key_end(row); }

  // The K/V blocks [begin, end) that some row of Q tile m_block sees; end <= begin: none.
  // Blocks outside a window are skipped, not masked.
  WF_HOST_DEVICE int n_block_begin(int m_block, int block_m, int block_n) const {
    return has_left_bound() ? key_begin(m_block * block_m) / block_n : 0;
  }
  WF_HOST_DEVICE int n_block_end(int m_block, int block_m, int block_n) const {
    int end = has_right_bound() ? key_end((m_block + 1) * block_m - 1) : seqlen_k;
    end = end < seqlen_k ? end : seqlen_k;
    return end <= 0 ? 0 : (end + block_n - 1) / block_n;
  }

  // Whether some element of the (m_block, n_block) tile is masked: the block crosses the
  // end of the keys, the first row's right bound or the last row's left bound.
  WF_HOST_DEVICE bool block_needs_mask(int m_block, int n_block, int block_m, int block_n) const {
    int first_col = n_block * block_n, end_col = first_col + block_n;
    if (end_col > seqlen_k) return true;
    if (has_right_bound() && end_col > key_end(m_block * block_m)) return true;
    return has_left_bound() && first_col < key_begin((m_block + 1) * block_m - 1);
  }

  // The inverse, for kernels that walk the Q tiles of one K/V block (the backward): the Q
  // tiles [begin, end) with a row that sees a key of block n_block; end <= begin: none.
  // Bounds never decrease with the row, so the rows that see the block are those whose
  // key_end passes its first key and whose key_begin precedes its end: one range.
  WF_HOST_DEVICE int m_block_begin(int n_block, int block_m, int block_n) const {
    int first_row = first_row_of_keys(n_block * block_n);
    return first_row > 0 ? first_row / block_m : 0;
  }
  WF_HOST_DEVICE int m_block_end(int n_block, int block_m, int block_n) const {
    int first_key = n_block * block_n, end_key = first_key + block_n;
    if (first_key >= seqlen_k) return 0;
    end_key = end_key < seqlen_k ? end_key : seqlen_k;
    int end_row = end_row_of_keys(end_key);
    if (end_row <= first_row_of_keys(first_key)) return 0;
    return (end_row + block_m - 1) / block_m;
  }
  // The first row whose key_end passes `key` (key >= 0).
  WF_HOST_DEVICE int first_row_of_keys(int key) const {
    int row = 0;
    if (window_right < kUnbounded) {
      int window_row = key - diagonal_offset() - window_right;
      row = window_row > row ? window_row : row;
    }
    if (chunk > 0) {  // the first row in key's chunk
      int chunk_row = int(by_chunk.div(unsigned(key)) * unsigned(chunk)) - diagonal_offset();
      row = chunk_row > row ? chunk_row : row;
    }
    return row;
  }
  // One past the last row whose key_begin precedes `end_key` (end_key >= 1), at most seqlen_q.
  WF_HOST_DEVICE int end_row_of_keys(int end_key) const {
    int row = seqlen_q;
    if (window_left < kUnbounded) {
      int window_row = end_key - diagonal_offset() + window_left;
      row = window_row < row ? window_row : row;
    }
    if (chunk > 0) {  // one past the last row in the chunk of key end_key - 1
      int chunk_row = int((by_chunk.div(unsigned(end_key - 1)) + 1) * unsigned(chunk)) - diagonal_offset();
      row = chunk_row < row ? chunk_row : row;
    }
    return row;
  }

  // The same as two thresholds per tile, for a loop that holds them instead of deriving
  // the mask per block: block n needs masking when n >= right_mask_begin(...) (it crosses
  // the end of the keys or the first row's right bound) or n < left_mask_end(...).
  WF_HOST_DEVICE int right_mask_begin(int m_block, int block_m, int block_n) const {
    int end = has_right_bound() ? key_end(m_block * block_m) : seqlen_k;
    end = end < seqlen_k ? end : seqlen_k;
    return end <= 0 ? 0 : end / block_n;
  }
  WF_HOST_DEVICE int left_mask_end(int m_block, int block_m, int block_n) const {
    return has_left_bound() ? (key_begin((m_block + 1) * block_m - 1) + block_n - 1) / block_n : 0;
  }
};

}  // namespace warpflash::kernels
