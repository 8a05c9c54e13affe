// Which (m_block, head, batch) tile a CTA computes: pure index arithmetic.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace warpflash::kernels {

struct TileCoord {
  int m_block;
  int head;
  int batch;
};

// One CTA per tile, m_block fastest so that CTAs running together share K/V in L2.
// With a causal mask the bottom rows see the most keys: they go first, so the short
// tiles fill the tail of the launch.
struct ForwardTileScheduler {
  int num_m_blocks = 0;
  int heads = 0;
  int batch = 0;
  bool longest_first = false;

  WF_HOST_DEVICE static int m_blocks_for(int64_t seqlen_q, int block_m) {
    return static_cast<int>((seqlen_q + block_m - 1) / block_m);
  }

  WF_HOST_DEVICE int64_t num_tiles() const {
    return static_cast<int64_t>(num_m_blocks) * heads * batch;
  }

  WF_HOST_DEVICE TileCoord tile(int64_t linear) const {
    int m_block = static_cast<int>(linear % num_m_blocks);
    int64_t head_batch = linear / num_m_blocks;
    TileCoord coord{m_block, static_cast<int>(head_batch % heads), static_cast<int>(head_batch / heads)};
    if (longest_first) coord.m_block = num_m_blocks - 1 - m_block;
    return coord;
  }
};

}  // namespace warpflash::kernels
