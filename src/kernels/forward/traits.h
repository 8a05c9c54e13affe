// Compile-time description of one forward kernel (dtype, head dim): tiles, shared-memory
// layouts, WGMMA shapes, TMA copy types and the kernel's parameters.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "kernels/forward/config.h"
#include "kernels/attention/block_scales.h"
#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/mask.h"
#include "kernels/attention/paged_kv.h"
#include "kernels/attention/seqlen.h"
#include "kernels/attention/split_kv.h"
#include "kernels/attention/tile_scheduler.h"

namespace warpflash::kernels {

using namespace cute;

// The K-major shared-memory atom with the widest swizzle a row of kDim elements fills:
// 128 bytes where the row is a multiple of 128 bytes, 64 bytes for 16-bit d=96 and e4m3
// d=64.
template <class Element, int kDim, int kRowBytes = kDim * int(sizeof(Element))>
using SmemAtomOfRow = std::conditional_t<kRowBytes % 128 == 0, GMMA::Layout_K_SW128_Atom<Element>,
                                         std::conditional_t<kRowBytes % 64 == 0, GMMA::Layout_K_SW64_Atom<Element>,
                                                            GMMA::Layout_K_SW32_Atom<Element>>>;

// kHeadDim: of Q and K; kHeadDimV: of V and O (DeepSeek-V3's prefill: 192 and 128).
template <class Element_, int kHeadDim_, int kHeadDimV_ = kHeadDim_, ForwardVariant kVariant = ForwardVariant::kDefault>
struct ForwardTraits {
  using Element = Element_;  // of Q, K and V
  // FP8 (e4m3) inputs, the FlashAttention-3 paper's third technique: the FP8 WGMMA reads
  // both operands K-major, so V is transposed in shared memory by the producer warpgroup
  // (transpose_v.h), and O is BF16.
  static constexpr bool kFp8 = sizeof(Element) == 1;
  using ElementO = std::conditional_t<kFp8, cutlass::bfloat16_t, Element>;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static_assert(kHeadDimV <= kHeadDim, "an empty K/V side borrows Q's tensor map for V (launch.h)");
  static_assert(!kFp8 || (kHeadDim == kHeadDimV && kHeadDim % 64 == 0), "FP8: head dims 64, 128, 256");
  static_assert(!kFp8 || kWarpSpecialization, "FP8's V transpose runs in the producer warpgroup");
  static constexpr ForwardTileConfig kConfig = forward_tile_config(kHeadDim, kHeadDimV, kVariant, kFp8);
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kStages = kConfig.stages;
  static constexpr int kConsumerWarpgroups = kConfig.consumer_warpgroups;
  static constexpr int kConsumerThreads = kConsumerWarpgroups * cutlass::NumThreadsPerWarpGroup;
  // One producer warpgroup (a single thread issues TMA) plus the consumers; without warp
  // specialization (an ablation) the first consumer thread issues the loads itself.
  static constexpr int kProducerThreads = kWarpSpecialization ? cutlass::NumThreadsPerWarpGroup : 0;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  // setmaxnreg budgets: the producer only computes addresses; consumers hold the S and O
  // accumulators. setmaxnreg only moves registers within the CTA's launch allocation (168
  // a thread for 384 threads, 128 for 512), so one warp of each role per quadrant must add
  // up to at most 3 x 168 = 504 (24 + 2 x 240) or 4 x 128 = 512 (32 + 3 x 160); with
  // 32 + 2 x 240 the consumers' setmaxnreg.inc waited forever (docs/perf-notes.md).
  // d=256's short kernel (O through the Q buffer) needs 40 for its producer thread's loop
  // over Q and packed K/V coordinates (32 spilled 8 bytes once the producer also passed
  // tile indices on), and its consumers fit in 232: 40 + 2 x 232 = 504.
  // FP8: two or three warps of the producer warpgroup transpose V (transpose_v.h): 56 + 2 x 224
  // = 504 (the consumers' S, O and P accumulators need no more than 224).
  // With three consumer warpgroups the producer takes the 32 that 512 leaves: its loop
  // over the tiles also derives split-KV's piece (kernel.h), which spilled 8 bytes in 24.
  // FP8's (d=64) takes 40 for the transposing warps (32 spilled 24 bytes in their block
  // loop), its consumers 152 for S, O and P of 64 x 128: 40 + 3 x 152 = 496.
  // d=192 / 128 takes 40 too: with O's 16-byte row stores (epilogue.h) its producer thread
  // spilled 8 bytes in 24, and its consumers' O of 64 columns fits in 232.
  static constexpr bool kRoomyProducer = kVariant == ForwardVariant::kShort;
  static constexpr bool kRoomyProducerRegisters = kRoomyProducer || (kHeadDim == 192 && kHeadDimV == 128);
  static constexpr int kProducerRegisters =
      kFp8 ? (kConsumerWarpgroups == 3 ? 40 : 56) : kRoomyProducerRegisters ? 40 : kConsumerWarpgroups == 3 ? 32 : 24;
  // d_v = 256's consumers hold a 128-register O accumulator (d_v = 192: 96) and have none
  // to spare: they compute the tile's coordinates again for the epilogue instead of
  // holding them through the main loop. Elsewhere that costs 3-4% on short tiles (d=64
  // causal 512-2k).
  static constexpr bool kRecomputeTileForEpilogue = kHeadDimV >= 192;
  static constexpr bool kSplitRuns = split_runs_compiled(kHeadDim, kHeadDimV);
  // Where the consumers have no registers to hold Q's GMMA descriptors through the loop
  // (mainloop.h, q_operand): 12-16 K slices of Q, or wide S tiles.
  static constexpr bool kRecomputeQDescriptors = kHeadDim >= 192 || kBlockN > 128;
  // The general mask's loop holds the key end of each of a thread's rows (mainloop.h),
  // except 16-bit d=128's 128 x 160 tiles, whose consumers spilled 8 bytes with them, and
  // FP8 d=64 and d=256, which lost 2.5-6% at 16k with them (H100, docs/perf-notes.md).
  static constexpr bool kHoldRowKeyEnds = kFp8 ? kHeadDim == 128 : !(kHeadDim == 128 && kBlockN > 128);
  static constexpr int kConsumerRegisters =
      kConsumerWarpgroups == 2 ? (kFp8 ? 224 : kRoomyProducerRegisters ? 232 : 240) : (kFp8 ? 152 : 160);
  static_assert(kProducerRegisters + (kConsumerWarpgroups == 2 ? 2 : 3) * kConsumerRegisters <=
                    (kConsumerWarpgroups == 2 ? 504 : 512),
                "setmaxnreg budgets exceed the CTA's launch allocation");
  // Lazy rescaling of O (softmax.h) where O's rescale is most of the softmax's work: O
  // wider than the S block, as d=256's (128 FMULs a thread per 128 x 80 block against 40
  // exp2); +3-6% there, -5% for d=128 non-causal and up to -8% for d=64 causal 1k
  // (docs/perf-notes.md). d=192's 128 x 112 tiles (96 against 56) follow d=256 unmeasured.
  // Not FP8: e4m3 keeps 3 bits of P, and against a lagging max each row's largest P is
  // rounded (against the current max it is exactly 1). On peaked rows that doubled d=256's
  // error with block scales (relative L2, median of 24 seeds: 0.0204 lazy, 0.0087 eager);
  // eager costs per-tensor FP8 d=256 2-6%, block scales nothing (they rescale O anyway).
  static constexpr bool kLazyRescale = kHeadDimV > kBlockN && !kFp8;
  // Intra-warpgroup overlap needs the softmax of block n between the waits for S_n and for
  // O += P_{n-1} V: ptxas moved the second wait above the softmax (to write P_n into the
  // registers the PV GEMM still reads), serializing the two. The main loop ends ptxas's
  // scheduling block before that wait: +1-3% at d=128 and 192, +5-7% at d=256's short
  // tiles. Not at d=64: its three consumer warpgroups lost 6-12% (their pingpong of three
  // overlaps enough; the split below lost 5% there too) and its two-warpgroup short causal tiles 2-4% at 1k-2k; nor at d=96
  // (-3%, with the rescale below). Nor FP8 (geomean 1.00, d=256 1k -10.6%). Of the
  // softmax only the maxima and the first half of the rows' exponentials precede the
  // wait; the rest follow it, beside P's packing (mainloop.h). docs/perf-notes.md.
  static constexpr bool kSoftmaxBeforePvWait = kConsumerWarpgroups == 2 && !kFp8 && kHeadDim >= 128;
  // O's rescale by a block's correction (it waits for the previous PV GEMM) is done after
  // the next block's S GEMM is issued, before this block's O += P V, while that S GEMM
  // holds the tensor cores (FlashAttention-3 does so at d > 128), not between the PV GEMM's
  // end and the next issue. With the above, d=128: +0.5-1% at 1k-8k, +5% at causal 16k's
  // 128 x 160 tiles (non-causal 16k varies 665-747 TFLOP/s between runs).
  static constexpr bool kRescaleOBeforePv = kSoftmaxBeforePvWait;
  // The consumer warpgroups take turns at the tensor cores (pingpong.h), except FP8 below
  // d=128, as FlashAttention-3: the GEMMs there are too short to keep in turn for the
  // softmax, and the three warpgroups of d=64 ran 2-4% faster without turns (H100).
  static constexpr bool kPingpongTurns = kPingpong && !(kFp8 && kHeadDim < 128);
  // The K/V multicast needs the producer warpgroup (the ablation's consumer that loads
  // does not wait for the partner CTA's releases).
  static constexpr int kClusterM = kWarpSpecialization ? kConfig.cluster_m : 1;
  using ClusterShape = Shape<Int<kClusterM>, _1, _1>;
  static constexpr bool kSplitTail = kConfig.split_tail;
  // Only a causal mask needs masking past a tile's first visited block (the end of the
  // keys is in that block); the clustered kernels never see one (forward_variant()).
  static constexpr bool kMaskInsideLoop = kConfig.cluster_m == 1;
  static_assert(kClusterM == 1 || kClusterM == 2, "clusters of one or two CTAs");
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "register budgets for 2 or 3 consumer warpgroups");

