// Pingpong scheduling of the consumer warpgroups (FlashAttention-3, section 3.1): they
// take turns issuing their GEMMs, so one warpgroup's softmax runs while the other's GEMMs
// occupy the tensor cores. A turn passes round-robin through named barriers.
#pragma once

#include <cutlass/arch/barrier.h>

#include "kernels/forward/config.h"

namespace warpflash::kernels {

// Named barrier IDs of the forward kernel (CUTLASS offsets them past its 8 reserved IDs,
// leaving 8 of the 16). A warpgroup's own barrier serves both of its warpgroup-wide syncs
// (every thread of it passes both in the same order): with three consumer warpgroups a
// Q-rows barrier of its own, 6 + w, reached the hardware's ID 16.
enum class ForwardBarrier : uint32_t {
  kConsumerTurn0 = 0,  // consumer warpgroup w waits on kConsumerTurn0 + w (up to 3)
  kOutputBuffer0 = 3,  // consumer warpgroup w's part of the O buffer is free / written: 3 + w
  kQRows0 = 3,         // consumer warpgroup w has loaded its Q rows (packed GQA): 3 + w
  kGatheredK = 6,      // the producer warps have issued their copies of a gathered K block
  kGatheredV = 7,      // ... of a V block (paged_kv.h)
};

// kEnabled = false: no turns (the warpgroups issue their GEMMs as they are ready).
template <int kConsumerWarpgroups, bool kEnabled = kPingpong>
struct PingpongScheduler {
  // One warpgroup waits while the one before it arrives.
  static constexpr uint32_t kThreads = 2 * cutlass::NumThreadsPerWarpGroup;
  int consumer_warpgroup;

  CUTE_DEVICE static uint32_t barrier_of(int warpgroup) {
    return static_cast<uint32_t>(ForwardBarrier::kConsumerTurn0) + warpgroup;
  }

  // Gives the first turn to consumer warpgroup 0.
  CUTE_DEVICE void start() const {
    if constexpr (kEnabled && kConsumerWarpgroups > 1) {
      if (consumer_warpgroup == kConsumerWarpgroups - 1) cutlass::arch::NamedBarrier::arrive(kThreads, barrier_of(0));
    }
  }

  CUTE_DEVICE void wait_turn() const {
    if constexpr (kEnabled && kConsumerWarpgroups > 1) {
      cutlass::arch::NamedBarrier::sync(kThreads, barrier_of(consumer_warpgroup));
    }
  }

  CUTE_DEVICE void pass_turn() const {
    if constexpr (kEnabled && kConsumerWarpgroups > 1) {
      cutlass::arch::NamedBarrier::arrive(kThreads, barrier_of((consumer_warpgroup + 1) % kConsumerWarpgroups));
    }
  }
};

}  // namespace warpflash::kernels
