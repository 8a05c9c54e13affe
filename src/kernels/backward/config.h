// Tile sizes of the backward kernels per head dim, shared by host and device code.
#pragma once

namespace warpflash::kernels {

// Query rows per tile of the main backward kernel, which the pre- and postprocess and the
// workspace's padding follow: FlashAttention-3's 64 x 128 tiles for d = 128 to start with
// (docs/backward-plan.md), the first configuration the main kernel will run.
constexpr int backward_block_m(int /*head_dim*/) { return 64; }

}  // namespace warpflash::kernels
