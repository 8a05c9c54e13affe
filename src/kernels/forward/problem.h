// Host side: what the forward kernels make of ForwardArgs' masking and sequence options
// (shared by the launcher, validation and the choice of kernel).
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/attention/mask.h"
#include "kernels/attention/split_kv.h"
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

// The most keys one query row sees: seqlen_k, or the span of a window bounded on both
// sides (causal included) or of a chunk when shorter (forward_variant() takes d=128's
// long tiles only for long spans).
inline int64_t longest_key_span(ForwardArgs const& args) {
  AttentionMask mask = forward_mask(args).mask;
  int64_t span = args.shape.seqlen_k;
  if (mask.window_left < AttentionMask::kUnbounded && mask.window_right < AttentionMask::kUnbounded) {
    span = std::min<int64_t>(span, int64_t(mask.window_left) + mask.window_right + 1);
  }
  if (mask.chunk > 0) span = std::min<int64_t>(span, mask.chunk);
  return span;
}

// The workspace of the dynamic tile order (dynamic_tile_order below): one counter.
constexpr size_t kTileCounterBytes = 16;

// Causal problems in dynamic order take their tiles in sections of heads whose K/V blocks
// fit in this much of L2 together (ForwardTileScheduler::plan_sections). H100's 50 MB hold
// about 25 MB of data that every SM reads (ncu's DRAM bytes match an LRU model of that
// size, docs/perf-notes.md); 16 MB leaves room for Q and O passing through.
constexpr int64_t kL2SectionBytes = int64_t(16) << 20;

// Heads (times batch) per section: the query heads that read kL2SectionBytes of K/V, at
// least one. The heads of one K/V head are adjacent, so they share its bytes.
inline int heads_per_l2_section(ForwardArgs const& args, int64_t element_bytes) {
  const AttentionShape& shape = args.shape;
  int64_t kv_bytes = shape.seqlen_k * (shape.head_dim + shape.value_head_dim()) * element_bytes;
  int64_t per_query_head = std::max<int64_t>(kv_bytes * shape.heads_kv / shape.heads_q, 1);
  return static_cast<int>(std::clamp<int64_t>(kL2SectionBytes / per_query_head, 1, int64_t(1) << 30));
}

// Dense sequences, all seqlen long, K/V rows at their batch index: no cu_seqlens, no
// seqused, no page table, no left padding.
inline bool dense_equal_lengths(ForwardArgs const& args) {
  return args.cu_seqlens_q == nullptr && args.cu_seqlens_k == nullptr && args.seqused_q == nullptr &&
         args.seqused_k == nullptr && args.page_table == nullptr && args.leftpad_k == nullptr;
}

// Tiles of unequal cost: sequences of different lengths, or a window's or chunk's left
// bound (a tile near a sequence's start sees fewer keys). They take the dynamic tile order
// where the caller gives a workspace (launch.h); its first word is the tile counter.
inline bool unequal_tiles(ForwardArgs const& args) {
  return !dense_equal_lengths(args) || forward_mask(args).mask.has_left_bound();
}
// The dynamic tile order: tiles of unequal cost, and causal ones (a tile's keys grow with
// its m_block; the static order left the SMs idle 3.1-3.5% of causal d = 128 4k / 8k
// against FlashAttention-3's 1.0-1.5% with its atomic counter, ncu), which also take
// their tiles in L2-sized sections of heads (kL2SectionBytes).
inline bool dynamic_tile_order(ForwardArgs const& args) {
  return unequal_tiles(args) || forward_mask(args).mask.has_right_bound();
}

