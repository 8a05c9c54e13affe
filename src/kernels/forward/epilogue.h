// Writes the finished O tile (converted to the input type) and the LSE of its rows.
// Rows past the tile's query sequence are never written.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/attention/fragment.h"
#include "kernels/attention/special_registers.h"
#include "kernels/attention/tile_work.h"
#include "kernels/forward/pingpong.h"
#include "kernels/forward/q_buffers.h"
#include "kernels/forward/traits.h"

namespace warpflash::kernels {

using namespace cute;

template <class Traits>
struct ForwardEpilogue {
  using Element = typename Traits::ElementO;  // of O
  using Params = typename Traits::Params;

  using SharedStorage = typename Traits::SharedStorage;
  using OutputBarrier = cutlass::arch::NamedBarrier;
  static constexpr int kWarpgroupThreads = cutlass::NumThreadsPerWarpGroup;

  // The LSE first, so that its registers are free before O is converted.
  template <bool kGeneralLoop, int kRows>
  CUTE_DEVICE static void store_lse(Params const& params, TileCoord tile, TileWork const& work, int consumer_tid,
                                    float const (&lse)[kRows]) {
    if (params.lse == nullptr || threadIdx.x % 4 != 0) return;
    int seqlen_q = work.mask.rows();
    int row_base = tile.m_block * Traits::kBlockM;
    Tensor tOcO = output_coordinates(consumer_tid);
    Tensor tOcO_rc = make_tensor(tOcO.data(), rowcol_layout(tOcO.layout()));
    float* lse_head = params.lse + params.seq_q.batch_coord(tile.batch) * params.lse_batch_stride +
                      tile.head * params.lse_head_stride + work.offset_q;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      int row = row_base + get<0>(tOcO_rc(r, 0));
      if (row < seqlen_q) lse_head[kGeneralLoop ? lse_offset(params, row) : row] = lse[r];
    }
  }

  // Where packed GQA's query row `row` lies from its K/V head's first row (Params::q_rows);
  // `row` itself without packing (pack 1: position row, head 0).
  CUTE_DEVICE static int64_t lse_offset(Params const& params, int row) {
    unsigned head_in_group;
    unsigned position = params.mask.by_pack.divmod(unsigned(row), head_in_group);
    return position + head_in_group * params.lse_group_stride;
  }
  CUTE_DEVICE static int64_t o_offset(Params const& params, int row) {
    unsigned head_in_group;
    unsigned position = params.mask.by_pack.divmod(unsigned(row), head_in_group);
    return position * params.o_seqlen_stride + head_in_group * params.o_group_stride;
  }

  // Through shared memory and TMA where the kernel has the buffer and TMA can clip the
  // rows at the sequence's end: dense sequences (the tensor's end) and, in the general loop
  // (kGeneralLoop), packed ones (the tensor map of launch.h); from registers otherwise
  // (dense sequences with seqused, packed GQA's rows of several heads and positions), row
  // by row up to the sequence's end.
  template <bool kGeneralLoop, class AccO>
  CUTE_DEVICE static void store_o(Params const& params, SharedStorage& storage, TileCoord tile, TileWork const& work,
                                  int round, int consumer_tid, AccO const& acc_o) {
    Tensor out = convert_fragment<Element>(acc_o);
    if constexpr (Traits::kTmaStoreO) {
      bool rows_of_one_head = !kGeneralLoop || params.q_rows == nullptr;  // not packed GQA's
      if ((params.seq_q.uniform() && rows_of_one_head) || (kGeneralLoop && params.seq_q.packed())) {
        store_through_shared_memory<kGeneralLoop>(params, storage, tile, work, round, consumer_tid, out);
        return;
      }
      store_pairs_from_registers<kGeneralLoop>(params, tile, work, consumer_tid, out);
    } else {
      store_rows_from_registers<kGeneralLoop>(params, tile, work, out);
    }
    // The Q buffer holds no O here: free it for the next tile's Q at once.
    if constexpr (Traits::kOInQBuffer) ForwardQBuffers<Traits>::release_q(storage, round);
  }

