// Tile sizes of the forward kernel per head dim, shared by host and device code.
#pragma once

#include <cstdint>

namespace warpflash::kernels {

// Ablation switches: each FlashAttention-3 technique can be compiled out
// (CMake -DWARPFLASH_ABLATE=...) to measure what it is worth (docs/perf-notes.md).
#if defined(WARPFLASH_ABLATE_INTRA_WARPGROUP_OVERLAP)
constexpr bool kIntraWarpgroupOverlap = false;
#else
constexpr bool kIntraWarpgroupOverlap = true;
#endif
#if defined(WARPFLASH_ABLATE_WARP_SPECIALIZATION)
constexpr bool kWarpSpecialization = false;
#else
constexpr bool kWarpSpecialization = true;
#endif
#if defined(WARPFLASH_ABLATE_PINGPONG)
constexpr bool kPingpong = false;
#else
constexpr bool kPingpong = true;
#endif

struct ForwardTileConfig {
  int block_m;              // query rows per CTA (64 per consumer warpgroup)
  int block_n;              // key rows per K/V tile
  int stages;               // K/V tiles in flight in shared memory
  int consumer_warpgroups;  // warpgroups that run WGMMA and softmax
  // Q tiles in shared memory: with two the producer loads the next tile's Q while the
  // consumers still read this one, so short tiles do not wait for Q after every epilogue.
  int q_stages = 2;
  // CTAs per cluster along M: with two, the CTAs of a cluster compute neighbouring Q tiles
  // of one head and each loads half of every K/V block with a TMA multicast to both, so
  // L2 serves each block once per pair (non-causal only: both tiles need the same blocks).
  int cluster_m = 1;
  // Non-causal launches whose tiles do not divide evenly among the CTAs split the last
  // round's tiles along the keys (split_tail.h), when the caller gives a workspace.
  bool split_tail = false;
};

// Chosen by measurement on the H200 (docs/perf-notes.md, "Tile sizes"):
// - d=64: 192 query rows in three consumer warpgroups (160 registers each suffice for
//   the small S and O accumulators); +7-22% over 128 x 128 except short causal problems.
// - d=128: 128 x 128; 128 x 160 / 176 gain 2-4% at 8k-16k but lose 7-25% below 4k.
// - d=96: 128 x 128 as d=128 (FA3 runs 192 x 144 with P through shared memory; our P
//   stays in registers, and three 160-register consumer warpgroups would not hold S, O and P).
// - d=192: 128 x 112 with one Q buffer (128 x 128 when d_v = 128): Q, two stages of K and
//   V fill 216 KB (208 KB); no room for an O buffer, O leaves from registers.
// - d=256: 128 x 80 with one Q buffer: a 128x256 Q tile, two stages of K and V and the
//   fp32 O accumulator (128 registers a thread) fill 224 KB of shared memory and the
//   consumers' 240 registers (spill-free only since the consumers keep one pipeline state,
//   no tile counter and recompute the tile's coordinates); 5-20% faster than 128 x 64
//   from 1k keys.
// WARPFLASH_TILES_D<key> (CMake -DWARPFLASH_TILES=...) overrides a kernel's tiles for
// experiments timed by scripts/compare_builds.sh.
#define WARPFLASH_TILES_OVERRIDE(key)                                                        \
  ForwardTileConfig {                                                                        \
    WARPFLASH_TILES_D##key##_M, WARPFLASH_TILES_D##key##_N, WARPFLASH_TILES_D##key##_STAGES, \
        WARPFLASH_TILES_D##key##_WARPGROUPS, WARPFLASH_TILES_D##key##_Q_STAGES               \
  }
// Second kernels per head dim, chosen by problem size (docs/perf-notes.md):
// - kShortCausal, d=64 causal problems up to 2k queries: 128 x 128 tiles with two
//   consumer warpgroups; +27% at causal 512-1k and +4% at 2k over 192-row tiles, -9% at 8k.
//   Also every d=64 problem of at most 128 query rows (decode's packed heads): a 192-row
//   tile would leave at least a third of its rows empty, and only two-warpgroup kernels
//   skip the GEMMs of a warpgroup without rows (kernel.h).
// - kLong, d=128 with at least 8k keys: 128 x 160 tiles (one Q buffer, so that the K/V
//   ring and the O buffer fit); +2-9% at 8k-16k, -7-14% below 4k.
// - kShort, d=256 with at most 1k keys (8k causal): 128 x 64 tiles, O leaving through the
//   Q buffer (TMA-store epilogue; no room for an O buffer of its own). Over 128 x 80 (O
//   stored from registers) +15% at 512 and +2% at 1k, +25% / +12% at causal 512 / 1k,
//   +4% at causal 2k, +3.5% at causal 4k and 8k, within +-1% at causal 16k; over
//   128 x 48 with an O buffer +2% at 512 and +4% at causal 2k, -2.5% at causal 512.
// - kLongClustered, d=128 without a causal mask, at least 4k keys and an even number of
//   128-row m-blocks (a cluster computes two neighbouring ones): the long tiles (128 x 160)
//   in clusters of two CTAs that multicast each K/V block, halving what L2 serves; +2% at
//   16k, +1.7% at 4k; clustered 128 x 128 tiles lost 1% at 1k-2k, where L2 keeps up.
//   (d=256's, +3.5% at 16k non-causal, made room in the kernel budget for the FP8
//   kernels: docs/perf-notes.md.)
enum class ForwardVariant { kDefault, kShortCausal, kLong, kShort, kLongClustered };
constexpr const char* forward_variant_name(ForwardVariant variant) {
  constexpr const char* kNames[] = {"default", "short causal", "long", "short", "long clustered"};
  return kNames[static_cast<int>(variant)];
}
// The loops an instance compiles (kernels.manifest): the plain one (CausalMask) for dense
// equal-length problems with no mask or a causal one and no softcap, the general one
// (AttentionMask) for all problems. Each loop is a kernel of its own, so lines that only
// speed up the plain problems compile only that one.
enum ForwardLoops { kPlainLoop = 1, kGeneralLoop = 2, kBothLoops = 3 };
constexpr int kShortCausalMaxSeqlen = 2048;
constexpr int kShortMaxRowsD64 = 128;
constexpr int kLongMinSeqlenK = 8192;
constexpr int kClusteredMinSeqlenK = 4096;  // causal 4k lost 2% with the (unclustered) long tiles
// d=128's long tiles also need rows that see this many keys: a sliding window or chunk
// spanning fewer runs the default tiles (H200, causal 16k, windows 128 / 1024 / 2048:
// +23% / +5% / +1%; at 4096 the long tiles are 2% faster; docs/perf-notes.md).
constexpr int kLongMinKeySpan = 4096;
constexpr int kShortMaxSeqlenK = 1024;
constexpr int kShortMaxSeqlenKCausal = 8192;
constexpr int kClusteredBlockM = 128;
// uniform_tiles: dense equal-length sequences and no mask (problem.h), the only problems
// the clustered kernels take; for varlen the lengths are the longest sequences'.
// key_span: the most keys one query row sees (a window's or chunk's span; problem.h's
// longest_key_span), seqlen_k or more without either.
constexpr ForwardVariant forward_variant(int head_dim, bool causal, int64_t seqlen_q, int64_t seqlen_k,
                                         bool uniform_tiles = true, int64_t key_span = INT64_MAX) {
  if (head_dim == 64 && seqlen_q <= (causal ? kShortCausalMaxSeqlen : kShortMaxRowsD64)) {
    return ForwardVariant::kShortCausal;
  }
  bool even_m_blocks = (seqlen_q + kClusteredBlockM - 1) / kClusteredBlockM % 2 == 0;
  if (head_dim == 128 && !causal && uniform_tiles && seqlen_k >= kClusteredMinSeqlenK && even_m_blocks) {
    return ForwardVariant::kLongClustered;
  }
  if (head_dim == 128 && seqlen_k >= kLongMinSeqlenK && key_span >= kLongMinKeySpan) return ForwardVariant::kLong;
  if (head_dim == 256 && seqlen_k <= (causal ? kShortMaxSeqlenKCausal : kShortMaxSeqlenK)) return ForwardVariant::kShort;
  return ForwardVariant::kDefault;
}

// Split-KV's runs (split_kv.h) add arithmetic to every tile's block range: d = 192 / 192's
// consumers spilled 8 bytes with it, so their splits stay equal pieces per tile.
constexpr bool split_runs_compiled(int head_dim, int head_dim_v) { return !(head_dim == 192 && head_dim_v == 192); }

// FP8 (e4m3 Q, K, V; the general loop): 128 x 128 tiles, K, V and the V^T copy in two
// stages each; d=256 128 x 64 (with 128 keys its consumers would hold 208 registers of
// accumulators and P, and V^T leaves no room for the O buffer). d=128's kLong, from 2k
// keys: 128 x 192 (FlashAttention-3 runs 128 x 224): half the O rescales and block
// overheads per score, +10-20% at 4k-16k, +12% / +6% at 2k (causal), but -2% at 1k and
// -14% at causal 1k on an H100 (docs/perf-notes.md). Not with K or V scales per 128 rows,
// which a 192-key block crosses.
// d=64: 192 x 128 in three consumer warpgroups (FlashAttention-3 runs 192 x 160): more
// softmax in flight beside the short GEMMs, whose exponentials bound d=64. Over 128 x 128
// (H100): +11-39% non-causal, +3-33% causal from 2k, but -12% / -10% at causal 512 / 1k
// (a third more masked scores), where the budget leaves no second d=64 FP8 kernel
// (docs/perf-notes.md).
constexpr int kFp8LongMinSeqlenK = 2048;
constexpr ForwardVariant forward_variant_fp8(int head_dim, int64_t seqlen_k, int64_t key_span,
                                             bool kv_scales_per_128_rows) {
  bool is_long = head_dim == 128 && seqlen_k >= kFp8LongMinSeqlenK && key_span >= kFp8LongMinSeqlenK;
  return is_long && !kv_scales_per_128_rows ? ForwardVariant::kLong : ForwardVariant::kDefault;
}
constexpr ForwardTileConfig forward_tile_config_fp8(int head_dim, ForwardVariant variant) {
  if (variant == ForwardVariant::kLong) return ForwardTileConfig{128, 192, 2, 2};
  if (head_dim == 64) return ForwardTileConfig{192, 128, 2, 3};
  return head_dim == 256 ? ForwardTileConfig{128, 64, 2, 2} : ForwardTileConfig{128, 128, 2, 2};
}

constexpr ForwardTileConfig forward_tile_config(int head_dim, int head_dim_v,
                                                ForwardVariant variant = ForwardVariant::kDefault, bool fp8 = false) {
  if (fp8) return forward_tile_config_fp8(head_dim, variant);
#if defined(WARPFLASH_TILES_D64C)
  if (variant == ForwardVariant::kShortCausal) return WARPFLASH_TILES_OVERRIDE(64C);
#endif
  if (variant == ForwardVariant::kShortCausal) return ForwardTileConfig{128, 128, 2, 2};
  if (variant == ForwardVariant::kLong) return ForwardTileConfig{128, 160, 2, 2, /*q_stages=*/1};
  if (variant == ForwardVariant::kLongClustered) {
    return ForwardTileConfig{128, 160, 2, 2, /*q_stages=*/1, /*cluster_m=*/2, /*split_tail=*/true};
  }
  if (variant == ForwardVariant::kShort) return ForwardTileConfig{128, 64, 2, 2, /*q_stages=*/1};
#if defined(WARPFLASH_TILES_D64)
  if (head_dim == 64) return WARPFLASH_TILES_OVERRIDE(64);
#endif
#if defined(WARPFLASH_TILES_D96)
  if (head_dim == 96) return WARPFLASH_TILES_OVERRIDE(96);
#endif
#if defined(WARPFLASH_TILES_D128)
  if (head_dim == 128) return WARPFLASH_TILES_OVERRIDE(128);
#endif
#if defined(WARPFLASH_TILES_D256)
  if (head_dim == 256) return WARPFLASH_TILES_OVERRIDE(256);
#endif
  if (head_dim == 64) return ForwardTileConfig{192, 128, 2, 3};
  if (head_dim == 96) return ForwardTileConfig{128, 128, 2, 2};
  if (head_dim == 192) return ForwardTileConfig{128, head_dim_v <= 128 ? 128 : 112, 2, 2, /*q_stages=*/1};
  return head_dim == 128 ? ForwardTileConfig{128, 128, 2, 2} : ForwardTileConfig{128, 80, 2, 2, /*q_stages=*/1};
}
#undef WARPFLASH_TILES_OVERRIDE

}  // namespace warpflash::kernels
