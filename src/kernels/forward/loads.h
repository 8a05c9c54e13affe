// The forward producer's loads: TMA of Q and the K/V tiles into the ring, a paged cache's
// loads (paged_kv.h: TMA boxes per run of rows, or the producer warps' gather), and the
// order of a tile's loads. The Q buffers' barriers: q_buffers.h.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/attention/paged_kv.h"
#include "kernels/attention/tile_work.h"
#include "kernels/forward/q_buffers.h"

namespace warpflash::kernels {

using namespace cute;

template <class Traits>
struct ForwardLoads {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  using PipelineKV = typename Traits::PipelineKV;
  using PipelineState = typename PipelineKV::PipelineState;
  using TransactionBarrier = cutlass::arch::ClusterTransactionBarrier;
  using QBuffers = ForwardQBuffers<Traits>;

  // A K/V load signalling `barrier` (at the same address in every CTA of the cluster).
  template <class Tma>
  CUTE_DEVICE static auto with_barrier(Tma const& tma, uint64_t& barrier) {
    if constexpr (Traits::kClusterM == 1) {
      return tma.with(barrier);
    } else {
      return tma.with(barrier, uint16_t((1u << Traits::kClusterM) - 1));
    }
  }

  // The loads of one tile, issued by one thread: load_q() for its Q tile (into the buffer
  // of the CTA's `round`, with the tile's scheduler index), load_kv(n_block, write) for one K/V
  // block into the ring. Partial tiles at either end are filled with zeros by TMA and
  // still count in full towards the barriers' transaction bytes.
  // kGeneral: the general loop's loads (packed GQA's rows, a paged cache).
  template <bool kGeneral>
  CUTE_DEVICE static auto tile_loads(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                     PipelineKV& pipeline_v, unsigned index, TileCoord tile, TileWork const& work,
                                     int round) {
    Tensor sQ = QBuffers::smem_q(storage, round);
    Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});

    int kv_head = tile.head / params.heads_per_kv_head;
    // Packed (varlen) sequences start at their offset in batch 0's token dimension. Rows
    // past a sequence's end belong to the next one: masked as keys, never stored as queries.
    int batch_q = params.seq_q.batch_coord(tile.batch);
    int batch_k = params.kv_batch_idx != nullptr ? params.kv_batch_idx[tile.batch] : params.seq_k.batch_coord(tile.batch);
    Tensor mQ = domain_offset(make_coord(work.offset_q, _0{}),
                              params.tma_q.get_tma_tensor(params.shape_q)(_, _, tile.head, batch_q));
    Tensor mK = domain_offset(make_coord(work.offset_k, _0{}),
                              params.tma_k.get_tma_tensor(params.shape_k)(_, _, kv_head, batch_k));
    Tensor mV = domain_offset(make_coord(work.offset_k, _0{}),
                              params.tma_v.get_tma_tensor(params.shape_v)(_, _, kv_head, batch_k));
    Tensor gQ = local_tile(mQ, Shape<typename Traits::BlockM, typename Traits::HeadDim>{},
                           make_coord(tile.m_block, _0{}));
    // (block_n, head_dim, n_block)
    Tensor gK = local_tile(mK, Shape<typename Traits::BlockN, typename Traits::HeadDim>{}, make_coord(_, _0{}));
    Tensor gV = local_tile(mV, Shape<typename Traits::BlockN, typename Traits::HeadDimV>{}, make_coord(_, _0{}));

    auto tma_q = params.tma_q.get_slice(_0{});
    // In a cluster this CTA loads its share of each K/V block (its slice) for both CTAs.
    int cluster_rank = Traits::kClusterM == 1 ? 0 : int(cute::block_rank_in_cluster());
    auto tma_k = params.tma_k.get_slice(cluster_rank);
    auto tma_v = params.tma_v.get_slice(cluster_rank);
    Tensor tQgQ = tma_q.partition_S(gQ);
    Tensor tQsQ = tma_q.partition_D(sQ);
    Tensor tKgK = tma_k.partition_S(gK);  // (TMA, TMA_N, TMA_K, n_block)
    Tensor tKsK = tma_k.partition_D(sK);  // (TMA, TMA_N, TMA_K, stage)
    Tensor tVgV = tma_v.partition_S(gV);
    Tensor tVsV = tma_v.partition_D(sV);

