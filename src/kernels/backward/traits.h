// Compile-time description of the main backward kernel (dtype, head dims): tiles,
// shared-memory layouts, WGMMA shapes, TMA copy types and the kernel's parameters.
// FlashAttention-3's form (docs/backward-plan.md): one CTA per K/V block of kBlockN keys,
// two consumer warpgroups that each own kBlockN / 2 of its keys, query tiles of kBlockM
// rows walked in order.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "kernels/attention/mask.h"
#include "kernels/attention/seqlen.h"
#include "kernels/backward/config.h"
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
  static constexpr int kBlockM = backward_block_m(kHeadDim);  // query rows per step
  static constexpr int kBlockN = 128;                         // keys per CTA
  static constexpr int kStages = 2;                           // Q and dO tiles in flight
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kProducerThreads = cutlass::NumThreadsPerWarpGroup;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  // As the forward's: producer + 2 x consumer <= 504 (168 a thread at launch for 384
  // threads). A consumer holds dK and dV (64 + 64 registers at d = 128), S^T and dP^T
  // (32 + 32); at d = 64 it needs far fewer, and the producer's loader and dQ writer get
  // room to keep their loop state (at 24 some of it went to the stack).
  static constexpr int kProducerRegisters = kHeadDim <= 64 ? 56 : 24;
  static constexpr int kConsumerRegisters = kHeadDim <= 64 ? 224 : 240;
  static_assert(kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters <= 504, "the register file");
  static_assert(kBlockM == 64, "the S^T and dP^T GEMMs have kBlockM as their N, the dQ GEMM as its M");
  static_assert(kHeadDim % 64 == 0 && kHeadDimV % 64 == 0, "dQ's columns split in two 32-multiple halves");

  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;
  using HeadDimV = Int<kHeadDimV>;
  using Stages = Int<kStages>;

  // The consumer warpgroups stack along the keys (M of S^T, dP^T, dK, dV).
  using KeyWarpgroups = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  // S^T = K Q^T and dP^T = V dO^T: all operands K-major in shared memory.
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlockM, HeadDim>>(), KeyWarpgroups{}));
  using TiledMmaDP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlockM, HeadDimV>>(), KeyWarpgroups{}));
  // dV += P^T dO and dK += dS^T Q: P^T and dS^T from registers (the S^T accumulator's
  // layout), dO and Q read transposed (MN-major) from their row-major tiles.
  using TiledMmaDV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HeadDimV, BlockM>, GMMA::Major::K, GMMA::Major::MN>(),
      KeyWarpgroups{}));
  using TiledMmaDK = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HeadDim, BlockM>, GMMA::Major::K, GMMA::Major::MN>(),
      KeyWarpgroups{}));
  // dQ = dS K: a contraction over all kBlockN keys, so dS goes through shared memory; the
  // warpgroups split dQ's columns.
  using TiledMmaDQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim / 2>, BlockN>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      Layout<Shape<_1, Int<kConsumerWarpgroups>, _1>>{}));

  using SmemLayoutQ = decltype(tile_to_shape(SmemAtomOfRow<Element, kHeadDim>{}, Shape<BlockM, HeadDim, Stages>{}));
  using SmemLayoutDO = decltype(tile_to_shape(SmemAtomOfRow<Element, kHeadDimV>{}, Shape<BlockM, HeadDimV, Stages>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtomOfRow<Element, kHeadDim>{}, Shape<BlockN, HeadDim>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtomOfRow<Element, kHeadDimV>{}, Shape<BlockN, HeadDimV>{}));
  // dS as (queries, keys), keys contiguous: the dQ GEMM's K-major A.
  using SmemLayoutDS = decltype(tile_to_shape(SmemAtomOfRow<Element, kBlockN>{}, Shape<BlockM, BlockN>{}));
  // Transposed views of the same bytes: Q^T and dO^T (head dim, queries, stage) as the dK
  // and dV GEMMs' B, K^T (head dim, keys) as the dQ GEMM's B (the consumers write dS^T
  // into dS at addresses spelled out in kernel.h).
  using SmemLayoutQt = decltype(composition(SmemLayoutQ{},
                                            make_ordered_layout(Shape<HeadDim, BlockM, Stages>{}, Step<_2, _1, _3>{})));
  using SmemLayoutDOt = decltype(composition(
      SmemLayoutDO{}, make_ordered_layout(Shape<HeadDimV, BlockM, Stages>{}, Step<_2, _1, _3>{})));
  using SmemLayoutKt =
      decltype(composition(SmemLayoutK{}, make_ordered_layout(Shape<HeadDim, BlockN>{}, Step<_2, _1>{})));

  // Each consumer warpgroup's columns of dQ in fp32, for the TMA reduce-add into the
  // workspace's accumulator (128-byte swizzle: the fragment's 8-byte stores are conflict-free).
  // K-major atoms tile the rows first, so the two warpgroups' halves are contiguous.
  using SmemLayoutDQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{}, Shape<BlockM, HeadDim>{}));
  using SmemLayoutDQHalf =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<float>{}, Shape<BlockM, Int<kHeadDim / 2>>{}));

  using PipelineQ = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutDO>, 1024> d_o;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutDS>, 1024> d_s;
    cute::array_aligned<float, cute::cosize_v<SmemLayoutDQ>, 1024> d_q;
    // Each query tile's LSE_log2 and dPsum, copied with its Q and dO tiles (onto their barriers).
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dpsum[kStages][kBlockM];
    alignas(16) uint64_t barrier_kv;  // K and V: loaded once per CTA
    typename PipelineQ::SharedStorage pipeline_q;
    typename PipelineQ::SharedStorage pipeline_do;
  };
  static constexpr int kSharedMemoryBytes = sizeof(SharedStorage);
  static_assert(kSharedMemoryBytes <= 227 * 1024, "over the 227 KB a Hopper CTA may opt in to");
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesDO = kBlockM * kHeadDimV * sizeof(Element);
  static constexpr uint32_t kBytesStats = kBlockM * sizeof(float);  // a tile's LSE_log2 or dPsum
  static constexpr uint32_t kBytesKV = kBlockN * (kHeadDim + kHeadDimV) * sizeof(Element);
  static_assert(kBytesQ == kBytesDO, "one transaction count for the Q and dO pipelines");

  template <class Dim>
  using GmemLayout = Layout<Shape<int, Dim, int, int>, Stride<int64_t, _1, int64_t, int64_t>>;
  template <class Dim>
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemLayout<Dim>{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDim>{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<BlockM, HeadDim>{}, _1{}));
  using TmaDO = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDimV>{}, take<0, 2>(SmemLayoutDO{}),
                                       Shape<BlockM, HeadDimV>{}, _1{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDim>{}, SmemLayoutK{}, Shape<BlockN, HeadDim>{},
                                      _1{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDimV>{}, SmemLayoutV{},
                                      Shape<BlockN, HeadDimV>{}, _1{}));
  // The fp32 dQ accumulator as (heads x padded rows, head dim), row-major.
  using GmemLayoutDQ = Layout<Shape<int, HeadDim>, Stride<HeadDim, _1>>;
  using TmaDQ = decltype(make_tma_copy(SM90_TMA_REDUCE_ADD{},
                                       make_tensor(make_gmem_ptr(static_cast<float*>(nullptr)), GmemLayoutDQ{}),
                                       SmemLayoutDQHalf{}));

  struct Params {
    TmaQ tma_q;
    TmaDO tma_do;
    TmaK tma_k;
    TmaV tma_v;
    TmaDQ tma_dq;  // reduce-add of a warpgroup's half of a dQ tile into the accumulator
    Shape<int, HeadDim, int, int> shape_q;
    Shape<int, HeadDimV, int, int> shape_do;
    Shape<int, HeadDim, int, int> shape_k;
    Shape<int, HeadDimV, int, int> shape_v;
    TensorView4d d_k;  // written from registers, rows up to the key sequence's end
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
