// Tile sizes of the forward kernel per head dim, shared by host and device code.
#pragma once

namespace warpflash::kernels {

// Ablation switches: each FlashAttention-3 technique can be compiled out
// (CMake -DWARPFLASH_ABLATE=...) to measure what it is worth (docs/perf-notes.md).
#if defined(WARPFLASH_ABLATE_INTRA_WARPGROUP_OVERLAP)
constexpr bool kIntraWarpgroupOverlap = false;
#else
constexpr bool kIntraWarpgroupOverlap = true;
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
};

// Chosen by measurement on the H200 (docs/perf-notes.md, "Tile sizes").
// d=256: a 128x256 Q tile, two stages of K and V and the fp32 O accumulator (128
// registers a thread) must fit 227 KB of shared memory and 240 registers.
// WARPFLASH_TILES_D<d> (CMake -DWARPFLASH_TILES=...) overrides a head dim's tiles for
// experiments timed by scripts/compare_builds.sh.
constexpr ForwardTileConfig forward_tile_config(int head_dim) {
#if defined(WARPFLASH_TILES_D64)
  if (head_dim == 64) return ForwardTileConfig{WARPFLASH_TILES_D64_M, WARPFLASH_TILES_D64_N, WARPFLASH_TILES_D64_STAGES, WARPFLASH_TILES_D64_WARPGROUPS};
#endif
#if defined(WARPFLASH_TILES_D128)
  if (head_dim == 128) return ForwardTileConfig{WARPFLASH_TILES_D128_M, WARPFLASH_TILES_D128_N, WARPFLASH_TILES_D128_STAGES, WARPFLASH_TILES_D128_WARPGROUPS};
#endif
#if defined(WARPFLASH_TILES_D256)
  if (head_dim == 256) return ForwardTileConfig{WARPFLASH_TILES_D256_M, WARPFLASH_TILES_D256_N, WARPFLASH_TILES_D256_STAGES, WARPFLASH_TILES_D256_WARPGROUPS};
#endif
  return head_dim <= 128 ? ForwardTileConfig{128, 128, 2, 2} : ForwardTileConfig{128, 64, 2, 2};
}

}  // namespace warpflash::kernels
