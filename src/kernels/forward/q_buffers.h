// The Q buffers of the forward kernel: which buffer and barrier phase a round's tile uses,
// and the barriers' protocol between the producer thread that loads Q (loads.h), the
// consumers that read it (mainloop.h) and, where O leaves through the Q buffer, the
// epilogue that releases it (epilogue.h).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/forward/traits.h"

namespace warpflash::kernels {

template <class Traits>
struct ForwardQBuffers {
  using SharedStorage = typename Traits::SharedStorage;

  // The Q buffer of a CTA's tile in `round`, and the phase of its barriers. Every round
  // passes through the Q barriers, also a tile without work (pass_q_empty_tile_*), so that the
  // round alone names the buffer: the consumers need no counter of their own for it.
  CUTE_DEVICE static int q_stage(int round) { return round % Traits::kStagesQ; }
  CUTE_DEVICE static int q_phase(int round) { return (round / Traits::kStagesQ) & 1; }
  CUTE_DEVICE static auto smem_q(SharedStorage& storage, int round) {
    using Layout = typename Traits::SmemLayoutQ;
    return cute::make_tensor(cute::make_smem_ptr(storage.q.data() + q_stage(round) * cute::cosize_v<Layout>), Layout{});
  }

  // The Q barriers of a round whose tile has no work (it sees no key): the loading thread
  // marks the buffer full without loading, each consumer thread releases it unread.
  CUTE_DEVICE static void pass_q_empty_tile_producer(SharedStorage& storage, int round, unsigned index) {
    wait_q_empty(storage, round);
    publish_tile_index(storage, round, index);
    cutlass::arch::ClusterBarrier::arrive(&storage.barrier_q_full[q_stage(round)]);
  }
  // The tile index of a round travels with its Q buffer: the loading thread writes it once
  // the buffer is free and before it marks the buffer full; the consumers read it once it
  // is full, in the dynamic tile order (kernel.h; in the static one they compute it and the
  // store goes unread). The barriers' asm has no memory clobber, so these accesses carry
  // their own.
  CUTE_DEVICE static void publish_tile_index(SharedStorage& storage, int round, unsigned index) {
    uint32_t address = cute::cast_smem_ptr_to_uint(&storage.tile_index[q_stage(round)]);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(address), "r"(index) : "memory");
  }
  CUTE_DEVICE static unsigned published_tile_index(SharedStorage& storage, int round) {
    cutlass::arch::ClusterBarrier::wait(&storage.barrier_q_full[q_stage(round)], q_phase(round));
    uint32_t address = cute::cast_smem_ptr_to_uint(&storage.tile_index[q_stage(round)]);
    unsigned index;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(index) : "r"(address) : "memory");
    return index;
  }
  CUTE_DEVICE static void pass_q_empty_tile_consumer(SharedStorage& storage, int round) {
    cutlass::arch::ClusterBarrier::wait(&storage.barrier_q_full[q_stage(round)], q_phase(round));
    if constexpr (!Traits::kOInQBuffer) release_q(storage, round);
  }
  // With O written into the Q buffer the epilogue releases it instead.
  CUTE_DEVICE static void release_q(SharedStorage& storage, int round) {
    cutlass::arch::ClusterBarrier::arrive(&storage.barrier_q_empty[q_stage(round)]);
  }
  CUTE_DEVICE static void wait_q_empty(SharedStorage& storage, int round) {
    if (round >= Traits::kStagesQ) {
      cutlass::arch::ClusterBarrier::wait(&storage.barrier_q_empty[q_stage(round)], q_phase(round - Traits::kStagesQ));
    }
  }
};

}  // namespace warpflash::kernels