    auto load_q = [=, &params, &storage]() mutable {
      int stage = QBuffers::q_stage(round);
      // Packed GQA's rows: the consumers load them (load_q_rows), the buffer is marked
      // full at once. (The general loop's producer only.)
      if constexpr (kGeneral) {
        if (params.q_rows != nullptr) {
          QBuffers::pass_q_empty_tile_producer(storage, round, index);
          return;
        }
      }
      QBuffers::wait_q_empty(storage, round);
      QBuffers::publish_tile_index(storage, round, index);
      TransactionBarrier::arrive_and_expect_tx(&storage.barrier_q_full[stage], Traits::kBytesQ);
      copy(params.tma_q.with(storage.barrier_q_full[stage]), tQgQ, tQsQ);
    };
    auto load_kv = [=, &params, &pipeline_k, &pipeline_v](int n_block, PipelineState& write) mutable {
      pipeline_k.producer_acquire(write);
      copy(with_barrier(params.tma_k, *pipeline_k.producer_get_barrier(write)), tKgK(_, _, _, n_block),
           tKsK(_, _, _, write.index()));
      pipeline_v.producer_acquire(write);
      copy(with_barrier(params.tma_v, *pipeline_v.producer_get_barrier(write)), tVgV(_, _, _, n_block),
           tVsV(_, _, _, write.index()));
      ++write;
    };
    return cute::make_tuple(load_q, load_kv);
  }

  // A paged cache's K/V block loads (paged_kv.h), as tile_loads' load_kv. (Keys count from
  // the sequence's first: paged caches have no cu_seqlens_k, and a left padding, the only
  // other work.offset_k, takes the gather.)
  CUTE_DEVICE static auto paged_kv_loads(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                         PipelineKV& pipeline_v, TileCoord tile, TileWork const& work) {
    return [&params, &storage, &pipeline_k, &pipeline_v, tile,
            seqlen_k = work.mask.seqlen_k](int n_block, PipelineState& write) {
      constexpr int kAtomsK = Traits::kAtomsPerRow, kAtomsV = Traits::kAtomsPerRowV;
      constexpr bool kWhole = PagedKv::whole_blocks_allowed(kAtomsK, kAtomsV);
      Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
      Tensor sV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});
      int kv_head = tile.head / params.heads_per_kv_head, first = n_block * Traits::kBlockN;
      pipeline_k.producer_acquire(write);
      params.paged.template load_block<Traits::kBlockN, kAtomsK, Traits::kAtomColumnsK, kWhole>(
          params.paged.tma_k, *pipeline_k.producer_get_barrier(write), sK(_, _, write.index()), tile.batch, kv_head,
          first, seqlen_k - first);
      pipeline_v.producer_acquire(write);
      params.paged.template load_block<Traits::kBlockN, kAtomsV, Traits::kAtomColumnsV, kWhole>(
          params.paged.tma_v, *pipeline_v.producer_get_barrier(write), sV(_, _, write.index()), tile.batch, kv_head,
          first, seqlen_k - first);
      ++write;
    };
  }

  // A paged cache of small pages (paged_kv.h): the producer warpgroup's four warps each
  // gather their rows of every K/V block into its slot (waiting only for the slot to be
  // free: the barriers count no transaction bytes; the first warp arrives once all four
  // have issued their copies, named barriers kGatheredK/V). The first warp walks the
  // tiles and posts each block once K's slot is free (post_gather); the others take the
  // posts in the same order (gather_posted_blocks).
  CUTE_DEVICE static void gather_block(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                       PipelineKV& pipeline_v, GatherJob const& job, PipelineState write, int warp) {
    static_assert(gather_layout_matches<typename Traits::SmemLayoutK, Traits::kBlockN, Traits::kHeadDim>() &&
                  gather_layout_matches<typename Traits::SmemLayoutV, Traits::kBlockN, Traits::kHeadDimV>());
    constexpr int kRows = GatherRows<Traits::kBlockN, Traits::kHeadDim, Element>::kRows;
    Tensor sK = make_tensor(make_smem_ptr(storage.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(storage.v.data()), typename Traits::SmemLayoutV{});
    PagedKv const& paged = params.paged;
    uint32_t rows = cast_smem_ptr_to_uint(storage.gather_rows) + warp * kRows * 8;
    uint32_t warp_rows = warp * kRows * 128;  // the warp's first row in atom 0 (unswizzled)
    int first = job.first_key + warp * kRows, keys = job.keys - warp * kRows;
    paged.template find_rows<Traits::kBlockN, Traits::kHeadDim, Element>(paged.rows_k, rows, job.batch, job.kv_head,
                                                                         first, keys);
    paged.template copy_rows<Traits::kBlockN, Traits::kHeadDim, Element>(
        paged.rows_k, rows, *pipeline_k.producer_get_barrier(write),
        cast_smem_ptr_to_uint(&sK(0, 0, write.index())) + warp_rows, keys, uint32_t(ForwardBarrier::kGatheredK),
        warp == 0);
    storage.pipeline_v.empty_barrier_[write.index()].wait(write.phase());
    if (!paged.v_rows_of_k) {
      paged.template find_rows<Traits::kBlockN, Traits::kHeadDimV, Element>(paged.rows_v, rows, job.batch,
                                                                            job.kv_head, first, keys);
    }
    paged.template copy_rows<Traits::kBlockN, Traits::kHeadDimV, Element>(
        paged.rows_v, rows, *pipeline_v.producer_get_barrier(write),
        cast_smem_ptr_to_uint(&sV(0, 0, write.index())) + warp_rows, keys, uint32_t(ForwardBarrier::kGatheredV),
        warp == 0);
  }
  // The first warp: once K's slot is free, lane 0 posts the block to the others.
  CUTE_DEVICE static void post_gather(SharedStorage& storage, GatherJob const& job, PipelineState write) {
    storage.pipeline_k.empty_barrier_[write.index()].wait(write.phase());
    if (PagedKv::lane_id() == 0) {
      asm volatile("st.shared.v4.s32 [%0], {%1, %2, %3, %4};" ::"r"(
                       cast_smem_ptr_to_uint(&storage.gather_jobs[write.index()])),
                   "r"(job.batch), "r"(job.kv_head), "r"(job.first_key), "r"(job.keys)
                   : "memory");
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                       cast_smem_ptr_to_uint(&storage.gather_posted[write.index()]))
                   : "memory");
    }
  }
  // Every producer warp's part of the block posted to `write`'s slot: false where the
  // first warp posted the end (a negative batch). (The first warp reads its own post back
  // too: its tile loop's registers are few.)
  CUTE_DEVICE static bool gather_posted_block(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                              PipelineKV& pipeline_v, PipelineState write, int warp) {
    cutlass::arch::ClusterBarrier::wait(&storage.gather_posted[write.index()], write.phase() ^ 1);
    GatherJob job;
    asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(job.batch), "=r"(job.kv_head), "=r"(job.first_key), "=r"(job.keys)
                 : "r"(cast_smem_ptr_to_uint(&storage.gather_jobs[write.index()]))
                 : "memory");
    if (job.batch < 0) return false;
    gather_block(params, storage, pipeline_k, pipeline_v, job, write, warp);
    return true;
  }
  // The other three warps, until the end.
  CUTE_DEVICE static void gather_posted_blocks(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                               PipelineKV& pipeline_v, int warp) {
    auto write = cutlass::make_producer_start_state<PipelineKV>();
#pragma unroll 1
    while (gather_posted_block(params, storage, pipeline_k, pipeline_v, write, warp)) ++write;
  }
  // The first warp's loads of a tile with a gathered paged cache: one lane loads Q.
  CUTE_DEVICE static void load_gathered(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                                        PipelineKV& pipeline_v, PipelineState& write, unsigned index, TileCoord tile,
                                        TileWork const& work, int round) {
    auto loads = tile_loads<true>(params, storage, pipeline_k, pipeline_v, index, tile, work, round);
    auto load_q = [&] {
      if (cute::elect_one_sync()) get<0>(loads)();
      __syncwarp();
    };
    // Keys from the sequence's first, work.offset_k (a left padding) rows into its pages.
    auto load_kv = [&params, &storage, &pipeline_k, &pipeline_v, tile, seqlen_k = work.mask.seqlen_k,
                    offset = work.offset_k](int n_block, PipelineState& write) {
      int first = n_block * Traits::kBlockN;
      post_gather(storage,
                  GatherJob{tile.batch, tile.head / params.heads_per_kv_head, offset + first, seqlen_k - first},
                  write);
      gather_posted_block(params, storage, pipeline_k, pipeline_v, write, 0);
      ++write;
    };
    load_blocks(load_q, load_kv, write, work);
  }

  // The producer warpgroup's thread, for each tile with work: Q, then K/V blocks
  // n_block_end - 1 down to n_block_begin, as fast as the ring frees up. A paged cache
  // (the general loop only: kGeneral) takes a loop of its own, so that neither loop holds
  // the other's addressing state in the producer's 24 registers.
  template <bool kGeneral>
  CUTE_DEVICE static void load(Params const& params, SharedStorage& storage, PipelineKV& pipeline_k,
                               PipelineKV& pipeline_v, PipelineState& write, unsigned index, TileCoord tile,
                               TileWork const& work, int round) {
    auto loads = tile_loads<kGeneral>(params, storage, pipeline_k, pipeline_v, index, tile, work, round);
    if constexpr (kGeneral && Traits::kPagedKv) {
      if (params.paged.active()) {
        load_blocks(get<0>(loads), paged_kv_loads(params, storage, pipeline_k, pipeline_v, tile, work), write, work);
        return;
      }
    }
    load_blocks(get<0>(loads), get<1>(loads), write, work);
  }
  template <class LoadQ, class LoadKV>
  CUTE_DEVICE static void load_blocks(LoadQ& load_q, LoadKV&& load_kv, PipelineState& write, TileWork const& work) {
    int n_block = work.n_block_end - 1, n_block_begin = work.n_block_begin;
    // With O leaving through the Q buffer, Q can only be loaded after the previous tile's
    // epilogue: the first K/V blocks go first, into the ring slots freed before it.
    if constexpr (Traits::kOInQBuffer) {
      for (int i = 0; i < Traits::kStages && n_block >= n_block_begin; ++i, --n_block) load_kv(n_block, write);
    }
    load_q();
    // Not unrolled: the producer thread has 24 registers.
#pragma unroll 1
    for (; n_block >= n_block_begin; --n_block) load_kv(n_block, write);
  }

};

}  // namespace warpflash::kernels
