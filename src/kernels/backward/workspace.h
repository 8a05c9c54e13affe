// Where the backward's scratch lives in the caller's workspace, and which of its rows
// belong to each query. Every sequence starts at a multiple of block_m (the main kernel's
// query tile) with at least one row of slack after the previous sequence: its first row is
// (offset + b * block_m) rounded down to block_m (FlashAttention-3's padded offsets), so a
// sequence's last, partial tile never shares rows with the next one and tiles stay aligned.
// Dense batches: sequence b at b * round_up(seqlen_q, block_m).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention/host_device.h"
#include "kernels/attention/seqlen.h"

namespace warpflash::kernels {

struct BackwardWorkspace {
  int block_m = 0;
  int heads = 0;             // of Q
  int head_dim = 0;          // of Q and dQ
  int64_t padded_rows = 0;   // per head
  // Byte offsets from the workspace's start, 16-byte aligned:
  size_t dpsum = 0;          // fp32 (heads, padded_rows): rowsum(dO * O), 0 past a sequence
  size_t lse_log2 = 0;       // fp32 (heads, padded_rows): LSE * log2(e), +inf past a sequence
  size_t dq_accum = 0;       // fp32 (heads, padded_rows, head_dim): dQ / softmax_scale, summed;
                             // each block_m-row tile in fragment order (dq_order.h)
  size_t dq_semaphore = 0;   // int32 (heads, padded_rows / block_m): deterministic order of the sums
  size_t sink_partials = 0;  // fp32 (heads, padded_rows / block_m): each query tile's share of d_sink
                             // (deterministic mode), summed in a fixed order by the postprocess
  size_t bytes = 0;          // the whole workspace

  // Host side. packed: cu_seqlens_q gives the sequences, total_q rows; otherwise batch
  // sequences of seqlen_q rows.
  static BackwardWorkspace plan(int64_t batch, int64_t seqlen_q, bool packed, int64_t total_q, int heads,
                                int head_dim, int block_m) {
    BackwardWorkspace w;
    w.block_m = block_m;
    w.heads = heads;
    w.head_dim = head_dim;
    int64_t rows = packed ? total_q + batch * block_m : batch * round_up(seqlen_q, block_m);
    w.padded_rows = round_up(rows, block_m);
    size_t per_head_floats = static_cast<size_t>(heads) * static_cast<size_t>(w.padded_rows);
    size_t offset = 0;
    auto take = [&](size_t bytes) {
      size_t at = offset;
      offset += (bytes + 15) / 16 * 16;
      return at;
    };
    w.dpsum = take(per_head_floats * sizeof(float));
    w.lse_log2 = take(per_head_floats * sizeof(float));
    w.dq_accum = take(per_head_floats * static_cast<size_t>(head_dim) * sizeof(float));
    size_t tiles = static_cast<size_t>(heads) * static_cast<size_t>(w.padded_rows / block_m);
    w.dq_semaphore = take(tiles * sizeof(int));
    w.sink_partials = take(tiles * sizeof(float));
    w.bytes = offset;
    return w;
  }

  // The workspace row of sequence b's first query (seq_q as the kernels see it).
  WF_HOST_DEVICE int64_t first_row(SequenceLengths const& seq_q, int b) const {
    if (!seq_q.packed()) return int64_t(b) * round_up(seq_q.seqlen, block_m);
    return (int64_t(seq_q.of(b).offset) + int64_t(b) * block_m) / block_m * block_m;
  }

  // The row of sequence b's first query in head `head`'s part of the per-row arrays (a
  // multiple of block_m).
  WF_HOST_DEVICE int64_t head_first_row(SequenceLengths const& seq_q, int b, int head) const {
    return int64_t(head) * padded_rows + first_row(seq_q, b);
  }

  WF_HOST_DEVICE static int64_t round_up(int64_t n, int64_t multiple) {
    return (n + multiple - 1) / multiple * multiple;
  }
};

}  // namespace warpflash::kernels
