// The forward main loop: the consumers' S = Q K^T, masking, online softmax and O += P V
// over the K/V tiles (the producer's loads: loads.h; the Q buffers' barriers both share:
// q_buffers.h).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "kernels/attention/fragment.h"
#include "kernels/forward/pingpong.h"
#include "kernels/forward/q_buffers.h"
#include "kernels/attention/softmax.h"
#include "kernels/attention/tile_work.h"
#include "kernels/forward/traits.h"

namespace warpflash::kernels {

using namespace cute;

// K/V blocks are visited from the last to the first: the blocks that need masking (the
// end of the keys, the causal diagonal) come first and the loop then runs mask-free.
template <class Traits>
struct ForwardMainloop {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  using PipelineKV = typename Traits::PipelineKV;
  using PipelineState = typename PipelineKV::PipelineState;
  using QBuffers = ForwardQBuffers<Traits>;

  // The V^T operand's buffer: V's own bytes, or FP8's transposed copy.
  CUTE_DEVICE static Element* vt_data(SharedStorage& storage) {
    if constexpr (Traits::kFp8) {
      return storage.vt.data();
    } else {
      return storage.v.data();
    }
  }

  // The V stage that goes with K stage `read_k` minus one: V trails K by one block, and
  // deriving its state saves the consumers the registers of a second one.
  CUTE_DEVICE static PipelineState previous(PipelineState read_k) {
    bool wraps = read_k.index() == 0;
    return PipelineState(wraps ? Traits::kStages - 1 : read_k.index() - 1, read_k.phase() ^ (wraps ? 1u : 0u), 0);
  }

  // A consumer thread is done with a K/V slot. In a cluster the slot may only be refilled
  // once the consumers of both CTAs are done (the refill is multicast), so lane 0 of each
  // consumer warp arrives on the slot's barrier in both CTAs (kernel.h sets the count).
  // No register holds an arrival target (CUTLASS's per-thread targets made d=256's
  // consumers spill) and no branch is taken (a warp-index shuffle and a branch per release
  // cost d=128 4%).
  // (FP8's consumers read V^T from the transposing warps' pipeline: Pipeline is PipelineVt.)
  template <class Pipeline, class PipelineStorage>
  CUTE_DEVICE static void release_kv(Pipeline& pipeline, PipelineStorage& storage, PipelineState state) {
    if constexpr (Traits::kClusterM == 1) {
      pipeline.consumer_release(state);
    } else {
      static_assert(Traits::kClusterM == 2, "arrivals for clusters of two CTAs");
      uint32_t barrier = cute::cast_smem_ptr_to_uint(&storage.empty_barrier_[state.index()]);
      asm volatile(
          "{\n\t.reg .pred leader;\n\t.reg .b32 remote;\n\t"
          "elect.sync _|leader, 0xffffffff;\n\t"
          "mapa.shared::cluster.u32 remote, %0, 0;\n\t"
          "@leader mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t"
          "mapa.shared::cluster.u32 remote, %0, 1;\n\t"
          "@leader mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}"
          :
          : "r"(barrier)
          : "memory");
    }
  }

  // A consumer warpgroup whose 64 rows all lie past the tile's rows (packed GQA's decode:
  // 4 rows of 128; the last tile of a short sequence) computes nothing and keeps only its
  // part of the protocol: the Q buffer released once full, each block's K and V slots
  // released once V's is full, one pingpong turn per block and one more, as mma() takes.
  // (V full means the producer has taken K's slot for this block before V's, so both
  // arrivals count towards this fill.) The other warpgroup then has the tensor cores and
  // the SM's issue slots to itself.
  template <class Pingpong>
  CUTE_DEVICE static void pass_blocks(SharedStorage& storage, PipelineKV& pipeline_k, PipelineKV& pipeline_v,
                                      PipelineState& read_k, Pingpong const& pingpong, TileWork const& work,
                                      int round) {
    int q_stage = QBuffers::q_stage(round);
    cutlass::arch::ClusterBarrier::wait(&storage.barrier_q_full[q_stage], QBuffers::q_phase(round));
    if constexpr (!Traits::kOInQBuffer) QBuffers::release_q(storage, round);
    for (int blocks_left = work.n_block_end - work.n_block_begin; blocks_left > 0; --blocks_left) {
      pingpong.wait_turn();
      pingpong.pass_turn();
      pipeline_v.consumer_wait(read_k);
      release_kv(pipeline_k, storage.pipeline_k, read_k);
      release_kv(pipeline_v, storage.pipeline_v, read_k);
      ++read_k;
    }
    pingpong.wait_turn();
    pingpong.pass_turn();
  }

