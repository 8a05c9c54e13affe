// The main backward kernel: one CTA per (K/V block, K/V head, batch), walking the query
// heads that share the K/V head (GQA/MQA: dK and dV sum over them in registers, no fp32
// accumulators, the same order every run). Warpgroup 0 produces (one thread loads K and
// V once, then Q and dO of every query tile that sees the block, head by head, through
// TMA pipelines); warpgroups 1 and 2 per query tile compute
//   S^T = K Q^T, dP^T = V dO^T                                  (shared-memory operands)
//   P^T = exp2(S^T * scale_log2 - LSE_log2), dS^T = P^T (dP^T - dPsum)
//   dV += P^T dO, dK += dS^T Q
//   dQ = dS K                                                   (dS through shared memory)
// each owning half of the block's keys, with P^T and dS^T from registers in the dV and dK
// GEMMs (d <= 128), or (the wide form, traits.h's kSplitHeadDim) half of the queries of S^T
// and dP^T and half of the head dim of dK, dV and dQ, with P^T and dS^T through shared
// memory. They leave dQ in shared memory in fragment order (dq_order.h), from where
// producer warp 1 adds it into the workspace's fp32 accumulator with a bulk reduce-add (in a
// fixed order in deterministic mode; the postprocess scales and converts it). The loading
// thread also brings each query tile's LSE_log2 and dPsum. dK (times the softmax scale) and
// dV leave through K's and V's shared-memory tiles by TMA stores (a sequence's last,
// partial block: from registers; epilogue.h).
// Launched as the preprocess's programmatic dependent (dependent_launch.h): each CTA's
// loads of K, V and its first Q and dO tiles start while the preprocess finishes.
#pragma once

#include <climits>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/fast_math.h>

#include "kernels/attention/dependent_launch.h"
#include "kernels/attention/exp2_fma.h"
#include "kernels/attention/fragment.h"
#include "kernels/attention/special_registers.h"
#include "kernels/attention/tile_work.h"
#include "kernels/backward/dq_writer.h"
#include "kernels/backward/epilogue.h"
#include "kernels/backward/traits.h"

