// Compile-time description of the main backward kernel (dtype, head dims): tiles,
// shared-memory layouts, WGMMA shapes, TMA copy types and the kernel's parameters.
// FlashAttention-3's form (docs/backward-plan.md): one CTA per K/V block of kBlockN keys,
// query tiles of kBlockM rows walked in order, two consumer warpgroups that split either
// the block's keys (d <= 128: P^T and dS^T feed dV and dK from registers) or the head dim
// of dK, dV and dQ and the queries of S^T and dP^T (kSplitHeadDim, d >= 192: P^T and dS^T
// go through shared memory).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "kernels/attention/mask.h"
#include "kernels/attention/seqlen.h"
#include "kernels/backward/config.h"
#include "kernels/backward/dq_order.h"
#include "kernels/backward/workspace.h"
#include "kernels/forward/traits.h"
#include "warpflash/tensor.h"

namespace warpflash::kernels {

using namespace cute;

template <class Element_, int kHeadDim_, int kHeadDimV_ = kHeadDim_>
struct BackwardTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr bool kSplitHeadDim = backward_splits_head_dim(kHeadDim);
  static constexpr int kBlockM = backward_block_m(kHeadDim);  // query rows per step
  static constexpr int kBlockN = backward_block_n(kHeadDim);  // keys per CTA
  static constexpr int kConsumerWarpgroups = 2;
  // dQ leaves in one part per consumer warpgroup (dq_order.h): its half of dQ's columns; or
  // at d = 96 (whose 48-column halves would cut K^T's 32-column swizzle atoms) all of dQ
  // from the warpgroup's own keys, the two parts added into the same floats; or with
  // 128-query tiles (d = 64) its half of the rows, all columns (FlashAttention-3's
  // AtomLayoutMdQ = 2: a 64 x 64 GEMM each rather than 128 x 32); or with 80-query tiles
  // (d = 128), whose rows are no multiple of a warpgroup's 64-row WGMMA, dQ^T = K^T dS^T,
  // each 64 of its head-dim rows by all 80 queries (FlashAttention-3's dQ_swapAB).
  static constexpr BackwardDqOrder kDqOrder = BackwardDqOrder::of(kHeadDim);
  static constexpr bool kDqSplitKeys = kDqOrder.split == BackwardDqOrder::Split::kKeys;
  static constexpr bool kDqSplitRows = kDqOrder.split == BackwardDqOrder::Split::kRows;
  static constexpr bool kDqTransposed = kDqOrder.split == BackwardDqOrder::Split::kTransposed;
  using DqTile = std::conditional_t<kDqTransposed, Shape<Int<kHeadDim>, Int<kBlockM>>,
                                    Shape<Int<kBlockM>, Int<kHeadDim>>>;  // the dQ GEMM's (M, N)
  static constexpr int kDqPartFloats = kDqOrder.part_floats();  // a warpgroup's part
  // dS tiles: two with d = 64's 128-query tiles (FlashAttention-4's): a tile's dS is
  // written while the other warpgroup's dQ GEMM may still read the previous one, so one
  // consumer barrier a tile instead of two, and dS is stored before dV is issued (+1.5-3%,
  // docs/perf-notes.md, forty-third section). At d = 128 that order spills (80-144 bytes)
  // and a second tile alone measured 0.99-1.00x; d = 96 (dQ split by keys) and the wide
  // form keep one.
  static constexpr int kDsStages = kDqSplitRows ? 2 : 1;
  // Every k-th exponential of P on the FMA pipe (exp2_fma.h; 0: all on the MUFU), where a
  // tile's exponentials are bound by the MUFU pipe's rate: every 4th at d = 64 (128-query
  // tiles, +3%, docs/perf-notes.md forty-third section) and at d = 128 (80-query tiles,
  // +2-3%, forty-fifth); every 3rd or 2nd measured no better (d = 64 one in 2: -5-8%).
  static constexpr int kExp2OnFmaEvery = kHeadDim == 64 || kHeadDim == 128 ? 4 : 0;
  // Q and dO tiles in flight: two where they fit beside K, V, dS (and P) and the fp32 dQ
  // tile, else one of each (d = 256: 208 KB; FlashAttention-4's choice), which the wide form
  // releases as soon as their GEMMs are done.
  static constexpr int kFixedSmemBytes = kBlockN * (kHeadDim + kHeadDimV) * int(sizeof(Element)) +
                                         (kSplitHeadDim ? 2 : kDsStages) * kBlockM * kBlockN * int(sizeof(Element)) +
                                         kConsumerWarpgroups * kDqPartFloats * int(sizeof(float));
  static constexpr int kStageSmemBytes = kBlockM * (kHeadDim + kHeadDimV) * int(sizeof(Element)) + 2 * kBlockM * 4;
  static constexpr int kStages = kFixedSmemBytes + 2 * kStageSmemBytes + 4096 <= 227 * 1024 ? 2 : 1;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kProducerThreads = cutlass::NumThreadsPerWarpGroup;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  // As the forward's: producer + 2 x consumer <= 504 (168 a thread at launch for 384
  // threads). A consumer holds dK and dV (64 + 64 registers at d = 128, 32 + 32 at d = 64),
  // S^T and dP^T (32 + 32; 40 + 40 with d = 128's 80-query tiles, 64 + 64 with d = 64's 128).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static_assert(kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters <= 504, "the register file");
  static_assert(kBlockM == 64 || ((kBlockM == 128 || kBlockM == 80) && !kSplitHeadDim && !kDqSplitKeys),
                "the S^T and dP^T GEMMs have kBlockM as their N, the dQ GEMM as its M (one 64-row atom a "
                "warpgroup) or, transposed, as its N");
  static_assert(kHeadDim % 32 == 0 && kHeadDimV % 32 == 0, "the warpgroups' dQ GEMMs start at K^T's swizzle atoms");
  static_assert(kDqOrder.parts() * kDqPartFloats == kBlockM * kHeadDim || kDqSplitKeys,
                "the warpgroups' dQ parts tile the query tile");
  static_assert(!(kDqSplitKeys && kSplitHeadDim), "the wide form splits dQ by columns");
  static_assert(!kSplitHeadDim || (kHeadDim % 64 == 0 && kHeadDimV % 64 == 0 && kBlockN == 64),
                "the warpgroups' halves of the head dim start at a swizzle atom (SmemAtom); S^T has 64 keys");

  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;
  using HeadDimV = Int<kHeadDimV>;
  using Stages = Int<kStages>;