  // Packed GQA with several query positions (Params::q_rows): each consumer warpgroup
  // loads its 64 rows of the tile's Q into the round's buffer, 16 bytes a thread at a
  // time, zeros past the tile's rows, then makes them visible to its WGMMAs.
  CUTE_DEVICE static void load_q_rows(Params const& params, SharedStorage& storage, int round, TileCoord tile,
                                      int rows, int consumer_tid) {
    constexpr int kChunk = 16 / sizeof(Element);  // elements per 16-byte load
    constexpr int kChunksPerRow = Traits::kHeadDim / kChunk;
    int warpgroup = consumer_tid / cutlass::NumThreadsPerWarpGroup;
    int warpgroup_tid = consumer_tid % cutlass::NumThreadsPerWarpGroup;
    Tensor sQ = QBuffers::smem_q(storage, round);
    int pack = params.mask.pack;
    Element const* q_group = params.q_rows + tile.batch * params.q_batch_stride +
                             int64_t(tile.head) * pack * params.q_head_stride;
    int row_base = tile.m_block * Traits::kBlockM + warpgroup * 64;
    for (int i = warpgroup_tid; i < 64 * kChunksPerRow; i += cutlass::NumThreadsPerWarpGroup) {
      int r = i / kChunksPerRow, col = i % kChunksPerRow * kChunk;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (row_base + r < rows) {
        unsigned head_in_group;
        int position = int(params.mask.by_pack.divmod(unsigned(row_base + r), head_in_group));
        value = *reinterpret_cast<uint4 const*>(q_group + position * params.q_seqlen_stride +
                                                int64_t(head_in_group) * params.q_head_stride + col);
      }
      *reinterpret_cast<uint4*>(&sQ(warpgroup * 64 + r, col)) = value;
    }
    cutlass::arch::fence_view_async_shared();  // the WGMMAs read Q through the async proxy
    cutlass::arch::NamedBarrier::sync(cutlass::NumThreadsPerWarpGroup,
                                      static_cast<uint32_t>(ForwardBarrier::kQRows0) + warpgroup);
  }

  // Run by every consumer thread (consumer_tid in [0, kConsumerThreads)) for each tile
  // with work (the CTA's tile in `round`, scheduler index `index`) over its K/V blocks [work.n_block_begin,
  // work.n_block_end). Leaves the unnormalized O in acc_o; the caller finalizes the softmax.
  // after_block(n_block) runs once this thread has released K/V block n_block (the kernel
  // without warp specialization loads there).
  // Mask: CausalMask (the plain kernel: no softcap, nothing per sequence) or AttentionMask
  // (kernel.h).
  // pipeline_v: where V^T comes from (FP8: the transposing warps, kernel.h).
  // Returns what O is still to be multiplied by: FP8 with V block scales, the scale of the
  // V block added last (below); 1 otherwise.
  template <class Mask, class PipelineV, class AccO, class Softmax, class Pingpong, class AfterBlock>
  CUTE_DEVICE static float mma(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                              PipelineV& pipeline_v, PipelineState& read_k, Pingpong const& pingpong,
                              unsigned index, TileCoord tile, TileWork const& work, int round, int consumer_tid,
                              AccO& acc_o, Softmax& softmax, AfterBlock&& after_block) {
    Tensor sQ = QBuffers::smem_q(storage, round);
    Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(vt_data(storage)), typename Traits::SmemLayoutVt{});

    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(consumer_tid);
    auto thr_pv = mma_pv.get_thread_slice(consumer_tid);
    // The Q operand's K slices are 64-bit shared-memory descriptors (16 for d=256): held
    // through the loop they took the registers that d=256's and d=128's 128 x 160
    // consumers lack (they spilled), so there the descriptors are derived again for each
    // block from an opaque copy of Q's address.
    constexpr bool kGeneralMask = std::is_same_v<Mask, AttentionMask>;
    auto q_operand = [&] {
      if constexpr (Traits::kRecomputeQDescriptors && kGeneralMask) {
        Element* q = storage.q.data() + QBuffers::q_stage(round) * cosize_v<typename Traits::SmemLayoutQ>;
        asm volatile("" : "+l"(q));
        return thr_qk.partition_fragment_A(make_tensor(make_smem_ptr(q), typename Traits::SmemLayoutQ{}));
      } else {
        return thr_qk.partition_fragment_A(sQ);
      }
    };
    Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrVt = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)

