// Host side: what the forward kernels make of ForwardArgs' masking and sequence options
// (shared by the launcher, validation and the choice of kernel).
#pragma once

#include "kernels/attention/mask.h"
#include "warpflash/forward.h"

namespace warpflash::kernels {

struct ForwardMask {
  AttentionMask mask;  // window and chunk; the sequence lengths are set per tile
  // Tiles cost more the further down they are (causal without a left bound): the tile
  // scheduler pairs and orders them by cost (tile_scheduler.h).
  bool causal_order;
};

// causal is window_right = 0 (FlashAttention's rule). Bounds at least as long as every
// sequence limit nothing and become kUnbounded, which keeps the kernels' index arithmetic
// in 32 bits (validated: window sizes >= -1, chunk < 2^30).
inline ForwardMask forward_mask(ForwardArgs const& args) {
  int64_t left = args.window_left, right = args.causal ? 0 : args.window_right;
  AttentionMask mask;
  if (left >= 0 && left < args.shape.seqlen_k) mask.window_left = static_cast<int>(left);
  if (right >= 0 && right < args.shape.seqlen_q) mask.window_right = static_cast<int>(right);
  mask.set_chunk(static_cast<int>(args.attention_chunk), static_cast<int>(args.shape.seqlen_q));
  bool causal_order = mask.window_right == 0 && !mask.has_left_bound();
  return ForwardMask{mask, causal_order};
}

// The workspace of the dynamic tile order (sequences of different lengths): one counter.
constexpr size_t kTileCounterBytes = 16;

// Dense sequences, all seqlen long: no cu_seqlens, no seqused.
inline bool dense_equal_lengths(ForwardArgs const& args) {
  return args.cu_seqlens_q == nullptr && args.cu_seqlens_k == nullptr && args.seqused_q == nullptr &&
         args.seqused_k == nullptr;
}

// Dense equal-length sequences without a mask: every tile visits every K/V block. Only
// such problems may run on the clustered kernels (both CTAs of a cluster need the same
// blocks) and split their last round. Not with sinks either: a split tile's pieces would
// each count the sink (the merge does not add it). Nor with softcap: then every uniform
// problem is a plain one, and the clustered instances compile only the plain loop.
inline bool uniform_tiles(ForwardArgs const& args) {
  AttentionMask mask = forward_mask(args).mask;
  return dense_equal_lengths(args) && !mask.has_left_bound() && !mask.has_right_bound() &&
         args.learnable_sink == nullptr && !(args.softcap > 0.f);
}

// Dense equal-length sequences, no mask or a causal one (no left bound, no chunk, right
// bound 0 or none) and no softcap: the kernels run their plain loop (CausalMask).
inline bool plain_problem(ForwardArgs const& args) {
  AttentionMask mask = forward_mask(args).mask;
  bool causal_or_none = !mask.has_left_bound() && (mask.window_right == 0 || !mask.has_right_bound());
  return dense_equal_lengths(args) && causal_or_none && !(args.softcap > 0.f);
}

}  // namespace warpflash::kernels