  // A piece of a split tile (split_tail.h, split_kv.h): its normalized O and LSE in fp32
  // into the workspace slot. The tail's pieces write every row (the merge skips those past
  // seqlen_q); split-KV's (kRowsOfSequence) only the tile's rows [0, rows), which are few
  // in decode. Two adjacent columns per 8-byte store.
  template <bool kRowsOfSequence, int kRows, class AccO>
  CUTE_DEVICE static void store_piece(Params const& params, int slot, int consumer_tid, float const (&lse)[kRows],
                                      AccO const& acc_o, int rows = Traits::kBlockM) {
    Tensor tOcO = output_coordinates(consumer_tid);
    if constexpr (kRowsOfSequence) {
      float* o_slot = params.split_workspace + int64_t(slot) * Traits::kSplitSlotFloats;
      float* lse_slot = o_slot + Traits::kBlockM * Traits::kHeadDimV;
      Tensor tOcO_rc = make_tensor(tOcO.data(), rowcol_layout(tOcO.layout()));
      Tensor acc_o_rc = make_tensor(acc_o.data(), rowcol_layout(acc_o.layout()));
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) {
        int row = get<0>(tOcO_rc(r, 0));
        if (row >= rows) continue;
        float* o_row = o_slot + row * Traits::kHeadDimV;
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(acc_o_rc); c += 2) {
          *reinterpret_cast<float2*>(o_row + get<1>(tOcO_rc(r, c))) = make_float2(acc_o_rc(r, c), acc_o_rc(r, c + 1));
        }
        if (threadIdx.x % 4 == 0) lse_slot[row] = lse[r];
      }
    } else {
      // (The tail's slots are 2 per CTA: 32-bit offsets.)
      float* o_slot = params.split_workspace + slot * Traits::kSplitSlotFloats;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc_o); i += 2) {
        float* dst = o_slot + get<0>(tOcO(i)) * Traits::kHeadDimV + get<1>(tOcO(i));
        *reinterpret_cast<float2*>(dst) = make_float2(acc_o(i), acc_o(i + 1));
      }
      if (threadIdx.x % 4 != 0) return;
      float* lse_slot = o_slot + Traits::kBlockM * Traits::kHeadDimV;
      Tensor tOcO_rc = make_tensor(tOcO.data(), rowcol_layout(tOcO.layout()));
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) lse_slot[get<0>(tOcO_rc(r, 0))] = lse[r];
    }
  }

  // Before the CTA exits: the last TMA stores must have read the O buffer.
  CUTE_DEVICE static void drain(int consumer_tid) {
    if constexpr (Traits::kTmaStoreO) {
      if (consumer_tid % kWarpgroupThreads == 0) tma_store_wait<0>();
    }
  }

 private:
  // O from registers in the kernels without a TMA store of O (d = 192, d = 256's default),
  // row by row in 16-byte stores. The four threads of a quad share their rows, each holding
  // a column pair of every 8 columns: a 4 x 4 transpose of those 4-byte pairs within the
  // quad (two rounds of shuffles) gives each thread 8 contiguous columns of every 32. With
  // one 4-byte store a pair, d=192's 48 stores a thread filled the LSU's queue (and with
  // the address and row test per pair took ~1,800 instructions a warp and tile); in 16
  // bytes d=192 gained 4-20% at 512-4k keys (docs/perf-notes.md). Rows past the sequence
  // skip the stores only: the whole warp shuffles.
  template <bool kGeneralLoop, class FragmentO>
  CUTE_DEVICE static void store_rows_from_registers(Params const& params, TileCoord tile, TileWork const& work,
                                                    FragmentO const& out) {
    int seqlen_q = work.mask.rows();
    int row_base = tile.m_block * Traits::kBlockM;
    // The thread's coordinates from %tid here: derived from consumer_tid, ptxas hoisted them
    // above the main loop (d=256's consumers, storing rows, spilled 8 bytes so).
    Tensor tOcO = output_coordinates(fresh_thread_index() - Traits::kProducerThreads);
    Tensor tOcO_rc = make_tensor(tOcO.data(), rowcol_layout(tOcO.layout()));
    Tensor out_rc = make_tensor(out.data(), rowcol_layout(out.layout()));
    constexpr int kChunks = decltype(size<1>(out_rc))::value / 2;  // of 8 columns a row
    static_assert(kChunks % 4 == 0, "rows of whole 32-column groups");
    int quad_lane = get<1>(tOcO_rc(0, 0)) / 2;  // the thread's first column is 2 (lane % 4)
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < size<0>(out_rc); ++r) {
      int row = row_base + get<0>(tOcO_rc(r, 0));
      Element* o_row = params.o + params.seq_q.batch_coord(tile.batch) * params.o_batch_stride +
                       tile.head * params.o_head_stride + work.offset_q * params.o_seqlen_stride +
                       (kGeneralLoop ? o_offset(params, row) : row * params.o_seqlen_stride) + 8 * quad_lane;
      CUTLASS_PRAGMA_UNROLL
      for (int group = 0; group < kChunks / 4; ++group) {
        uint32_t words[4];  // row r's columns 8 (4 group + k) + 2 quad_lane and the next
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < 4; ++k) words[k] = *reinterpret_cast<uint32_t const*>(&out_rc(r, 2 * (4 * group + k)));
        // Round `bit`: lanes q and q ^ bit swap the words whose index differs from q in
        // that bit. After both rounds lane q holds lane p's word q at index p.
        CUTLASS_PRAGMA_UNROLL
        for (int bit = 1; bit <= 2; bit *= 2) {
          bool upper = quad_lane & bit;
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < 4; ++k) {
            if (k & bit) continue;
            uint32_t received = __shfl_xor_sync(0xffffffff, upper ? words[k] : words[k + bit], bit);
            (upper ? words[k] : words[k + bit]) = received;
          }
        }
        if (row < seqlen_q) {
          *reinterpret_cast<uint4*>(o_row + 32 * group) = make_uint4(words[0], words[1], words[2], words[3]);
        }
      }
    }
  }

  // O from registers, one address and one test per column pair (4 bytes), rows up to the
  // sequence's end: the rare problems that a kernel with an O buffer cannot store by TMA,
  // whose consumers have no registers for the row-wise stores (d=128's long tiles spilled
  // 8 bytes with them).
  template <bool kGeneralLoop, class FragmentO>
  CUTE_DEVICE static void store_pairs_from_registers(Params const& params, TileCoord tile, TileWork const& work,
                                                     int consumer_tid, FragmentO const& out) {
    int seqlen_q = work.mask.rows();
    int row_base = tile.m_block * Traits::kBlockM;
    Tensor tOcO = output_coordinates(consumer_tid);
    Element* o_head = params.o + params.seq_q.batch_coord(tile.batch) * params.o_batch_stride +
                      tile.head * params.o_head_stride + work.offset_q * params.o_seqlen_stride;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(out); i += 2) {
      int row = row_base + get<0>(tOcO(i));
      int col = get<1>(tOcO(i));
      if (row < seqlen_q) {
        Element* dst = o_head + (kGeneralLoop ? o_offset(params, row) : row * params.o_seqlen_stride) + col;
        *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<uint32_t const*>(&out(i));
      }
    }
  }

  // (row, column) in the tile of every O element this thread holds.
  CUTE_DEVICE static auto output_coordinates(int consumer_tid) {
    typename Traits::TiledMmaPV mma_pv;
    Tensor cO = make_identity_tensor(Shape<typename Traits::BlockM, typename Traits::HeadDimV>{});
    return mma_pv.get_thread_slice(consumer_tid).partition_C(cO);
  }

  // Per consumer warpgroup: stmatrix of its 64 rows into its part of the swizzled O
  // buffer, then its first thread stores them with TMA (which clips the rows past
  // seqlen_q) and the warpgroup goes on to the next tile.
  template <bool kGeneralLoop, class FragmentO>
  CUTE_DEVICE static void store_through_shared_memory(Params const& params, SharedStorage& storage, TileCoord tile,
                                                      TileWork const& work, int round, int consumer_tid,
                                                      FragmentO const& out) {
    int warpgroup = consumer_tid / kWarpgroupThreads;
    int warpgroup_tid = consumer_tid % kWarpgroupThreads;
    uint32_t buffer_barrier = static_cast<uint32_t>(ForwardBarrier::kOutputBuffer0) + warpgroup;
    using SmemLayout = typename Traits::SmemLayoutOWarpgroup;
    Element* buffer;
    if constexpr (Traits::kOInQBuffer) {
      buffer = storage.q.data() + typename Traits::SmemLayoutQ{}(warpgroup * 64, 0);
    } else {
      buffer = storage.o.data() + warpgroup * cosize_v<SmemLayout>;
    }
    Tensor sO = make_tensor(make_smem_ptr(buffer), SmemLayout{});
    // The previous tile's store must have read the buffer before it is overwritten.
    if (warpgroup_tid == 0) tma_store_wait<0>();
    OutputBarrier::sync(kWarpgroupThreads, buffer_barrier);

    auto copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, typename Traits::TiledMmaPVWarpgroup{});
    auto thr_copy_o = copy_o.get_thread_slice(warpgroup_tid);
    Tensor tOrO = thr_copy_o.retile_S(out);
    Tensor tOsO = thr_copy_o.partition_D(sO);
    copy(copy_o, tOrO, tOsO);
    tma_store_fence();  // the generic-proxy writes become visible to the TMA unit
    OutputBarrier::sync(kWarpgroupThreads, buffer_barrier);

    if (warpgroup_tid == 0) {
      Tensor mO_heads = params.tma_o.get_tma_tensor(params.shape_o);
      // Packed: the sequence's rows end at its last row's mode (launch.h).
      int seqlen_q = work.mask.rows();
      bool packed = kGeneralLoop && params.seq_q.packed();
      Tensor mO = domain_offset(make_coord(packed ? params.seq_q.seqlen - seqlen_q : 0, _0{}),
                                mO_heads(_, _, tile.head, packed ? work.offset_q + seqlen_q : tile.batch));
      Tensor gO = local_tile(mO, Shape<_64, typename Traits::HeadDimV>{},
                             make_coord(tile.m_block * Traits::kConsumerWarpgroups + warpgroup, _0{}));
      auto tma_o = params.tma_o.get_slice(_0{});
      copy(params.tma_o, tma_o.partition_S(sO), tma_o.partition_D(gO));
      tma_store_arrive();
      // The next tile's Q may overwrite these rows once the store has read them.
      if constexpr (Traits::kOInQBuffer) tma_store_wait<0>();
    }
    if constexpr (Traits::kOInQBuffer) ForwardQBuffers<Traits>::release_q(storage, round);
  }
};

}  // namespace warpflash::kernels
