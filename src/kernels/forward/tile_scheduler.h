// Which (m_block, head, batch) tiles each CTA of the persistent kernel computes: pure
// index arithmetic, static (no global counter, so concurrent launches and CUDA graphs
// need no workspace).
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace warpflash::kernels {

struct TileCoord {
  int m_block;
  int head;
  int batch;
};

// CTAs take tiles in rounds of gridDim.x.
// - Without a causal mask every tile costs the same: m_block runs fastest, so the CTAs
//   of a round share the K/V of a few heads in L2.
// - With a causal mask the bottom rows see the most keys. Tiles are ordered longest
//   first (m_block slowest) and dealt like a snake: even rounds left to right, odd rounds
//   right to left, so the CTA that got a round's longest tile gets the next round's
//   shortest. A plain stride gave some CTAs twice the work of others (docs/perf-notes.md).
//   Short problems may keep m_block fastest instead (choose_causal_order).
struct ForwardTileScheduler {
  int num_m_blocks = 0;
  int heads = 0;
  int batch = 0;
  bool causal = false;
  bool causal_m_fastest = false;  // set by choose_causal_order

  WF_HOST_DEVICE static int m_blocks_for(int64_t seqlen_q, int block_m) {
    return static_cast<int>((seqlen_q + block_m - 1) / block_m);
  }

  WF_HOST_DEVICE int64_t num_tiles() const {
    return static_cast<int64_t>(num_m_blocks) * heads * batch;
  }

  // Short causal problems (a few m-blocks per head, many heads) may keep m_block fastest,
  // longest first within each head: a head's K/V is then read by CTAs of the same round
  // and stays in L2. The snake still balances this order when 2 * ctas is a multiple of
  // the m-blocks (a CTA's tiles of two rounds add up to num_m_blocks + 1 blocks) and
  // there are a few full rounds. Measured (docs/perf-notes.md): it helps 128-row tiles
  // (d=128/256 causal 512-1k: +14-22%) and cost 192-row tiles 2-10%.
  WF_HOST_DEVICE void choose_causal_order(int ctas, int block_m) {
    causal_m_fastest = causal && block_m == 128 && num_m_blocks > 0 && num_m_blocks <= 12 &&
                       (2 * ctas) % num_m_blocks == 0 && num_tiles() >= 4 * ctas;
  }

  // The linear tile index `cta` (of `ctas`) computes in `round`; >= num_tiles() when done.
  WF_HOST_DEVICE int64_t tile_index(int cta, int ctas, int64_t round) const {
    bool reversed = causal && (round & 1);
    return round * ctas + (reversed ? ctas - 1 - cta : cta);
  }

  WF_HOST_DEVICE TileCoord tile(int64_t index) const {
    int m_block;
    int64_t head_batch;
    if (causal && !causal_m_fastest) {
      int64_t heads_batch = static_cast<int64_t>(heads) * batch;
      m_block = num_m_blocks - 1 - static_cast<int>(index / heads_batch);
      head_batch = index % heads_batch;
    } else {
      m_block = static_cast<int>(index % num_m_blocks);
      if (causal) m_block = num_m_blocks - 1 - m_block;
      head_batch = index / num_m_blocks;
    }
    return TileCoord{m_block, static_cast<int>(head_batch % heads), static_cast<int>(head_batch / heads)};
  }
};

}  // namespace warpflash::kernels