    // (row, column) of every S element this thread holds, for masking.
    Tensor cS = make_identity_tensor(Shape<typename Traits::BlockM, typename Traits::BlockN>{});
    Tensor tScS = thr_qk.partition_C(cS);
    Tensor tScS_rc = make_tensor(tScS.data(), rowcol_layout(tScS.layout()));

    Tensor acc_s = partition_fragment_C(mma_qk, Shape<typename Traits::BlockM, typename Traits::BlockN>{});
    Tensor acc_s_rc = rowcol_view(acc_s);
    Tensor acc_o_rc = rowcol_view(acc_o);
    int row_base = tile.m_block * Traits::kBlockM;
    auto row_of = [&](int r) { return row_base + get<0>(tScS_rc(r, 0)); };  // of this thread's row r
    // Both loops mask with key limits once per row, then one compare and select per score:
    // written as mask.visible(row, col) per element, the compiler branched around every
    // score and the diagonal block cost ~4000 cycles more per tile (docs/perf-notes.md).
    //
    // The general loop: which blocks need masking are two thresholds per tile (mask.h),
    // held through the loop and compared per block, with the key end of each of this
    // thread's rows where registers allow (traits.h). A score's column is compared as
    // FlashAttention-3 does, thread 0's column (a compile-time constant) against the end
    // less this thread's first column. The left bound (windows, chunks) is derived again in
    // the blocks that cross it. Derived in every masked block, the mask cost ~330
    // instructions a warp per block at FP8 d=64 (the sequence lengths loaded again, a
    // division per row, an add per score) against ~130; derived in every block, as d=64's
    // three 16-bit consumer warpgroups did before they held the thresholds, ~280 more
    // (docs/perf-notes.md).
    constexpr bool kHoldRowKeyEnds = kGeneralMask && Traits::kHoldRowKeyEnds;
    constexpr int kRowsPerThread = decltype(size<0>(acc_s_rc))::value;
    int right_mask_begin = 0, left_mask_end = 0;
    cute::array<int, kHoldRowKeyEnds ? kRowsPerThread : 1> row_key_end;
    if constexpr (kGeneralMask) {
      AttentionMask const mask =
          tile_mask<Traits::kLeftPadding>(params.seq_q, params.seq_k, params.mask, tile.batch);
      right_mask_begin = mask.right_mask_begin(tile.m_block, Traits::kBlockM, Traits::kBlockN);
      left_mask_end = mask.left_mask_end(tile.m_block, Traits::kBlockM, Traits::kBlockN);
      if constexpr (kHoldRowKeyEnds) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRowsPerThread; ++r) row_key_end[r] = mask.key_end(row_of(r));
      }
    }
    // Thread 0's (row, column) of every S element: this thread's are these plus its own
    // first row and column.
    auto thr0_qk = mma_qk.get_thread_slice(0);
    Tensor t0ScS = thr0_qk.partition_C(cS);
    Tensor t0ScS_rc = make_tensor(t0ScS.data(), rowcol_layout(t0ScS.layout()));
    int const first_col = get<1>(tScS_rc(0, 0));
    auto mask_of_tile = [&] {
      if constexpr (kGeneralMask) {
        int batch = tile.batch;
        if constexpr (Traits::kRecomputeTileForEpilogue) {  // nor the batch: from the tile index
          unsigned tile_index = index;
          asm volatile("" : "+r"(tile_index));
          int piece;
          batch = params.scheduler.tile(params.split_kv.tile_of(tile_index, piece)).batch;
        }
        return tile_mask<Traits::kLeftPadding>(params.seq_q, params.seq_k, params.mask, batch);
      } else {
        return CausalMask{params.seq_q.seqlen, params.seq_k.seqlen, params.mask.window_right == 0};
      }
    };
    // -inf for the scores of row r whose column, as `columns` (tScS_rc or t0ScS_rc) gives
    // it, is at or past end; mask_columns_before: before begin, thread 0's columns.
    auto mask_columns_from = [&](auto const& columns, int r, int end) {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(acc_s_rc); ++c) {
        if (int(get<1>(columns(r, c))) >= end) acc_s_rc(r, c) = -INFINITY;
      }
    };
    auto mask_columns_before = [&](int r, int begin) {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(acc_s_rc); ++c) {
        if (int(get<1>(t0ScS_rc(r, c))) < begin) acc_s_rc(r, c) = -INFINITY;
      }
    };
    auto mask_block = [&](int n_block) {
      if constexpr (kGeneralMask) {
        int col_base = n_block * Traits::kBlockN + first_col;
        if (n_block >= right_mask_begin) {
          if constexpr (kHoldRowKeyEnds) {
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRowsPerThread; ++r) mask_columns_from(t0ScS_rc, r, row_key_end[r] - col_base);
          } else {
            Mask const mask = mask_of_tile();
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRowsPerThread; ++r) mask_columns_from(t0ScS_rc, r, mask.key_end(row_of(r)) - col_base);
          }
        }
        if (n_block < left_mask_end) {
          Mask const mask = mask_of_tile();
          CUTLASS_PRAGMA_UNROLL
          for (int r = 0; r < kRowsPerThread; ++r) mask_columns_before(r, mask.key_begin(row_of(r)) - col_base);
        }
      } else {
        // The plain loop (dense, causal or none) asks per block and compares this thread's
        // own columns: with thread 0's form d=64's plain loop spilled 4 bytes (160
        // registers a consumer thread).
        Mask const mask = mask_of_tile();
        if (!mask.block_needs_mask(tile.m_block, n_block, Traits::kBlockM, Traits::kBlockN)) return;
        int block_start = n_block * Traits::kBlockN;
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRowsPerThread; ++r) mask_columns_from(tScS_rc, r, mask.key_end(row_of(r)) - block_start);
      }
    };
    // Softcap before the mask (tanh(-inf) would not stay -inf).
    auto scores_of_block = [&](int n_block, bool may_need_mask) {
      if constexpr (kGeneralMask) {
        if (params.softcap_prescale > 0.f) apply_softcap(acc_s, params.softcap_prescale);
      }
      if (may_need_mask) mask_block(n_block);
    };
    // P in the A-operand layout of O += P V; written only while no PV GEMM reads it.
    auto p_layout = [&] {
      if constexpr (Traits::kFp8) {
        return accumulator_as_fp8_a_operand(acc_s.layout());
      } else {
        return accumulator_as_a_operand(acc_s.layout());
      }
    };
    Tensor tOrP = make_tensor<Element>(p_layout());
    auto store_p = [&] {
      if constexpr (Traits::kFp8) {
        // Four values (one 32-bit register of the operand) at a time.
        Tensor s_in_a_order = make_tensor(acc_s.data(), accumulator_in_fp8_a_order(acc_s.layout()));
        cutlass::NumericArrayConverter<Element, float, 4> convert;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tOrP); i += 4) {
          cutlass::Array<float, 4> four{s_in_a_order(i), s_in_a_order(i + 1), s_in_a_order(i + 2), s_in_a_order(i + 3)};
          *reinterpret_cast<cutlass::Array<Element, 4>*>(&tOrP(i)) = convert(four);
        }
      } else {
        Tensor p = convert_fragment<Element>(acc_s);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(p); ++i) tOrP(i) = p(i);
      }
    };

    // Once the last S of the tile is computed the producer may load the next tile's Q.
    auto release_q_after = [&](bool last_block) {
      if (!Traits::kOInQBuffer && last_block) QBuffers::release_q(storage, round);
    };
    int n_block_begin = work.n_block_begin;

    // FP8 block quantization (block_scales.h), where K or V scales are given: a K block's
    // scale joins its softmax scale; O is held in units of the scale of the V block added
    // last, rescaled by the ratio of consecutive V scales together with the softmax's
    // correction, so that P itself is never scaled (a small scale would push it into
    // e4m3's subnormals). A block's scales are read before its GEMMs, which hide the load.
    bool kv_scaled = false;
    float base_scale_log2 = 0.f, o_unit = 1.f, k_scale = 1.f, v_scale = 1.f;
    if constexpr (Traits::kFp8) {
      kv_scaled = params.k_block_scale.data != nullptr || params.v_block_scale.data != nullptr;
      base_scale_log2 = softmax.scale_log2;
    }
    // The scales' rows from the parameters at each block: held through the loop, their
    // pointers crowd the consumers' registers.
    auto read_kv_scales = [&](int n_block) {
      if constexpr (Traits::kFp8) {
        if (kv_scaled) {
          int kv_head = params.kv_group.div(tile.head);
          k_scale = params.k_block_scale.at(tile.batch, kv_head, n_block * Traits::kBlockN);
          v_scale = params.v_block_scale.at(tile.batch, kv_head, n_block * Traits::kBlockN);
        }
      }
    };
    // (Only where a scale changes: the approximate division would make x / x differ from 1.)
    auto scale_scores = [&] {
      if constexpr (Traits::kFp8) {
        float scale_log2 = base_scale_log2 * k_scale;
        if (kv_scaled && scale_log2 != softmax.scale_log2) softmax.set_scale(scale_log2);
      }
    };
    auto change_o_unit = [&](auto& correction) {
      if constexpr (Traits::kFp8) {
        if (kv_scaled && v_scale != o_unit) {
          float ratio = o_unit / v_scale;
          CUTLASS_PRAGMA_UNROLL
          for (int r = 0; r < int(correction.size()); ++r) correction[r] *= ratio;
          o_unit = v_scale;
        }
      }
    };

    // A K/V slot is full. A gathered paged cache (paged_kv.h) wrote it with cp.async, in the
    // generic proxy: a proxy fence before the WGMMAs read it through the async proxy.
    auto wait_kv = [&](auto& pipeline, PipelineState state) {
      pipeline.consumer_wait(state);
      if constexpr (kGeneralMask && Traits::kPagedKv) {
        if (params.paged.gather) cutlass::arch::fence_view_async_shared();
      }
    };

    int q_stage = QBuffers::q_stage(round);
    cutlass::arch::ClusterBarrier::wait(&storage.barrier_q_full[q_stage], QBuffers::q_phase(round));
    if constexpr (kGeneralMask) {
      if (params.q_rows != nullptr) load_q_rows(params, storage, round, tile, work.mask.rows(), consumer_tid);
    }

    // The first block: S only (O is still zero, nothing to rescale).
    int n_block = work.n_block_end - 1;
    read_kv_scales(n_block);
    wait_kv(pipeline_k, read_k);
    pingpong.wait_turn();
    warpgroup_gemm</*kZeroInit=*/true>(mma_qk, q_operand(), tSrK(_, _, _, read_k.index()), acc_s);
    pingpong.pass_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    release_kv(pipeline_k, storage.pipeline_k, read_k);
    ++read_k;
    release_q_after(n_block == n_block_begin);
    scores_of_block(n_block, true);
    scale_scores();
    softmax.update(acc_s_rc);
    o_unit = v_scale;  // O is still zero
    store_p();

    // Intra-warpgroup overlap (FlashAttention-3, section 3.2): S of the next block is
    // issued before O += P V of this one, and the softmax of the next block runs while
    // the PV GEMM is still on the tensor cores. Counted by the blocks left, so that a
    // kernel without masks inside the loop holds one counter, not the block and its end.
    // kRescaleOBeforePv: the correction O still awaits (1: none).
    cute::array<float, decltype(size<0>(acc_s_rc))::value> pending_correction;
    pending_correction.fill(1.f);
    for (int blocks_left = n_block - n_block_begin; blocks_left > 0; --blocks_left) {
      n_block = n_block_begin + blocks_left - 1;
      read_kv_scales(n_block);
      PipelineState read_v = previous(read_k);
      wait_kv(pipeline_k, read_k);
      wait_kv(pipeline_v, read_v);
      pingpong.wait_turn();
      warpgroup_gemm</*kZeroInit=*/true>(mma_qk, q_operand(), tSrK(_, _, _, read_k.index()), acc_s);
      if constexpr (!kIntraWarpgroupOverlap) warpgroup_wait<0>();
      if constexpr (Traits::kRescaleOBeforePv) Softmax::rescale_any(acc_o_rc, pending_correction);
      warpgroup_gemm</*kZeroInit=*/false>(mma_pv, tOrP, tOrVt(_, _, _, read_v.index()), acc_o);
      pingpong.pass_turn();
      if constexpr (!kIntraWarpgroupOverlap) warpgroup_wait<0>();
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc_s);
      release_kv(pipeline_k, storage.pipeline_k, read_k);
      ++read_k;
      release_q_after(blocks_left == 1);
      scores_of_block(n_block, Traits::kMaskInsideLoop);
      scale_scores();
      constexpr int kRowsHere = decltype(size<0>(acc_s_rc))::value;
      cute::array<float, kRowsHere> correction;
      // kSoftmaxBeforePvWait: every row's max and the first half of the rows' exponentials
      // before the PV wait, the rest after it, so that packing P (it overwrites the operand
      // the PV GEMM reads, so it must follow the wait) runs beside the second half's
      // exponentials instead of alone before the next turn. FlashAttention-3's SASS waits
      // after ~14 of its 66 exponentials; +3-10% on causal and non-causal d=128 and 192,
      // d=256 level (H100, docs/perf-notes.md, thirty-eighth and thirty-ninth sections).
      if constexpr (Traits::kSoftmaxBeforePvWait) {
        softmax.update_max(acc_s_rc, correction);
        softmax.template exponentiate_rows<0, kRowsHere / 2>(acc_s_rc, correction);
        // (heads_per_kv_head divides: at least 1.)
        end_schedule_block(params.heads_per_kv_head <= 0);
      } else {
        correction = softmax.update(acc_s_rc);
      }
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_o);
      release_kv(pipeline_v, storage.pipeline_v, read_v);
      if constexpr (Traits::kSoftmaxBeforePvWait) {
        softmax.template exponentiate_rows<kRowsHere / 2, kRowsHere>(acc_s_rc, correction);
      }
      change_o_unit(correction);
      after_block(n_block + 1);  // its K went after the previous S, its V just now
      if constexpr (Traits::kRescaleOBeforePv) {
        pending_correction = correction;
      } else {
        Softmax::rescale_any(acc_o_rc, correction);
      }
      store_p();
    }

    PipelineState read_v = previous(read_k);  // read_k carries over to the CTA's next tile
    wait_kv(pipeline_v, read_v);
    if constexpr (Traits::kRescaleOBeforePv) Softmax::rescale_any(acc_o_rc, pending_correction);
    pingpong.wait_turn();
    warpgroup_gemm</*kZeroInit=*/false>(mma_pv, tOrP, tOrVt(_, _, _, read_v.index()), acc_o);
    pingpong.pass_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    release_kv(pipeline_v, storage.pipeline_v, read_v);
    after_block(n_block_begin);
    return o_unit;
  }
};

}  // namespace warpflash::kernels
