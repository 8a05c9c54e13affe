// The backward's dQ writer (producer warp 1) and what it shares with the consumers: the
// named barriers of the backward kernel, the semaphore and bulk-copy helpers of the
// deterministic order.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/attention/dependent_launch.h"
#include "kernels/backward/traits.h"

namespace warpflash::kernels {

using namespace cute;

// Named barriers of the backward kernel (CUTLASS offsets them past its reserved IDs).
enum class BackwardBarrier : uint32_t {
  kDsFree = 0,  // one dS tile: every consumer is done with the previous tile's GEMMs that read dS (and P)
  kDsFull = 1,  // every consumer's part of dS is written
  kDqFull = 2,  // + consumer warpgroup: its part of the dQ tile is in shared memory
  kDqEmpty = 4,  // + consumer warpgroup: the reduce-add has read it (the buffer may be rewritten)
  kEpilogue = 6,  // the consumers: done with K and V (their buffers take dK and dV), then dK and dV written
};

CUTE_DEVICE int load_acquire(int const* address) {
  int value;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}
CUTE_DEVICE void store_release(int* address, int value) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
}
CUTE_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async;" ::: "memory"); }
CUTE_DEVICE void wait_bulk_groups_complete() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Adds `bytes` (a multiple of 16) of fp32 values from shared memory into global memory in
// one bulk operation (no tensor map: the bytes are contiguous at both ends).
CUTE_DEVICE void bulk_reduce_add(float* global, float const* shared, int bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(global),
               "r"(cute::cast_smem_ptr_to_uint(shared)), "r"(bytes)
               : "memory");
}

// A consumer warpgroup and the dQ writer warp meet at the kDqFull / kDqEmpty barriers.
constexpr int kDqSyncThreads = cutlass::NumThreadsPerWarpGroup + cutlass::NumThreadsPerWarp;

// Producer warp 1: adds every dQ tile the consumers leave in shared memory into the fp32
// accumulator, one warpgroup's part at a time, in the order the consumers compute them
// (FlashAttention-3's dQ writer; no atomics in the consumers' loop). A part is contiguous
// at both ends (fragment order, dq_order.h): one bulk reduce-add each, into its place in
// the tile, or with kDqSplitKeys both into the whole tile (FlashAttention-4's handoff). The
// last tile's buffer is not handed back: nobody waits for it.
// Deterministic mode: the K/V blocks that see a query tile add in descending order, each
// once the tile's semaphore counts the ones after it, and count themselves once their
// additions have completed. The CTAs of higher blocks start first (the kernel reverses the
// block order in this mode), so the wait ends; and under a causal mask they are the ones
// with the fewest query tiles, which start where the lower blocks will need them done
// (FlashAttention-3's order; ascending, the lowest block walked every query tile while the
// others waited for it: 0.46x of the default at d = 128 causal 8k).
template <class Traits>
CUTE_DEVICE void reduce_dq_tiles(typename Traits::Params const& params, typename Traits::SharedStorage& storage,
                                 AttentionMask const& mask, int n_block, int batch, int first_head, int group,
                                 int m_begin, int m_end) {
  BackwardWorkspace const& w = params.workspace;
  float* dq_accum = reinterpret_cast<float*>(params.workspace_base + w.dq_accum);
  wait_for_prerequisite();  // the preprocess has cleared the accumulator and the semaphores
  bool leader = cute::elect_one_sync();
  int tiles = group * (m_end - m_begin), tile = 0;
  int* dq_semaphore = reinterpret_cast<int*>(params.workspace_base + w.dq_semaphore);
#pragma unroll 1
  for (int head = first_head; head < first_head + group; ++head) {
    int64_t head_rows = w.head_first_row(params.seq_q, batch, head);  // a multiple of kBlockM
#pragma unroll 1
    for (int m_block = m_begin; m_block < m_end; ++m_block, ++tile) {
      int row_tile = int(head_rows / Traits::kBlockM) + m_block;
      int* semaphore = dq_semaphore + row_tile;
      float* tile_dq = dq_accum + (head_rows + int64_t(m_block) * Traits::kBlockM) * Traits::kHeadDim;
      int turn = mask.n_block_end(m_block, Traits::kBlockM, Traits::kBlockN) - 1 - n_block;
#pragma unroll
      for (int half = 0; half < Traits::kConsumerWarpgroups; ++half) {
        uint32_t full = static_cast<uint32_t>(BackwardBarrier::kDqFull) + half;
        uint32_t empty = static_cast<uint32_t>(BackwardBarrier::kDqEmpty) + half;
        cutlass::arch::NamedBarrier::sync(kDqSyncThreads, full);
        if (leader) {
          if (params.deterministic && half == 0) {
            while (load_acquire(semaphore) != turn) __nanosleep(32);
            fence_proxy_async();  // the additions before ours, then ours (async proxy)
          }
          bulk_reduce_add(tile_dq + (Traits::kDqSplitKeys ? 0 : half * Traits::kDqPartFloats),
                          storage.d_q.data() + half * Traits::kDqPartFloats, Traits::kDqPartFloats * sizeof(float));
          tma_store_arrive();
          bool last = half == Traits::kConsumerWarpgroups - 1;
          if (params.deterministic && last) {
            wait_bulk_groups_complete();  // every part added, not only read
            fence_proxy_async();
            store_release(semaphore, turn + 1);
          } else if (params.deterministic && Traits::kDqSplitKeys) {
            wait_bulk_groups_complete();  // parts that add into the same elements: in a fixed order
          } else {
            tma_store_wait<0>();  // the shared memory has been read
          }
        }
        __syncwarp();
        if (tile + 1 < tiles) cutlass::arch::NamedBarrier::arrive(kDqSyncThreads, empty);
      }
    }
  }
}

}  // namespace warpflash::kernels