namespace warpflash::kernels {

using namespace cute;

// Four 8 x 8 matrices of 16-bit values, transposed: thread 8 j + r names row r of matrix j's
// destination, which receives column r of the matrix (each thread holds one 32-bit pair of
// every matrix, at row lane / 4 and columns 2 (lane % 4) + {0, 1}: the MMA fragment).
CUTE_DEVICE void store_matrix_x4_transposed(uint32_t address, uint32_t const (&pairs)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address),
               "r"(pairs[0]), "r"(pairs[1]), "r"(pairs[2]), "r"(pairs[3])
               : "memory");
}
CUTE_DEVICE void store_shared_vector(uint32_t address, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

// Zeroes the elements of P^T (and dS^T) whose key a query does not see, in the blocks that
// cross a mask boundary (the others skip it). tScS holds each element's (key, query) in the
// block; the queries are S^T's columns. Without chunks (and the backward never packs
// heads) a query's bounds are linear in it: query q sees key k when q + diag - window_left
// <= k <= q + diag + window_right (and k < seqlen_k), so an element's test is its key's
// distance from its query, a constant per element, against two thresholds per thread: a
// few instructions an element (the per-column bounds of the general form cost ~1,100 a
// thread per block at d = 64, docs/perf-notes.md). Chunks take the general form, and so
// does the softcap branch (kLinear = false), where at d = 64 the linear form spilled 8
// bytes more beside tanh's values.
template <class Traits, bool kLinear, class Coords, class... Accumulators>
CUTE_DEVICE void apply_block_mask(AttentionMask const& mask, int m_block, int n_block, Coords const& tScS,
                                  Accumulators&... accumulators) {
  if (!mask.block_needs_mask(m_block, n_block, Traits::kBlockM, Traits::kBlockN)) return;
  if (kLinear && mask.chunk == 0 && mask.pack == 1) {
    // The coordinates again from %tid.x (special_registers.h): the thread's first element
    // kept live across the loop spilled at d = 64.
    Tensor fresh = typename Traits::TiledMmaS{}
                       .get_thread_slice(fresh_thread_index() - Traits::kProducerThreads)
                       .partition_C(make_identity_tensor(Shape<typename Traits::BlockN, typename Traits::BlockM>{}));
    Tensor coords = make_tensor(fresh.data(), rowcol_layout(fresh.layout()));  // (key row, query column)
    int key0 = get<0>(coords(0, 0)), query0 = get<1>(coords(0, 0));  // this thread's first element
    // Key minus query on the diagonal (relative to the block's first key and query), less
    // the first element's: an element (k, q) is masked when its (k - key0) - (q - query0)
    // is above `right` or below `left`, or its key is at or past the sequence's end.
    int diag = m_block * Traits::kBlockM + mask.diagonal_offset() - n_block * Traits::kBlockN - (key0 - query0);
    // (64-bit sums: a window bound may be up to 2^30, clamped into int's range.)
    int right = mask.window_right < AttentionMask::kUnbounded
                    ? int(cute::min(int64_t(diag) + mask.window_right, int64_t(INT_MAX)))
                    : INT_MAX;
    int left = mask.window_left < AttentionMask::kUnbounded
                   ? int(cute::max(int64_t(diag) - mask.window_left, int64_t(INT_MIN)))
                   : INT_MIN;
    int keys_left = mask.seqlen_k - n_block * Traits::kBlockN - key0;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(coords); ++c) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size<0>(coords); ++r) {
        int key = get<0>(coords(r, c)) - key0, distance = key - (get<1>(coords(r, c)) - query0);
        if (key >= keys_left || distance > right || distance < left) ((rowcol_view(accumulators)(r, c) = 0.f), ...);
      }
    }
    return;
  }
  Tensor coords = make_tensor(tScS.data(), rowcol_layout(tScS.layout()));
  CUTLASS_PRAGMA_UNROLL
  for (int c = 0; c < size<1>(coords); ++c) {
    int query = m_block * Traits::kBlockM + get<1>(coords(0, c));
    int begin = mask.key_begin(query) - n_block * Traits::kBlockN, end = mask.key_end(query) - n_block * Traits::kBlockN;
    unsigned width = end > begin ? unsigned(end - begin) : 0u;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < size<0>(coords); ++r) {
      if (unsigned(get<0>(coords(r, c)) - begin) >= width) ((rowcol_view(accumulators)(r, c) = 0.f), ...);
    }
  }
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    backward_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params) {
  using Element = typename Traits::Element;
  using PipelineQ = typename Traits::PipelineQ;
  using TransactionBarrier = cutlass::arch::ClusterTransactionBarrier;
  extern __shared__ __align__(1024) char shared_memory[];
  auto& storage = *reinterpret_cast<typename Traits::SharedStorage*>(shared_memory);

  // Deterministic mode: the highest K/V blocks first (reduce_dq_tiles).
  int n_block = params.deterministic ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  int kv_head = blockIdx.y, batch = blockIdx.z;
  int group = params.heads_per_kv_head, first_head = kv_head * group;
  SequenceLengths::Sequence seq_q = params.seq_q.of(batch), seq_k = params.seq_k.of(batch);
  if (n_block * Traits::kBlockN >= seq_k.length) {  // no key of this sequence in the block
    if (threadIdx.x == 0) wait_for_prerequisite();  // (dependent_launch.h: one thread a CTA)
    return;
  }
  AttentionMask const mask = params.mask.for_lengths(seq_q.length, seq_k.length);
  // The query tiles with a row that sees a key of this block.
  int m_begin = mask.m_block_begin(n_block, Traits::kBlockM, Traits::kBlockN);
  int m_end = mask.m_block_end(n_block, Traits::kBlockM, Traits::kBlockN);

  int warpgroup = cutlass::canonical_warp_group_idx();
  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_do.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
  }
  typename PipelineQ::Params pipeline_params;
  pipeline_params.role = warpgroup == 0 ? PipelineQ::ThreadCategory::Producer : PipelineQ::ThreadCategory::Consumer;
  pipeline_params.is_leader = threadIdx.x == 0;
  pipeline_params.num_consumers = Traits::kConsumerThreads;
  pipeline_params.transaction_bytes = Traits::kBytesQ + Traits::kBytesStats;
  PipelineQ pipeline_q(storage.pipeline_q, pipeline_params, Shape<_1, _1, _1>{});
  pipeline_params.transaction_bytes = Traits::kBytesDO + Traits::kBytesStats;
  PipelineQ pipeline_do(storage.pipeline_do, pipeline_params, Shape<_1, _1, _1>{});
  __syncthreads();

  int batch_q = params.seq_q.batch_coord(batch), batch_k = params.seq_k.batch_coord(batch);

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    // Without a query tile that sees the block nothing is loaded (the CTA must not exit with
    // loads in flight): the consumers write dK = dV = 0.
    if (m_begin >= m_end) {
      if (threadIdx.x == 0) wait_for_prerequisite();
      return;
    }
    if (threadIdx.x / cutlass::NumThreadsPerWarp == 1) {
      reduce_dq_tiles<Traits>(params, storage, mask, n_block, batch, first_head, group, m_begin, m_end);
      return;
    }
    if (threadIdx.x != 0) return;
    Tensor mK = sequence_rows(params.tma_k, params.shape_k, seq_k.offset, kv_head, batch_k);
    Tensor mV = sequence_rows(params.tma_v, params.shape_v, seq_k.offset, kv_head, batch_k);
    Tensor gK = local_tile(mK, Shape<typename Traits::BlockN, typename Traits::HeadDim>{}, make_coord(n_block, _0{}));
    Tensor gV = local_tile(mV, Shape<typename Traits::BlockN, typename Traits::HeadDimV>{}, make_coord(n_block, _0{}));
    Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});
    Tensor sQ = make_tensor(make_smem_ptr(storage.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sDO = make_tensor(make_smem_ptr(storage.d_o.data()), typename Traits::SmemLayoutDO{});
    auto tma_k = params.tma_k.get_slice(_0{});
    auto tma_v = params.tma_v.get_slice(_0{});
    auto tma_q = params.tma_q.get_slice(_0{});
    auto tma_do = params.tma_do.get_slice(_0{});
    Tensor tQsQ = tma_q.partition_D(sQ);  // (TMA, TMA_M, TMA_K, stage)
    Tensor tDOsDO = tma_do.partition_D(sDO);
    auto write = cutlass::make_producer_start_state<PipelineQ>();
    // One loop over (query head, query tile) and 32-bit workspace rows keep this thread
    // within its 24 registers (heads x padded rows < 2^31: the dQ tensor map's rows).
    BackwardWorkspace const& w = params.workspace;
    int first_row = int(w.first_row(params.seq_q, batch)), head = first_head, m_block = m_begin;
#pragma unroll 1
    for (int tile = 0; tile < group * (m_end - m_begin); ++tile) {
      Tensor mQ = sequence_rows(params.tma_q, params.shape_q, seq_q.offset, head, batch_q);
      Tensor mDO = sequence_rows(params.tma_do, params.shape_do, seq_q.offset, head, batch_q);
      Tensor gQ = local_tile(mQ, Shape<typename Traits::BlockM, typename Traits::HeadDim>{}, make_coord(m_block, _0{}));
      Tensor gDO =
          local_tile(mDO, Shape<typename Traits::BlockM, typename Traits::HeadDimV>{}, make_coord(m_block, _0{}));
      int stats_row = head * int(w.padded_rows) + first_row + m_block * Traits::kBlockM;  // LSE_log2, dPsum
      // K comes with the first Q tile and V with the first dO tile, on their barriers
      // (FlashAttention-4's order): the first S^T = K Q^T waits for K and Q, not for V.
      pipeline_q.producer_acquire(write);
      if (tile == 0) {
        TransactionBarrier::expect_transaction(pipeline_q.producer_get_barrier(write), Traits::kBytesK);
        copy(params.tma_k.with(*pipeline_q.producer_get_barrier(write)), tma_k.partition_S(gK), tma_k.partition_D(sK));
      }
      copy(params.tma_q.with(*pipeline_q.producer_get_barrier(write)), tma_q.partition_S(gQ),
           tQsQ(_, _, _, write.index()));
      pipeline_do.producer_acquire(write);
      if (tile == 0) {
        TransactionBarrier::expect_transaction(pipeline_do.producer_get_barrier(write), Traits::kBytesV);
        copy(params.tma_v.with(*pipeline_do.producer_get_barrier(write)), tma_v.partition_S(gV), tma_v.partition_D(sV));
      }
      copy(params.tma_do.with(*pipeline_do.producer_get_barrier(write)), tma_do.partition_S(gDO),
           tDOsDO(_, _, _, write.index()));
      // This kernel is the preprocess's programmatic dependent: K, V and the first Q and dO
      // tiles load while its last CTAs finish; the statistics it writes only after it.
      if (tile == 0) wait_for_prerequisite();
      char const* stats = params.workspace_base + size_t(stats_row) * sizeof(float);
      SM90_BULK_COPY_G2S::copy(stats + w.lse_log2, pipeline_q.producer_get_barrier(write),
                               storage.lse_log2[write.index()], Traits::kBytesStats);
      SM90_BULK_COPY_G2S::copy(stats + w.dpsum, pipeline_do.producer_get_barrier(write),
                               storage.dpsum[write.index()], Traits::kBytesStats);
      ++write;
      if (++m_block == m_end) m_block = m_begin, ++head;
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  int consumer_tid = threadIdx.x - Traits::kProducerThreads;
  Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});
  Tensor sKt = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutKt{});
  Tensor sQ = make_tensor(make_smem_ptr(storage.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sQt = make_tensor(make_smem_ptr(storage.q.data()), typename Traits::SmemLayoutQt{});
  Tensor sDO = make_tensor(make_smem_ptr(storage.d_o.data()), typename Traits::SmemLayoutDO{});
  Tensor sDOt = make_tensor(make_smem_ptr(storage.d_o.data()), typename Traits::SmemLayoutDOt{});
  Tensor sDS = make_tensor(make_smem_ptr(storage.d_s.data()), typename Traits::SmemLayoutDSStages{});

  typename Traits::TiledMmaS mma_s;
  typename Traits::TiledMmaDP mma_dp;
  typename Traits::TiledMmaDV mma_dv;
  typename Traits::TiledMmaDK mma_dk;
  typename Traits::TiledMmaDQ mma_dq;
  auto thr_s = mma_s.get_thread_slice(consumer_tid);
  auto thr_dp = mma_dp.get_thread_slice(consumer_tid);
  auto thr_dv = mma_dv.get_thread_slice(consumer_tid);
  auto thr_dk = mma_dk.get_thread_slice(consumer_tid);
  // One warpgroup's dQ MMA with kDqSplitKeys (each computes a whole part), both otherwise.
  auto thr_dq = mma_dq.get_thread_slice(Traits::kDqSplitKeys ? consumer_tid % cutlass::NumThreadsPerWarpGroup
                                                             : consumer_tid);
  Tensor tSrK = thr_s.partition_fragment_A(sK);      // this warpgroup's keys
  Tensor tSrQ = thr_s.partition_fragment_B(sQ);      // (MMA, MMA_N, MMA_K, stage)
  Tensor tDPrV = thr_dp.partition_fragment_A(sV);
  Tensor tDPrDO = thr_dp.partition_fragment_B(sDO);
  Tensor tDVrDOt = thr_dv.partition_fragment_B(sDOt);
  Tensor tDKrQt = thr_dk.partition_fragment_B(sQt);
  // The dQ GEMM's A and B: dS and K^T, all keys and this warpgroup's columns of dQ, or
  // (kDqSplitRows) this warpgroup's 64 query rows of dS and all of K^T, or (kDqSplitKeys)
  // this warpgroup's keys and all columns; or (kDqTransposed) K^T, this warpgroup's 64
  // head-dim rows, and all of dS. The dS operand has a last mode of dS stages.
  auto [tDQrA, tDQrB] = [&] {
    if constexpr (Traits::kDqTransposed) {
      return cute::make_tuple(thr_dq.partition_fragment_A(sKt), thr_dq.partition_fragment_B(sDS));
    } else if constexpr (Traits::kDqSplitKeys) {
      using Keys = Int<Traits::kBlockN / Traits::kConsumerWarpgroups>;
      int warpgroup = consumer_tid / cutlass::NumThreadsPerWarpGroup;
      return cute::make_tuple(
          thr_dq.partition_fragment_A(
              local_tile(sDS, Shape<typename Traits::BlockM, Keys, Int<Traits::kDsStages>>{},
                         make_coord(_0{}, warpgroup, _0{}))),
          thr_dq.partition_fragment_B(
              local_tile(sKt, Shape<typename Traits::HeadDim, Keys>{}, make_coord(_0{}, warpgroup))));
    } else {
      return cute::make_tuple(thr_dq.partition_fragment_A(sDS), thr_dq.partition_fragment_B(sKt));
    }
  }();

  Tensor acc_dv = partition_fragment_C(mma_dv, Shape<typename Traits::BlockN, typename Traits::HeadDimV>{});
  Tensor acc_dk = partition_fragment_C(mma_dk, Shape<typename Traits::BlockN, typename Traits::HeadDim>{});
  clear(acc_dv);
  clear(acc_dk);

  // (key, query) of every S^T element this thread holds.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<typename Traits::BlockN, typename Traits::BlockM>{}));

  // This warpgroup's part of the dQ tile in shared memory, in fragment order (dq_order.h):
  // vector j of a thread's four-value vectors at float 512 j + 4 (thread in warpgroup).
  int consumer_warpgroup = consumer_tid / cutlass::NumThreadsPerWarpGroup;
  int lane = consumer_tid % cutlass::NumThreadsPerWarp, warp = consumer_tid / cutlass::NumThreadsPerWarp % 4;
  uint32_t dq_part = cute::cast_smem_ptr_to_uint(storage.d_q.data() + consumer_warpgroup * Traits::kDqPartFloats +
                                                 4 * (consumer_tid % cutlass::NumThreadsPerWarpGroup));
  // dS^T from the S^T accumulator into dS (queries, keys; 8 x 64 atoms, 128-byte swizzle,
  // rows first) with transposing matrix stores: value i holds key 16 warp + lane / 4 +
  // 8 (i / 2 % 2) of the warpgroup's keys and query 8 (i / 4) + 2 (lane % 4) + i % 2 of its
  // queries, so the pairs 8 q + 2 j of store q are the 8 x 8 blocks j = (key half i / 2 % 2,
  // query block 2 q + i / 4 % 2). Thread 8 j + r addresses query 8 (2 q + j / 2) + r of block
  // j: 8 keys (a 16-byte chunk, chunk index 2 warp + j % 2 XORed with query % 8 = r); store q
  // adds 16 queries, 1024 elements. A warpgroup's keys (narrow: 64 wg + ..., the second
  // column of atoms) or queries (wide: 32 wg + ..., four rows of atoms further) start at
  // kDsWarpgroupOffset; the wide form writes P^T into P the same way.
  static_assert(Traits::kBlockN == (Traits::kSplitHeadDim ? 64 : 128), "the dS addressing below");
  constexpr int kDsWarpgroupOffset = Traits::kSplitHeadDim ? Traits::kBlockM / 2 * 64 : Traits::kBlockM * 64;
  constexpr int kDsStores = Traits::ScoreColumns::value / 16;
  int ds_matrix = lane / 8, ds_row = lane % 8;
  uint32_t ds_base = cute::cast_smem_ptr_to_uint(storage.d_s.data() + consumer_warpgroup * kDsWarpgroupOffset +
                                                 ds_matrix / 2 * 512 + ds_row * 64 +
                                                 ((2 * warp + ds_matrix % 2) ^ ds_row) * 8);
  constexpr uint32_t kDsStageBytes = cute::cosize_v<typename Traits::SmemLayoutDS> * sizeof(Element);
  auto store_transposed = [](uint32_t base, auto const& fragment) {
    uint32_t const* pairs = reinterpret_cast<uint32_t const*>(fragment.data());  // the values' order (fragment.h)
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < kDsStores; ++q) {
      uint32_t four[4] = {pairs[4 * q], pairs[4 * q + 1], pairs[4 * q + 2], pairs[4 * q + 3]};
      store_matrix_x4_transposed(base + q * 1024 * sizeof(Element), four);
    }
  };
  constexpr int kExpEvery = Traits::kExp2OnFmaEvery;
  // A register fragment's values converted to a 16-bit fragment in the same order.
  auto convert_into = [](auto const& from, auto& to) {
    Tensor converted = convert_fragment<Element>(from);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(to); ++i) to(i) = converted(i);
  };
  // dQ = dS K (or its transpose) with the dS tile of stage ds_stage.
  auto gemm_dq = [&mma_dq](auto const& a, auto const& b, int ds_stage, auto& acc) {
    if constexpr (Traits::kDqTransposed) {
      warpgroup_gemm</*kZeroInit=*/true>(mma_dq, a, b(_, _, _, ds_stage), acc);
    } else {
      warpgroup_gemm</*kZeroInit=*/true>(mma_dq, a(_, _, _, ds_stage), b, acc);
    }
  };
  // The warpgroup's barrier IDs from %tid.x at each use: kept live across the loop they
  // would be spilled at 240 registers.
  auto dq_barrier = [](BackwardBarrier base) {
    return static_cast<uint32_t>(base) + (fresh_thread_index() - Traits::kProducerThreads) / cutlass::NumThreadsPerWarpGroup;
  };
  typename PipelineQ::PipelineState read;
  // dQ through shared memory to producer warp 1's bulk reduce-add (reduce_dq_tiles), once it
  // has read this warpgroup's previous tile.
  auto hand_off_dq = [&](auto const& acc_dq) {
    if (read.count() > 0) cutlass::arch::NamedBarrier::sync(kDqSyncThreads, dq_barrier(BackwardBarrier::kDqEmpty));
    static_assert(decltype(size(acc_dq))::value * cutlass::NumThreadsPerWarpGroup == Traits::kDqPartFloats);
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < size(acc_dq) / 4; ++j) {
      store_shared_vector(dq_part + j * 512 * sizeof(float), acc_dq(4 * j), acc_dq(4 * j + 1), acc_dq(4 * j + 2),
                          acc_dq(4 * j + 3));
    }
    cutlass::arch::fence_view_async_shared();  // the generic-proxy writes become visible to the bulk copy
    cutlass::arch::NamedBarrier::arrive(kDqSyncThreads, dq_barrier(BackwardBarrier::kDqFull));
  };
  // The wide form's P^T and dS^T operands: their tiles in shared memory, read transposed.
  auto [tDVrPt, tDKrDSt] = [&] {
    if constexpr (Traits::kSplitHeadDim) {
      return cute::make_tuple(
          thr_dv.partition_fragment_A(
              make_tensor(make_smem_ptr(storage.p.data()), typename Traits::SmemLayoutDSt{})),
          thr_dk.partition_fragment_A(
              make_tensor(make_smem_ptr(storage.d_s.data()), typename Traits::SmemLayoutDSt{})));
    } else {
      return cute::make_tuple(0, 0);
    }
  }();

  // The query tiles of every head that shares the K/V head (a head counter counting down:
  // the head itself is not needed here, and its bound would not fit in the registers).