// K's and V's tensors as (batch, rows): a packed side is one batch of total_k rows, a
// paged cache num_pages pages of page_size rows, a cache indexed per sequence
// (kv_batch_idx) kv_batch sequences.
struct KvExtent {
  int64_t batch;
  int64_t rows;
};
inline KvExtent kv_extent(ForwardArgs const& args) {
  if (args.cu_seqlens_k != nullptr) return {1, args.total_k};
  if (args.page_table != nullptr) return {args.num_pages, args.page_size};
  return {args.kv_batch_idx != nullptr ? args.kv_batch : args.shape.batch, args.shape.seqlen_k};
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

// How forward() runs a problem besides the kernel it picks (api/forward.cpp plans it).
struct ForwardPlan {
  // Packed GQA: the query heads of a K/V head as the rows of one tile (packed_gqa_view),
  // so that each K/V block is read once for all of them, not once per query head.
  int pack = 1;
  // Split-KV (split_kv.h): pieces per tile (the caller's num_splits), or runs over this
  // many CTAs (split_workers > 0, num_splits = 0).
  int splits = 1;
  int split_workers = 0;
  // Packed GQA with several query positions: Q as the caller laid it out (the consumers
  // load its rows; data null otherwise), and one query head's stride in O.
  TensorView4d q_rows{};
  int64_t o_head_stride = 0;
  bool split() const { return splits > 1 || split_workers > 0; }
  bool plain() const { return pack == 1 && !split(); }
};

// Packed GQA: several query heads per K/V head, dense queries, nothing per query head
// that a tile's rows would need (sinks), 16-bit inputs (FP8's decode is not packed yet),
// and rows that fill tiles better packed than not (FlashAttention-3's rule: seqlen_q
// rows of a 128-row tile used below 90% of the packed rows' use; always for decode).
inline int pack_gqa_factor(ForwardArgs const& args) {
  AttentionShape const& s = args.shape;
  if (s.heads_q <= s.heads_kv || s.seqlen_q == 0 || args.cu_seqlens_q != nullptr || args.seqused_q != nullptr ||
      args.learnable_sink != nullptr || args.dtype == DType::kFloat8E4M3) {
    return 1;
  }
  int64_t pack = s.heads_q / s.heads_kv, rows = s.seqlen_q * pack;
  auto use = [](int64_t n) { return double(n) / double((n + 127) / 128 * 128); };
  return use(s.seqlen_q) < 0.9 * use(rows) ? static_cast<int>(pack) : 1;
}

// The arguments as the kernel sees them with `pack` query heads per K/V head: heads_kv
// heads of seqlen_q * pack rows, row p being position p / pack of query head
// head * pack + p % pack. With one position Q (batch, 1, heads_q, d) is the same memory
// as (batch, pack, heads_kv, d), which TMA loads; with several, q only describes the
// positions and heads (the consumers load the rows: ForwardPlan::q_rows). O likewise.
// The LSE (batch, heads_q, seqlen_q) is (batch, heads_kv, pack * seqlen_q) with row p at
// p / pack + (p % pack) * seqlen_q.
inline ForwardArgs packed_gqa_view(ForwardArgs const& args, int pack) {
  ForwardArgs view = args;
  view.shape.seqlen_q = args.shape.seqlen_q * pack;
  view.shape.heads_q = args.shape.heads_kv;
  bool one_position = args.shape.seqlen_q == 1;
  view.q = TensorView4d{args.q.data, args.q.batch_stride, one_position ? args.q.head_stride : args.q.seqlen_stride,
                        args.q.head_stride * pack};
  view.o = TensorView4d{args.o.data, args.o.batch_stride, one_position ? args.o.head_stride : args.o.seqlen_stride,
                        args.o.head_stride * pack};
  return view;
}

// Split-KV needs dense queries (the merge writes rows of a dense O), no sinks (each piece
// would count the sink once) and 16-bit inputs (FP8 is not split yet).
inline bool split_kv_allowed(ForwardArgs const& args) {
  return args.cu_seqlens_q == nullptr && args.seqused_q == nullptr && args.learnable_sink == nullptr &&
         args.dtype != DType::kFloat8E4M3;
}

// How to split when the caller leaves it to us (num_splits = 0): not while the tiles fill
// most SMs; otherwise `splits` equal pieces per tile, as many as one round of CTAs takes
// (tiles x pieces <= SMs), each at least kMinSplitBlocks K/V blocks long. More rounds only
// add pieces to merge: decode batch 1 kv 128k (8 tiles) took 132.7 us with 16 pieces,
// 138.8 with 33, 140.6 with 15 (H200, docs/perf-notes.md). Decode reads the cache at the
// DRAM's rate from about 96 CTAs on (4.11 TB/s), not with 72 (3.45): where one piece a tile
// is all that fits and fewer than 60% of the SMs would read, the tiles' blocks go in equal
// runs to every SM instead (split_kv.h; batch 9 x 8 K/V heads, 72 tiles: 87.6 -> 82.1 us).
// Not beyond: runs offset the rows that the heads read at once, and lost 6-7% at 96 and 112
// tiles and 3-4% against 16 pieces of 8 tiles (docs/perf-notes.md). `n_blocks`: the K/V
// blocks of the longest tile.
constexpr int kMaxSplits = 128;
constexpr int kMinSplitBlocks = 2;
struct SplitChoice {
  int splits = 1;   // fixed pieces per tile
  int workers = 0;  // or runs over this many CTAs (split_kv.h)
};
// `runs`: whether the kernel has them (split_runs_compiled).
inline SplitChoice choose_split(int64_t tiles, int64_t n_blocks, int sm_count, bool runs = true) {
  if (tiles <= 0 || sm_count <= 0 || tiles * 5 >= int64_t(sm_count) * 4) return {};
  int64_t most = std::min<int64_t>(kMaxSplits, n_blocks / kMinSplitBlocks);
  int splits = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(most, sm_count / tiles)));
  bool few_readers = splits == 1 && tiles * 2 > sm_count && tiles * 5 < int64_t(sm_count) * 3;
  // Runs at least kMinSplitBlocks long, and workers x blocks within FastDivmod's 2^31.
  if (runs && few_readers && tiles * n_blocks >= int64_t(kMinSplitBlocks) * sm_count &&
      int64_t(sm_count) * n_blocks < (int64_t(1) << 31)) {
    return {1, sm_count};
  }
  return {splits, 0};
}

// Split-KV's workspace: the tile counter, then a slot per piece.
inline size_t split_kv_workspace_bytes(ForwardArgs const& args, ForwardPlan const& plan, int block_m) {
  int64_t tiles = (args.shape.seqlen_q + block_m - 1) / block_m * args.shape.heads_q * args.shape.batch;
  int64_t pieces = plan.split_workers > 0 ? 2 * int64_t(plan.split_workers) : tiles * plan.splits;
  return kTileCounterBytes + size_t(pieces) * split_kv_slot_floats(block_m, int(args.shape.value_head_dim())) * sizeof(float);
}

}  // namespace warpflash::kernels