  // Narrow form: the consumer warpgroups stack along the keys (M of S^T, dP^T, dK, dV).
  // Wide form (kSplitHeadDim): along the queries of S^T and dP^T (their N) and the head dim
  // of dK and dV (their N).
  using KeyWarpgroups = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using ColumnWarpgroups = Layout<Shape<_1, Int<kConsumerWarpgroups>, _1>>;
  using ScoreWarpgroups = std::conditional_t<kSplitHeadDim, ColumnWarpgroups, KeyWarpgroups>;
  using ScoreColumns = Int<kSplitHeadDim ? kBlockM / kConsumerWarpgroups : kBlockM>;
  // S^T = K Q^T and dP^T = V dO^T: all operands K-major in shared memory.
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, ScoreColumns, HeadDim>>(), ScoreWarpgroups{}));
  using TiledMmaDP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, ScoreColumns, HeadDimV>>(), ScoreWarpgroups{}));
  // dV += P^T dO and dK += dS^T Q, dO and Q read transposed (MN-major) from their row-major
  // tiles. Narrow: P^T and dS^T from registers (the S^T accumulator's layout). Wide: from
  // their (query, key) tiles in shared memory, read transposed, each warpgroup half the
  // head dim.
  template <int kDim>
  using DkDvAtom = std::conditional_t<
      kSplitHeadDim,
      decltype(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kDim / kConsumerWarpgroups>, BlockM>,
                                    GMMA::Major::MN, GMMA::Major::MN>()),
      decltype(GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kDim>, BlockM>, GMMA::Major::K,
                                    GMMA::Major::MN>())>;
  using DkDvWarpgroups = std::conditional_t<kSplitHeadDim, ColumnWarpgroups, KeyWarpgroups>;
  using TiledMmaDV = decltype(make_tiled_mma(DkDvAtom<kHeadDimV>{}, DkDvWarpgroups{}));
  using TiledMmaDK = decltype(make_tiled_mma(DkDvAtom<kHeadDim>{}, DkDvWarpgroups{}));
  // dQ = dS K: a contraction over all kBlockN keys, so dS goes through shared memory; the
  // warpgroups split dQ's columns, or its rows (kDqSplitRows), or (kDqSplitKeys) each
  // computes all of dQ from its own keys and the writer adds both parts; kDqTransposed:
  // dQ^T = K^T dS^T (K^T the MN-major A, dS the K-major B), the warpgroups stacked along
  // the head dim.
  using TiledMmaDQ = std::conditional_t<
      kDqTransposed,
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlockM, BlockN>,
                                                   GMMA::Major::MN, GMMA::Major::K>(),
                              KeyWarpgroups{})),
      std::conditional_t<
          kDqSplitKeys,
          decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float,
                                                       Shape<_64, HeadDim, Int<kBlockN / 2>>, GMMA::Major::K,
                                                       GMMA::Major::MN>())),
          decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kDqOrder.gemm_n>, BlockN>,
                                                       GMMA::Major::K, GMMA::Major::MN>(),
                                  std::conditional_t<kDqSplitRows, KeyWarpgroups, ColumnWarpgroups>{}))>>;

  // Row tiles of Q, K (kDim = d) and dO, V (d_v). In the wide form each warpgroup reads half
  // of a row's columns (Q^T, K^T and dO^T as MN-major B), which must start at a swizzle atom:
  // d = 192's 96-column halves take 64-byte atoms (32 columns).
  template <int kDim>
  using SmemAtom = std::conditional_t<kSplitHeadDim && kDim / 2 % 64 != 0, GMMA::Layout_K_SW64_Atom<Element>,
                                      SmemAtomOfRow<Element, kDim>>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom<kHeadDim>{}, Shape<BlockM, HeadDim, Stages>{}));
  using SmemLayoutDO = decltype(tile_to_shape(SmemAtom<kHeadDimV>{}, Shape<BlockM, HeadDimV, Stages>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom<kHeadDim>{}, Shape<BlockN, HeadDim>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtom<kHeadDimV>{}, Shape<BlockN, HeadDimV>{}));
  // dS as (queries, keys), keys contiguous: the dQ GEMM's K-major A; its stages.
  using SmemLayoutDS = decltype(tile_to_shape(SmemAtomOfRow<Element, kBlockN>{}, Shape<BlockM, BlockN>{}));
  using SmemLayoutDSStages =
      decltype(tile_to_shape(SmemAtomOfRow<Element, kBlockN>{}, Shape<BlockM, BlockN, Int<kDsStages>>{}));
  // Transposed views of the same bytes: Q^T and dO^T (head dim, queries, stage) as the dK
  // and dV GEMMs' B, K^T (head dim, keys) as the dQ GEMM's B (kDqTransposed: its A) (the
  // consumers write dS^T into dS at addresses spelled out in kernel.h).
  using SmemLayoutQt = decltype(composition(SmemLayoutQ{},
                                            make_ordered_layout(Shape<HeadDim, BlockM, Stages>{}, Step<_2, _1, _3>{})));
  using SmemLayoutDOt = decltype(composition(
      SmemLayoutDO{}, make_ordered_layout(Shape<HeadDimV, BlockM, Stages>{}, Step<_2, _1, _3>{})));
  using SmemLayoutKt =
      decltype(composition(SmemLayoutK{}, make_ordered_layout(Shape<HeadDim, BlockN>{}, Step<_2, _1>{})));
  // Wide form: P (queries, keys) in dS's layout, and both seen as (keys, queries): P^T and
  // dS^T as the dV and dK GEMMs' MN-major A.
  using SmemLayoutDSt =
      decltype(composition(SmemLayoutDS{}, make_ordered_layout(Shape<BlockN, BlockM>{}, Step<_2, _1>{})));

  using PipelineQ = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutDO>, 1024> d_o;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutDSStages>, 1024> d_s;
    // Each consumer warpgroup's part of a dQ tile in fp32, in fragment order (dq_order.h).
    cute::array_aligned<float, kConsumerWarpgroups * kDqPartFloats, 128> d_q;
    // Each query tile's LSE_log2 and dPsum, copied with its Q and dO tiles (onto their barriers).
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dpsum[kStages][kBlockM];
    typename PipelineQ::SharedStorage pipeline_q;
    typename PipelineQ::SharedStorage pipeline_do;
    // The wide form's P, in dS's layout (last: the narrow form's offsets do not move).
    std::conditional_t<kSplitHeadDim, cute::array_aligned<Element, cute::cosize_v<SmemLayoutDS>, 1024>,
                       cute::array<Element, 0>>
        p;
  };
  static constexpr int kSharedMemoryBytes = sizeof(SharedStorage);
  static_assert(kSharedMemoryBytes <= 227 * 1024, "over the 227 KB a Hopper CTA may opt in to");
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesDO = kBlockM * kHeadDimV * sizeof(Element);
  static constexpr uint32_t kBytesStats = kBlockM * sizeof(float);  // a tile's LSE_log2 or dPsum
  static constexpr uint32_t kBytesK = kBlockN * kHeadDim * sizeof(Element);  // with the first Q tile
  static constexpr uint32_t kBytesV = kBlockN * kHeadDimV * sizeof(Element);  // with the first dO tile

  template <class Dim>
  using GmemLayout = Layout<Shape<int, Dim, int, int>, Stride<int64_t, _1, int64_t, int64_t>>;
  template <class Dim, class T = Element const>  // T: Element for the outputs
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<T*>(nullptr)), GmemLayout<Dim>{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDim>{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<BlockM, HeadDim>{}, _1{}));
  using TmaDO = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDimV>{}, take<0, 2>(SmemLayoutDO{}),
                                       Shape<BlockM, HeadDimV>{}, _1{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDim>{}, SmemLayoutK{}, Shape<BlockN, HeadDim>{},
                                      _1{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDimV>{}, SmemLayoutV{},
                                      Shape<BlockN, HeadDimV>{}, _1{}));
  // dK and dV leave from K's and V's shared-memory tiles (in K's and V's layouts).
  using TmaDK = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensor<HeadDim, Element>{}, SmemLayoutK{},
                                       Shape<BlockN, HeadDim>{}, _1{}));
  using TmaDV = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensor<HeadDimV, Element>{}, SmemLayoutV{},
                                       Shape<BlockN, HeadDimV>{}, _1{}));
  struct Params {
    TmaQ tma_q;
    TmaDO tma_do;
    TmaK tma_k;
    TmaV tma_v;
    TmaDK tma_dk;  // dK and dV of the blocks whose keys all lie inside their sequence
    TmaDV tma_dv;
    Shape<int, HeadDim, int, int> shape_q;
    Shape<int, HeadDimV, int, int> shape_do;
    Shape<int, HeadDim, int, int> shape_k;
    Shape<int, HeadDimV, int, int> shape_v;
    TensorView4d d_k;  // the sequence's last, partial block: from registers, rows up to its end
    TensorView4d d_v;
    int heads_per_kv_head;
    // As the forward's: P = exp2(S * scale_log2 - LSE_log2), scale_log2 = softmax scale *
    // log2(e); with a softcap (softcap_prescale > 0) exp2(tanh(S * softcap_prescale) *
    // scale_log2 - LSE_log2), scale_log2 = softcap * log2(e).
    float scale_log2;
    float softcap_prescale;
    float softmax_scale;  // dK's
    SequenceLengths seq_q;
    SequenceLengths seq_k;
    AttentionMask mask;  // window and chunk; sequence lengths set per CTA
    BackwardWorkspace workspace;
    char* workspace_base;
    bool deterministic;  // dQ added in a fixed order (kernel.h)
  };
};

}  // namespace warpflash::kernels
