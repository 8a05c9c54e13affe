// The order of the fp32 dQ accumulator inside each query tile (block_m x head_dim floats,
// contiguous in the workspace): the consumer warpgroups' dQ WGMMA fragments as they hold
// them, 16 bytes a thread at a time (FlashAttention-4's dQ handoff). A warpgroup's part
// then leaves its registers with one 16-byte store per four values at consecutive
// addresses (no swizzle to compute) and shared memory with one bulk reduce-add of
// contiguous bytes; the postprocess puts the elements back in place. Shared by host and
// device: the main kernel (kernel.h, dq_writer.h), the postprocess and their tests.
#pragma once

#include "kernels/attention/host_device.h"
#include "kernels/backward/config.h"

namespace warpflash::kernels {

struct BackwardDqOrder {
  // How the two consumer warpgroups share a dQ tile (traits.h): each its half of the
  // columns, or its 64 of the 128 rows (d = 64), or the whole tile from its own keys with
  // both parts added into the same floats (d = 96), or (kTransposed, d = 128's 80-row
  // tiles) dQ^T = K^T dS^T, each 64 of the head dim by all queries.
  enum class Split { kColumns, kRows, kKeys, kTransposed };
  Split split;
  int gemm_n;  // N of each warpgroup's 64 x N dQ GEMM

  WF_HOST_DEVICE static constexpr BackwardDqOrder of(int head_dim) {
    int block_m = backward_block_m(head_dim);
    if (block_m % 64 != 0) return {Split::kTransposed, block_m};
    if (head_dim % 64 != 0) return {Split::kKeys, head_dim};
    if (block_m == 128) return {Split::kRows, head_dim};
    return {Split::kColumns, head_dim / 2};
  }

  // A warpgroup's part: 64 x gemm_n floats, its 128 threads' values in vectors of four,
  // vector j of thread t at float 512 j + 4 t.
  WF_HOST_DEVICE constexpr int part_floats() const { return 64 * gemm_n; }
  WF_HOST_DEVICE constexpr int parts() const { return split == Split::kKeys ? 1 : 2; }

  // Where value k (0-3) of the tile's float vector `vector` goes in the tile. A WGMMA
  // accumulator's value i sits at row 16 warp + lane / 4 + 8 (i / 2 % 2) and column
  // 8 (i / 4) + 2 (lane % 4) + i % 2 of its 64 x N tile; vector j holds i = 4 j + k.
  WF_HOST_DEVICE constexpr void element(int vector, int k, int& row, int& column) const {
    int part = vector / (part_floats() / 4), within = vector % (part_floats() / 4);
    int j = within / 128, thread = within % 128, warp = thread / 32, lane = thread % 32;
    int m = 16 * warp + lane / 4 + 8 * (k / 2), n = 8 * j + 2 * (lane % 4) + k % 2;
    switch (split) {
      case Split::kColumns: row = m, column = part * gemm_n + n; break;
      case Split::kRows: row = 64 * part + m, column = n; break;
      case Split::kKeys: row = m, column = n; break;
      case Split::kTransposed: row = n, column = 64 * part + m; break;
    }
  }
};

}  // namespace warpflash::kernels
