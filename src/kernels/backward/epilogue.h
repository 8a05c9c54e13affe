// The main backward kernel's epilogue (kernel.h): dK (times the softmax scale) and dV from
// the consumers' registers to global memory, and the small helpers it shares with the kernel.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/attention/special_registers.h"
#include "kernels/backward/dq_writer.h"
#include "kernels/backward/traits.h"

namespace warpflash::kernels {

using namespace cute;

// A TMA tensor's rows of one head and batch from a sequence's first row: packed sequences
// start at their offset in batch 0's token dimension (as the forward's loads).
template <class Tma, class Shape>
CUTE_DEVICE auto sequence_rows(Tma const& tma, Shape const& shape, int offset, int head_coord, int batch_coord) {
  return domain_offset(make_coord(offset, _0{}), tma.get_tma_tensor(shape)(_, _, head_coord, batch_coord));
}

// Two accumulator values (times scale) as one 32-bit pair of Element: a column pair of the
// WGMMA fragment.
template <class Element>
CUTE_DEVICE uint32_t scaled_pair(float x, float y, float scale) {
  Element pair[2] = {Element(x * scale), Element(y * scale)};
  return *reinterpret_cast<uint32_t const*>(pair);
}

// dK = softmax_scale * dS^T Q (S was unscaled) and dV of the block's keys, by the consumer
// warpgroups after their last query tile. A sequence's last, partial block: straight from
// registers, rows up to the sequence's end (a TMA store would write the rows past it, which
// in a packed batch are the next sequence's). A whole block: into K's and V's tiles (once no
// GEMM reads them: the other warpgroup's last dQ GEMM reads all of K), then one TMA store
// each (FlashAttention-3's epilogue): 4-byte stores straight to global memory cost the CTA
// several microseconds after its last tile, a few tiles' time at 1k keys (docs/perf-notes.md).
template <class Traits, class AccDV, class AccDK>
CUTE_DEVICE void store_dk_dv(typename Traits::Params const& params, typename Traits::SharedStorage& storage,
                             AccDV const& acc_dv, AccDK const& acc_dk, int n_block, int kv_head, int batch_k,
                             SequenceLengths::Sequence const& seq_k) {
  using Element = typename Traits::Element;
  typename Traits::TiledMmaDV mma_dv;
  typename Traits::TiledMmaDK mma_dk;
  auto epilogue_dv = mma_dv.get_thread_slice(fresh_thread_index() - Traits::kProducerThreads);
  auto epilogue_dk = mma_dk.get_thread_slice(fresh_thread_index() - Traits::kProducerThreads);
  using BlockN = typename Traits::BlockN;
  Tensor tDVcDV = epilogue_dv.partition_C(make_identity_tensor(Shape<BlockN, typename Traits::HeadDimV>{}));
  Tensor tDKcDK = epilogue_dk.partition_C(make_identity_tensor(Shape<BlockN, typename Traits::HeadDim>{}));
  if ((n_block + 1) * Traits::kBlockN > seq_k.length) {  // rows past the sequence: not written
    auto store_rows = [&](TensorView4d const& view, auto const& acc, auto const& coords, float scale) {
      Element* base = static_cast<Element*>(view.data) + batch_k * view.batch_stride + kv_head * view.head_stride +
                      int64_t(seq_k.offset + n_block * Traits::kBlockN) * view.seqlen_stride;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2) {  // column pairs: one 4-byte store each
        int key = get<0>(coords(i)), col = get<1>(coords(i));
        if (n_block * Traits::kBlockN + key >= seq_k.length) continue;
        *reinterpret_cast<uint32_t*>(base + int64_t(key) * view.seqlen_stride + col) =
            scaled_pair<Element>(acc(i), acc(i + 1), scale);
      }
    };
    store_rows(params.d_v, acc_dv, tDVcDV, 1.f);
    store_rows(params.d_k, acc_dk, tDKcDK, params.softmax_scale);
    return;
  }
  auto epilogue_barrier = [] {
    cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, static_cast<uint32_t>(BackwardBarrier::kEpilogue));
  };
  Tensor sDK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
  Tensor sDV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});
  auto store_shared_rows = [](auto const& acc, auto&& tile, float scale) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {  // column pairs: 4 bytes, conflict-free in the 128-byte swizzle
      *reinterpret_cast<uint32_t*>(&tile(i)) = scaled_pair<Element>(acc(i), acc(i + 1), scale);
    }
  };
  epilogue_barrier();
  store_shared_rows(acc_dv, epilogue_dv.partition_C(sDV), 1.f);
  store_shared_rows(acc_dk, epilogue_dk.partition_C(sDK), params.softmax_scale);
  cutlass::arch::fence_view_async_shared();  // the generic-proxy writes become visible to the TMA
  epilogue_barrier();
  if (fresh_thread_index() == Traits::kProducerThreads) {
    auto tma_dk = params.tma_dk.get_slice(_0{});
    auto tma_dv = params.tma_dv.get_slice(_0{});
    Tensor gDV = local_tile(sequence_rows(params.tma_dv, params.shape_v, seq_k.offset, kv_head, batch_k),
                            Shape<BlockN, typename Traits::HeadDimV>{}, make_coord(n_block, _0{}));
    Tensor gDK = local_tile(sequence_rows(params.tma_dk, params.shape_k, seq_k.offset, kv_head, batch_k),
                            Shape<BlockN, typename Traits::HeadDim>{}, make_coord(n_block, _0{}));
    copy(params.tma_dv, tma_dv.partition_S(sDV), tma_dv.partition_D(gDV));
    copy(params.tma_dk, tma_dk.partition_S(sDK), tma_dk.partition_D(gDK));
    tma_store_arrive();
    tma_store_wait<0>();  // the shared memory must outlive the TMA's reads of it
  }
}

}  // namespace warpflash::kernels
