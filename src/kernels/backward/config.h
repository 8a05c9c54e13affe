// Tile sizes of the backward kernels per head dim, shared by host and device code.
#pragma once

namespace warpflash::kernels {

// Query rows per tile of the main backward kernel, which the pre- and postprocess and the
// workspace's padding follow: FlashAttention-3's tiles (docs/backward-plan.md), 64 x 128 at
// d = 96, 80 x 128 at d = 128 and 128 x 128 at d = 64, where 64 queries made every GEMM
// short (N = 64, dQ's N = 32) and each tile's fixed costs (barriers, the dQ handoff) weigh
// twice as much. 80 rows are not a multiple of a warpgroup's 64-row WGMMA: d = 128 computes
// dQ transposed (traits.h's kDqTransposed).
constexpr int backward_block_m(int head_dim) { return head_dim == 64 ? 128 : head_dim == 128 ? 80 : 64; }

// Up to d = 128 each consumer warpgroup owns half of a 128-key block, with its dK and dV
// in registers ((d + d_v) / 2 a thread). Wider heads do not fit that: 64 x 64 tiles
// (FlashAttention-4 beta27's at d = 256; 4.0.0b36 runs 64 x 48), where the warpgroups
// split the head dim of dK, dV and dQ and the queries of S^T and dP^T, with P and dS
// exchanged through shared memory.
constexpr bool backward_splits_head_dim(int head_dim) { return head_dim > 128; }
constexpr int backward_block_n(int head_dim) { return backward_splits_head_dim(head_dim) ? 64 : 128; }

}  // namespace warpflash::kernels