  static_assert(kBlockM == 64 * kConsumerWarpgroups, "each consumer warpgroup owns 64 query rows");
  static_assert(kHeadDim % 32 == 0 && kHeadDimV % 32 == 0, "rows of 64 or 128-byte swizzle atoms");

  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;
  using HeadDimV = Int<kHeadDimV>;
  using Stages = Int<kStages>;

  // Consumer warpgroups stack along M; each WGMMA atom is 64 rows.
  using MmaWarpgroups = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  // S = Q K^T: both operands K-major in shared memory.
  using TiledMmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlockN, HeadDim>>(), MmaWarpgroups{}));
  // O += P V: P from registers, V read transposed (MN-major) from its row-major tile; FP8
  // reads the K-major copy the producer warps write.
  using MmaAtomPV = decltype(GMMA::rs_op_selector<Element, Element, float, Shape<_64, HeadDimV, BlockN>,
                                                  GMMA::Major::K, kFp8 ? GMMA::Major::K : GMMA::Major::MN>());
  using TiledMmaPV = decltype(make_tiled_mma(MmaAtomPV{}, MmaWarpgroups{}));

  using SmemAtom = SmemAtomOfRow<Element, kHeadDim>;
  using SmemAtomV = SmemAtomOfRow<Element, kHeadDimV>;
  // Paged caches (paged_kv.h) load in kernels of two consumer warpgroups, where the
  // producer warpgroup has the registers (forward_variant_of() routes them there): d=128's
  // default and d=64's short causal kernel (rows of one or two swizzle atoms; the producer
  // takes 40, the consumers give up 8: 232; the one-warp gather spilled at 32, the TMA
  // loads at 24), and d=256's short one (its 40). Not d=64's default kernel (three consumer
  // warpgroups leave its producer 32, where the four-warp gather spilled), nor d=96's
  // three 64-byte atoms a row (its producer spilled at 32), nor d=192's or d=256's default
  // kernels, whose consumers need their 240.
  // Columns of a K or V row's shared-memory atom (the paged loads' box width), and atoms a row.
  static constexpr int kAtomColumnsK = decltype(size<1>(SmemAtom{}))::value;
  static constexpr int kAtomColumnsV = decltype(size<1>(SmemAtomV{}))::value;
  static constexpr int kAtomsPerRow = kHeadDim / kAtomColumnsK;
  static constexpr int kAtomsPerRowV = kHeadDimV / kAtomColumnsV;
  static constexpr bool kPagedVariant =
      kConsumerWarpgroups == 2 && (kVariant == ForwardVariant::kDefault || kVariant == ForwardVariant::kShortCausal ||
                                   kVariant == ForwardVariant::kShort);
  static constexpr bool kPagedKv =
      kPagedVariant && !kFp8 && (kRoomyProducer || (kAtomsPerRow <= 2 && kAtomsPerRowV <= 2 && kHeadDim <= 128));
  static_assert(!kPagedKv || kClusterM == 1, "paged loads signal this CTA's barriers only");
  // KV-cache left padding (ForwardArgs::leftpad_k) in the same kernels as paged caches
  // (dispatch.h routes both there): SequenceLengths::of's offset spilled other producers.
  static constexpr bool kLeftPadding = kPagedKv;
  static constexpr bool kGeneralRoomyProducer = kPagedKv && kConsumerWarpgroups == 2 && !kRoomyProducer;
  static constexpr int kGeneralProducerRegisters = kGeneralRoomyProducer ? 40 : kProducerRegisters;
  static constexpr int kGeneralConsumerRegisters = kGeneralRoomyProducer ? 232 : kConsumerRegisters;
  static_assert(kGeneralProducerRegisters + (kConsumerWarpgroups == 2 ? 2 : 3) * kGeneralConsumerRegisters <=
                    (kConsumerWarpgroups == 2 ? 504 : 512),
                "setmaxnreg budgets exceed the CTA's launch allocation");
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<BlockM, HeadDim>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom{}, Shape<BlockN, HeadDim, Stages>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtomV{}, Shape<BlockN, HeadDimV, Stages>{}));
  // V^T: the same bytes as V seen as (head_dim_v, block_n, stage); FP8: a buffer of its
  // own, keys contiguous, written by the producer warps with the keys of every 16 permuted
  // (transpose_v.h).
  using SmemLayoutVt = std::conditional_t<
      kFp8, decltype(tile_to_shape(SmemAtomOfRow<Element, kBlockN>{}, Shape<HeadDimV, BlockN, Stages>{})),
      decltype(composition(SmemLayoutV{}, make_ordered_layout(Shape<HeadDimV, BlockN, Stages>{}, Step<_2, _1, _3>{})))>;
  // Producer warps 1 and 2 transpose V (3 where a block has a multiple of three 16-key
  // groups, as d=128's 192: transpose_v.h gives each warp a power-of-two run of them);
  // warp 0's first thread loads.
  static constexpr int kTransposeThreads = kFp8 ? (kBlockN / 16 % 3 == 0 ? 3 : 2) * 32 : 0;
  using PipelineVt = cutlass::PipelineAsync<kStages>;

  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;

  // What a CTA may use of the 227 KB opt-in, leaving room for the barriers.
  static constexpr int kSharedMemoryBudget = 226 * 1024;
  static constexpr int kSmemQBytes = cute::cosize_v<SmemLayoutQ> * sizeof(Element);
  static constexpr int kSmemKVBytes =
      (cute::cosize_v<SmemLayoutK> + cute::cosize_v<SmemLayoutV> * (kFp8 ? 2 : 1)) * sizeof(Element);
  static constexpr int kStagesQ = kConfig.q_stages;
  static_assert(kStagesQ * kSmemQBytes + kSmemKVBytes <= kSharedMemoryBudget, "Q and K/V tiles exceed shared memory");

  // O leaves through shared memory and a TMA store where a buffer fits beside Q and K/V
  // (d=64's and d=128's kernels) or the Q buffer can take it (below): each consumer
  // warpgroup writes its 64 rows with stmatrix into its own part of the buffer and stores
  // them, so no warpgroup waits for another at the end of a tile. Otherwise (d=256's default
  // kernel) each thread stores its fragment to global memory.
  static constexpr int kSmemOBytes = kBlockM * kHeadDimV * sizeof(ElementO);
  static constexpr bool kOwnBufferO = kStagesQ * kSmemQBytes + kSmemKVBytes + kSmemOBytes <= kSharedMemoryBudget;
  // With one Q buffer and no room for an O buffer (d=256's 128 x 64 short kernel), each
  // warpgroup writes its O into its own 64 rows of the Q buffer, which only its own
  // S = Q K^T GEMMs read; the producer loads the next Q once the TMA stores have read them.
  // Not wider S tiles (d=256's 128 x 80, d=192's): their consumers have no registers left
  // for it (d=256's spill).
  static constexpr bool kOInQBuffer = !kOwnBufferO && kStagesQ == 1 && kBlockN <= 64 && kHeadDimV == kHeadDim && !kFp8;
  static constexpr bool kTmaStoreO = kOwnBufferO || kOInQBuffer;
  // Otherwise (d = 192 with either d_v, d = 256's default kernel) O leaves from registers
  // in 16-byte rows after a transpose within each quad of threads (epilogue.h; d = 192
  // +4-24% at 512-4k keys, d = 256 +6-10% at 2k-4k). The kernels above store the problems
  // TMA cannot take from registers too, one 4-byte store a column pair (d = 128's long
  // tiles spilled with rows).
  static_assert(!(kSplitTail && kOInQBuffer), "a split piece's O leaves from registers and does not release Q");
  using SmemLayoutOWarpgroup = std::conditional_t<
      kOInQBuffer, decltype(composition(SmemLayoutQ{}, Layout<Shape<_64, HeadDim>, Stride<_1, BlockM>>{})),
      decltype(tile_to_shape(SmemAtomOfRow<ElementO, kHeadDimV>{}, Shape<_64, HeadDimV>{}))>;
  // One warpgroup's share of O = P V, for partitioning its 64 rows.
  using TiledMmaPVWarpgroup = decltype(make_tiled_mma(MmaAtomPV{}));
  struct NoBuffer {};
  using BufferO = std::conditional_t<
      kOwnBufferO, cute::array_aligned<ElementO, kConsumerWarpgroups * cute::cosize_v<SmemLayoutOWarpgroup>, 1024>,
      NoBuffer>;
  using BufferVt = std::conditional_t<kFp8, cute::array_aligned<Element, cute::cosize_v<SmemLayoutVt>, 1024>, NoBuffer>;
  struct NoPipeline {};
  using PipelineVtStorage = std::conditional_t<kFp8, typename PipelineVt::SharedStorage, NoPipeline>;

  struct SharedStorage {
    cute::array_aligned<Element, kStagesQ * cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> v;
    BufferVt vt;
    BufferO o;
    // The persistent kernel reuses the Q buffers: full when loaded, empty when every
    // consumer has issued its last S = Q K^T of the tile (with kOInQBuffer: when its
    // warpgroup's O has left the buffer).
    alignas(16) uint64_t barrier_q_full[kStagesQ];
    uint64_t barrier_q_empty[kStagesQ];
    typename PipelineKV::SharedStorage pipeline_k;
    typename PipelineKV::SharedStorage pipeline_v;
    PipelineVtStorage pipeline_vt;  // FP8: V^T written, V^T read
    unsigned tile_index[kStagesQ];  // the scheduler index of the tile whose Q a buffer holds
    // A gathered paged cache (paged_kv.h): where the keys of the blocks being loaded lie
    // (each producer warp's rows), and the blocks the first producer warp posts to the
    // others, one per ring slot, with their barriers.
    alignas(16) int64_t gather_rows[kPagedKv ? kBlockN : 2];
    GatherJob gather_jobs[kPagedKv ? kStages : 1];
    uint64_t gather_posted[kPagedKv ? kStages : 1];
  };
  static constexpr int kSharedMemoryBytes = sizeof(SharedStorage);
  static_assert(kSharedMemoryBytes <= 227 * 1024, "over the 227 KB a Hopper CTA may opt in to");
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesK = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesV = kBlockN * kHeadDimV * sizeof(Element);

  // Global tensors as TMA sees them: (seqlen, head_dim, heads, batch), head_dim contiguous.
  template <class Dim>
  using GmemLayout = Layout<Shape<int, Dim, int, int>, Stride<int64_t, _1, int64_t, int64_t>>;
  template <class Dim, class Pointee = Element const>
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<Pointee*>(nullptr)), GmemLayout<Dim>{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor<HeadDim>{}, SmemLayoutQ{}, Shape<BlockM, HeadDim>{}, _1{}));
  // With a cluster each CTA loads its share of a K/V block and multicasts it to both.
  using CopyOpKV = std::conditional_t<kClusterM == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  using TmaK = decltype(make_tma_copy(CopyOpKV{}, GmemTensor<HeadDim>{}, take<0, 2>(SmemLayoutK{}),
                                      Shape<BlockN, HeadDim>{}, Int<kClusterM>{}));
  using TmaV = decltype(make_tma_copy(CopyOpKV{}, GmemTensor<HeadDimV>{}, take<0, 2>(SmemLayoutV{}),
                                      Shape<BlockN, HeadDimV>{}, Int<kClusterM>{}));
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensor<HeadDimV, ElementO>{}, SmemLayoutOWarpgroup{},
                                      Shape<_64, HeadDimV>{}, _1{}));

  struct Params {
    TmaQ tma_q;
    TmaK tma_k;
    TmaV tma_v;
    Shape<int, HeadDim, int, int> shape_q;
    Shape<int, HeadDim, int, int> shape_k;
    Shape<int, HeadDimV, int, int> shape_v;
    Shape<int, HeadDimV, int, int> shape_o;
    ElementO* o;
    int64_t o_batch_stride;
    int64_t o_seqlen_stride;
    int64_t o_head_stride;
    float* lse;  // may be null; row r of (batch, head) at lse_batch_stride * batch + lse_head_stride * head + r
    int64_t lse_batch_stride;
    int64_t lse_head_stride;
    int heads_per_kv_head;
    // The softmax runs on exp2: scores times scale_log2 = softmax scale * log2(e), or with
    // a softcap (softcap_prescale > 0) tanh(scores * softcap_prescale) times softcap * log2(e).
    float scale_log2;
    float softcap_prescale;
    float const* sinks;  // may be null: one logit per query head (natural-log units)
    // Dense equal-length sequences, no mask or a causal one, no softcap: the loop with
    // CausalMask (kernel.h).
    bool plain;
    SequenceLengths seq_q;
    SequenceLengths seq_k;
    AttentionMask mask;  // window and chunk; sequence lengths set per tile (tile_work)
    ForwardTileScheduler scheduler;
    TmaO tma_o;  // set when kTmaStoreO
    // With an active split tail (scheduler.split) or split-KV (split_kv, the general
    // loop): per slot (SplitTail::slot, or the piece's index) a piece's normalized O,
    // (kBlockM, kHeadDimV), then its LSE, (kBlockM), fp32.
    float* split_workspace;
    // Dynamic tile order (general loop only; null: static): a zeroed counter in the
    // workspace from which the producer threads take the next tile index (kernel.h).
    unsigned* tile_counter;
    // FP8: FlashAttention-3's descales, fp32 (batch, heads_kv) at descale_batch_stride *
    // batch + kv head (null: 1). Q's and K's scale the scores, V's the output.
    float const* q_descale;
    float const* k_descale;
    float const* v_descale;
    int64_t descale_batch_stride;
    // FP8 block quantization (block_scales.h): Q's scale of a consumer warpgroup's 64 rows
    // multiplies its scores, K's of a K/V block the block's scores, V's the block's P V.
    BlockScales q_block_scale;
    BlockScales k_block_scale;
    BlockScales v_block_scale;
    // The general loop's split of each tile's K/V blocks into pieces (none: one piece).
    SplitKv split_kv;
    // Packed GQA (mask.pack query heads per K/V head as one tile's rows): query row p is
    // position p / pack of query head head * pack + p % pack. Its O row lies at
    // (p / pack) * o_seqlen_stride + (p % pack) * o_group_stride from the head's, its LSE
    // at (p / pack) + (p % pack) * lse_group_stride. With several positions no TMA box
    // has the rows' shape: the consumers load them from q_rows (with the caller's strides;
    // null: TMA loads Q) and write O from registers.
    Element const* q_rows;
    int64_t q_batch_stride;
    int64_t q_seqlen_stride;
    int64_t q_head_stride;
    int64_t o_group_stride;
    int64_t lse_group_stride;
    // Dense K/V only: sequence b's K/V rows at batch index kv_batch_idx[b] (null: b).
    int const* kv_batch_idx;
    // A paged KV cache (general loop only): K/V blocks loaded page by page (paged_kv.h).
    PagedKv paged;
    // heads_per_kv_head again, as a multiply and a shift (fast_divmod.h): FP8's consumers
    // find the K/V head of their block scales at every block, where the division took ~25
    // instructions a block. The other divisions keep the int: with the divmod everywhere
    // four kernels spilled 4-8 bytes (docs/perf-notes.md).
    FastDivmod kv_group;
  };
  static constexpr int kSplitSlotFloats = kBlockM * (kHeadDimV + 1);
};

}  // namespace warpflash::kernels
