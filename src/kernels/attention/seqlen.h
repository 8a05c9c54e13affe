// Where each batch's sequences live and how long they are: a dense batch (every sequence
// seqlen long, at its own batch index) or FlashAttention's packed variable-length layout
// (cu_seqlens: the sequences one after the other along the token dimension), either with
// seqused (only the first seqused[b] tokens of a sequence count), and on the keys' side
// of a KV cache a left padding (FlashAttention's cache_leftpad: sequence b's keys begin
// leftpad[b] rows into its cache).
#pragma once

#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

// One side (queries, or keys and values) of the problem.
struct SequenceLengths {
  int const* cu_seqlens = nullptr;  // (batch + 1) prefix sums; null: dense
  int const* seqused = nullptr;     // (batch); null: the whole sequence
  int seqlen = 0;                   // dense: every sequence's; varlen: the longest (the tile grid)
  int total = 0;                    // varlen: rows of the packed tensor
  int const* leftpad = nullptr;     // (batch); null: none. The rows before it do not count

  struct Sequence {
    int offset;  // first row in the tensor's token dimension
    int length;
  };

  WF_HOST_DEVICE bool packed() const { return cu_seqlens != nullptr; }
  // Every sequence seqlen long at its own batch index.
  WF_HOST_DEVICE bool uniform() const { return cu_seqlens == nullptr && seqused == nullptr && leftpad == nullptr; }
  // The batch coordinate of a sequence in the tensor: packed sequences share batch 0.
  WF_HOST_DEVICE int batch_coord(int batch) const { return packed() ? 0 : batch; }

  // Clamped so that no row outside the tensor and the tile grid is ever read or written,
  // whatever cu_seqlens, seqused and leftpad hold (inconsistent values give wrong results,
  // never out-of-bounds accesses). kLeftPadding: the kernels that take a left padding (the
  // KV-cache ones); in the others the offset's load and clamp spilled 24-register producers.
  template <bool kLeftPadding = false>
  WF_HOST_DEVICE Sequence of(int batch) const {
    int offset = 0, length = seqlen;
    if (packed()) {
      int begin = cu_seqlens[batch], end = cu_seqlens[batch + 1];
      offset = begin < 0 ? 0 : (begin > total ? total : begin);
      end = end > total ? total : end;
      length = end - offset < 0 ? 0 : end - offset;
      length = length < seqlen ? length : seqlen;
    }
    if (seqused != nullptr) {
      int used = seqused[batch];
      used = used < 0 ? 0 : used;
      length = used < length ? used : length;
    }
    if constexpr (kLeftPadding) {
      if (leftpad != nullptr) {  // the sequence is rows [leftpad, length) of its span
        int pad = leftpad[batch];
        pad = pad < 0 ? 0 : (pad > length ? length : pad);
        offset += pad;
        length -= pad;
      }
    }
    return Sequence{offset, length};
  }
};

}  // namespace warpflash::kernels
