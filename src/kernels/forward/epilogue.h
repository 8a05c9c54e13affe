// Writes the finished O tile (converted to the input type) and the LSE of its rows.
// Rows past seqlen_q are never written.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/forward/fragment.h"
#include "kernels/forward/traits.h"

namespace warpflash::kernels {

using namespace cute;

template <class Traits>
struct ForwardEpilogue {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;

  template <class AccO, int kRows>
  CUTE_DEVICE static void store(Params const& params, TileCoord tile, int consumer_tid, AccO const& acc_o,
                                float const (&lse)[kRows]) {
    typename Traits::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(consumer_tid);
    Tensor cO = make_identity_tensor(Shape<typename Traits::BlockM, typename Traits::HeadDim>{});
    Tensor tOcO = thr_pv.partition_C(cO);
    Tensor out = convert_fragment<Element>(acc_o);

    int seqlen_q = params.mask.seqlen_q;
    int row_base = tile.m_block * Traits::kBlockM;
    Element* o_head = params.o + tile.batch * params.o_batch_stride + tile.head * params.o_head_stride;
    // Each thread holds column pairs: one 4-byte store each.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(out); i += 2) {
      int row = row_base + get<0>(tOcO(i));
      int col = get<1>(tOcO(i));
      if (row < seqlen_q) {
        Element* dst = o_head + row * params.o_seqlen_stride + col;
        *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<uint32_t const*>(&out(i));
      }
    }

    if (params.lse == nullptr || threadIdx.x % 4 != 0) return;
    Tensor tOcO_rc = make_tensor(tOcO.data(), rowcol_layout(tOcO.layout()));
    float* lse_head = params.lse + (int64_t(tile.batch) * params.scheduler.heads + tile.head) * seqlen_q;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      int row = row_base + get<0>(tOcO_rc(r, 0));
      if (row < seqlen_q) lse_head[row] = lse[r];
    }
  }
};

}  // namespace warpflash::kernels