#pragma unroll 1
  for (int heads_left = group; heads_left > 0; --heads_left) {
#pragma unroll 1
    for (int m_block = m_begin; m_block < m_end; ++m_block) {
      int stage = read.index();
      pipeline_q.consumer_wait(read);
      Tensor acc_s = partition_fragment_C(mma_s, Shape<typename Traits::BlockN, typename Traits::BlockM>{});
      warpgroup_gemm</*kZeroInit=*/true>(mma_s, tSrK, tSrQ(_, _, _, stage), acc_s);
      pipeline_do.consumer_wait(read);
      Tensor acc_dp = partition_fragment_C(mma_dp, Shape<typename Traits::BlockN, typename Traits::BlockM>{});
      warpgroup_gemm</*kZeroInit=*/true>(mma_dp, tDPrV, tDPrDO(_, _, _, stage), acc_dp);

      float const* tile_lse = storage.lse_log2[stage];  // came with Q and dO
      float const* tile_dpsum = storage.dpsum[stage];
      // P^T = exp2(S^T * scale_log2 - LSE_log2): LSE_log2 is +inf past the query sequence and
      // for rows that saw no key (preprocess), so those columns are 0. dS^T = P^T (dP^T - dPsum).
      // The mask is a second pass in the blocks that need it: inside the exponentials' loop its
      // bounds cost instructions (and instruction cache) in every block.
      if (params.softcap_prescale == 0.f) {
        warpgroup_wait<1>();  // S^T: its exponentials run while dP^T is still on the tensor cores
        warpgroup_fence_operand(acc_s);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(acc_s); ++i) {
          float x = acc_s(i) * params.scale_log2 - tile_lse[get<1>(tScS(i))];
          acc_s(i) = kExpEvery > 0 && i % kExpEvery == kExpEvery - 1 ? exp2_on_fma_pipe(x) : exp2f(x);
        }
        apply_block_mask<Traits, /*kLinear=*/true>(mask, m_block, n_block, tScS, acc_s);
        warpgroup_wait<0>();  // dP^T
        warpgroup_fence_operand(acc_dp);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(acc_dp); ++i) {
          acc_dp(i) = acc_s(i) * (acc_dp(i) - tile_dpsum[get<1>(tScS(i))]);
        }
      } else {
        // Softcap (the forward's scores softcap * tanh(S * scale / softcap)): t = tanh(S *
        // prescale) gives P, and dS^T gains tanh's derivative 1 - t^2. Both GEMMs first, so
        // that t is not held beside P.
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc_s);
        warpgroup_fence_operand(acc_dp);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(acc_s); ++i) {
          int query = get<1>(tScS(i));
          float t = cutlass::fast_tanh(acc_s(i) * params.softcap_prescale);  // the forward's tanh
          float p = exp2f(t * params.scale_log2 - tile_lse[query]);
          acc_s(i) = p;
          acc_dp(i) = p * (acc_dp(i) - tile_dpsum[query]) * (1.f - t * t);
        }
        apply_block_mask<Traits, /*kLinear=*/false>(mask, m_block, n_block, tScS, acc_s, acc_dp);
      }
      Tensor acc_dq = partition_fragment_C(mma_dq, typename Traits::DqTile{});
      if constexpr (!Traits::kSplitHeadDim) {
        // dV += P^T dO and dK += dS^T Q with the accumulators as A operands; dS to shared
        // memory for dQ = dS K.
        Tensor p_t = make_tensor<Element>(accumulator_as_a_operand(acc_s.layout()));
        Tensor ds_t = make_tensor<Element>(accumulator_as_a_operand(acc_dp.layout()));
        int ds_stage = 0;
        if constexpr (Traits::kDsStages == 2) {
          // FlashAttention-4's order: the last tile's kDsFull barrier put every consumer past
          // its dQ GEMM of the tile before, which read this stage; dS is stored before dV is
          // issued. (Converting dS^T and P^T in one loop here spills 2x more.)
          convert_into(acc_dp, ds_t);
          convert_into(acc_s, p_t);
          ds_stage = read.count() % 2;
          store_transposed(ds_base + ds_stage * kDsStageBytes, ds_t);
          cutlass::arch::fence_view_async_shared();  // the generic-proxy writes become visible to WGMMA
          warpgroup_gemm</*kZeroInit=*/false>(mma_dv, p_t, tDVrDOt(_, _, _, stage), acc_dv);
        } else {
          // dV first; the previous tile's dQ GEMMs must have read dS before it is rewritten.
          // One loop for both conversions: convert_into's two loops spill at d = 128.
          Tensor p_converted = convert_fragment<Element>(acc_s);
          Tensor ds_converted = convert_fragment<Element>(acc_dp);
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < size(p_t); ++i) {
            p_t(i) = p_converted(i);
            ds_t(i) = ds_converted(i);
          }
          warpgroup_gemm</*kZeroInit=*/false>(mma_dv, p_t, tDVrDOt(_, _, _, stage), acc_dv);
          cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, static_cast<uint32_t>(BackwardBarrier::kDsFree));
          store_transposed(ds_base, ds_t);
          cutlass::arch::fence_view_async_shared();
        }
        cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, static_cast<uint32_t>(BackwardBarrier::kDsFull));
        gemm_dq(tDQrA, tDQrB, ds_stage, acc_dq);
        warpgroup_gemm</*kZeroInit=*/false>(mma_dk, ds_t, tDKrQt(_, _, _, stage), acc_dk);
        warpgroup_wait<1>();  // dV and dQ: dK stays on the tensor cores while dQ leaves
        pipeline_do.consumer_release(read);  // dV has read dO: the next one may load under dK
        warpgroup_fence_operand(acc_dq);
        hand_off_dq(acc_dq);
        warpgroup_wait<0>();  // dK (it reads Q and dS^T)
        pipeline_q.consumer_release(read);
      } else {
        // P^T and dS^T to shared memory (every warpgroup reads both warpgroups' queries; the
        // previous tile's GEMMs must have read them), then dK, dV and dQ, with Q and dO released
        // as soon as their last GEMM is done (one stage at d = 256): the next ones load under
        // the rest.
        Tensor p_converted = convert_fragment<Element>(acc_s);
        Tensor ds_converted = convert_fragment<Element>(acc_dp);
        cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, static_cast<uint32_t>(BackwardBarrier::kDsFree));
        store_transposed(ds_base, ds_converted);
        store_transposed(ds_base + uint32_t((storage.p.data() - storage.d_s.data()) * sizeof(Element)), p_converted);
        cutlass::arch::fence_view_async_shared();  // the generic-proxy writes become visible to WGMMA
        cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads, static_cast<uint32_t>(BackwardBarrier::kDsFull));
        warpgroup_gemm</*kZeroInit=*/false>(mma_dk, tDKrDSt, tDKrQt(_, _, _, stage), acc_dk);
        warpgroup_gemm</*kZeroInit=*/false>(mma_dv, tDVrPt, tDVrDOt(_, _, _, stage), acc_dv);
        gemm_dq(tDQrA, tDQrB, 0, acc_dq);
        warpgroup_wait<2>();  // dK: Q is read
        pipeline_q.consumer_release(read);
        warpgroup_wait<1>();  // dV: dO is read
        pipeline_do.consumer_release(read);
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc_dq);
        hand_off_dq(acc_dq);
      }
      ++read;
    }
  }

  allow_dependents();  // the postprocess's CTAs may launch once every CTA is this far
  store_dk_dv<Traits>(params, storage, acc_dv, acc_dk, n_block, kv_head, batch_k, seq_k);
}

}  // namespace warpflash::kernels
