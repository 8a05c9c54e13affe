// The forward kernel: warp roles, register budgets, shared memory and the persistent
// loop over tiles. Warpgroup 0 produces (one thread issues TMA loads of Q and into the
// K/V ring); the other warpgroups consume (WGMMA, softmax, epilogue).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "kernels/forward/epilogue.h"
#include "kernels/attention/special_registers.h"
#include "kernels/attention/tile_work.h"
#include "kernels/forward/loads.h"
#include "kernels/forward/mainloop.h"
#include "kernels/forward/transpose_v.h"

namespace warpflash::kernels {

using namespace cute;

// FP8's descale of a tile's (batch, K/V head), 1 where none is given.
template <class Params>
CUTE_DEVICE float descale(Params const& params, float const* descales, TileCoord tile) {
  if (descales == nullptr) return 1.f;
  return descales[tile.batch * params.descale_batch_stride + tile.head / params.heads_per_kv_head];
}

// Mask: CausalMask for the plain problems (dense equal-length sequences, no mask or a
// causal one, no softcap: params.plain) or AttentionMask for all others. Two kernels per
// instance, not one with both loops: each gets its own register allocation, and the plain
// one keeps the code (and the speed) it had before windows and varlen, which in one
// kernel with the general loop lost 4-10% (docs/perf-notes.md).
template <class Traits, class Mask>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    forward_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params) {
  using Mainloop = ForwardMainloop<Traits>;
  using QBuffers = ForwardQBuffers<Traits>;
  using Loads = ForwardLoads<Traits>;
  using PipelineKV = typename Traits::PipelineKV;
  extern __shared__ __align__(1024) char shared_memory[];
  auto& storage = *reinterpret_cast<typename Traits::SharedStorage*>(shared_memory);

  int warpgroup = cutlass::canonical_warp_group_idx();
  bool is_producer = kWarpSpecialization && warpgroup == 0;
  // Without warp specialization (an ablation) a consumer thread also loads: the first of
  // the last warpgroup, which takes its pingpong turn last, so the others have usually
  // released the ring slot it waits for.
  constexpr int kLoadingThread = Traits::kConsumerThreads - cutlass::NumThreadsPerWarpGroup;
  bool is_consumer_that_loads = !kWarpSpecialization && threadIdx.x == kLoadingThread;

  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    if constexpr (Traits::kTmaStoreO) cute::prefetch_tma_descriptor(params.tma_o.get_tma_descriptor());
    if (params.paged.active() && !params.paged.gather) {
      cute::prefetch_tma_descriptor(&params.paged.tma_k);
      cute::prefetch_tma_descriptor(&params.paged.tma_v);
    }
    for (int stage = 0; stage < Traits::kStagesQ; ++stage) {
      cutlass::arch::ClusterTransactionBarrier::init(&storage.barrier_q_full[stage], 1);
      cutlass::arch::ClusterBarrier::init(&storage.barrier_q_empty[stage], Traits::kConsumerThreads);
    }
    if constexpr (Traits::kPagedKv) {
      for (int stage = 0; stage < Traits::kStages; ++stage) {
        cutlass::arch::ClusterBarrier::init(&storage.gather_posted[stage], 1);
      }
    }
  }
  typename PipelineKV::Params pipeline_params;
  pipeline_params.role = is_producer              ? PipelineKV::ThreadCategory::Producer
                         : is_consumer_that_loads ? PipelineKV::ThreadCategory::ProducerConsumer
                                                  : PipelineKV::ThreadCategory::Consumer;
  pipeline_params.is_leader = kWarpSpecialization ? threadIdx.x == 0 : is_consumer_that_loads;
  pipeline_params.num_consumers = Traits::kConsumerThreads;
  // FP8: V's slots are released by the transposing warps' threads (one arrival each).
  auto make_pipeline = [&](typename PipelineKV::SharedStorage& pipeline_storage, uint32_t transaction_bytes,
                           int releasing_threads) {
    pipeline_params.transaction_bytes = transaction_bytes;
    if (releasing_threads != Traits::kConsumerThreads) {
      if (threadIdx.x == 0) {
        for (int stage = 0; stage < Traits::kStages; ++stage) {
          pipeline_storage.full_barrier_[stage].init(1);
          pipeline_storage.empty_barrier_[stage].init(releasing_threads);
        }
        cutlass::arch::fence_barrier_init();
      }
      return PipelineKV(pipeline_storage, pipeline_params, typename Traits::ClusterShape{}, cute::false_type{},
                        cute::false_type{});
    }
    if constexpr (Traits::kClusterM == 1) {
      return PipelineKV(pipeline_storage, pipeline_params, Shape<_1, _1, _1>{});
    } else {
      // A slot is free when every consumer warp of both CTAs has released it (one arrival
      // per warp and CTA: ForwardMainloop::release_kv).
      if (threadIdx.x == 0) {
        for (int stage = 0; stage < Traits::kStages; ++stage) {
          pipeline_storage.full_barrier_[stage].init(1);
          pipeline_storage.empty_barrier_[stage].init(Traits::kClusterM * Traits::kConsumerThreads / 32);
        }
        cutlass::arch::fence_barrier_init();
      }
      return PipelineKV(pipeline_storage, pipeline_params, typename Traits::ClusterShape{}, cute::false_type{},
                        cute::false_type{});
    }
  };
  PipelineKV pipeline_k = make_pipeline(storage.pipeline_k, Traits::kBytesK, Traits::kConsumerThreads);
  PipelineKV pipeline_v = make_pipeline(storage.pipeline_v, Traits::kBytesV,
                                        Traits::kFp8 ? Traits::kTransposeThreads : Traits::kConsumerThreads);
  // FP8: V^T from the transposing warps to the consumers.
  int transpose_tid = threadIdx.x - cutlass::NumThreadsPerWarp;
  bool is_transposer = Traits::kFp8 && is_producer && transpose_tid >= 0 && transpose_tid < Traits::kTransposeThreads;
  auto make_pipeline_vt = [&] {
    if constexpr (Traits::kFp8) {
      typename Traits::PipelineVt::Params params_vt;
      params_vt.role = is_transposer ? Traits::PipelineVt::ThreadCategory::Producer
                       : is_producer ? Traits::PipelineVt::ThreadCategory::NonParticipant
                                     : Traits::PipelineVt::ThreadCategory::Consumer;
      params_vt.producer_arv_count = Traits::kTransposeThreads;
      params_vt.consumer_arv_count = Traits::kConsumerThreads;
      return typename Traits::PipelineVt(storage.pipeline_vt, params_vt);
    } else {
      return 0;
    }
  };
  auto pipeline_vt = make_pipeline_vt();
  if constexpr (Traits::kClusterM == 1) {
    __syncthreads();
  } else {
    // The partner's multicasts and releases may arrive on this CTA's barriers from now on.
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  }

  // Persistent: one CTA per SM walks the tiles, so the producer loads the next tile's Q
  // and K/V while the consumers finish the current one and write it out.
  ForwardTileScheduler const& scheduler = params.scheduler;
  constexpr bool kGeneralLoop = !std::is_same_v<Mask, CausalMask>;
  // The general loop's indices name pieces of tiles (split_kv.h; one piece per tile
  // without a split), the plain loop's tiles.
  auto num_indices = [&] {
    if constexpr (kGeneralLoop) {
      return params.split_kv.num_indices(scheduler.num_tiles());
    } else {
      return scheduler.num_tiles();
    }
  };
  // The plain loop's sequences are all seqlen long.
  auto tile_of = [&](unsigned index) {
    if constexpr (kGeneralLoop) {
      int piece;
      return scheduler.tile(params.split_kv.tile_of(index, piece), params.seq_q, Traits::kBlockM);
    } else {
      return scheduler.tile(index);
    }
  };
  // Static tile order: every role computes the CTA's tile index of a round from the
  // scheduler. Dynamic (with params.tile_counter: sequences of different lengths, windows,
  // chunks and causal masks, whose tiles no static order balances well): the producer thread
  // takes the next index from the counter once a tile's loads are issued (the first from
  // blockIdx.x) and passes it to the consumers with the tile's Q; an index past the last
  // tile, passed the same way, ends the loop.
  bool dynamic_tiles = params.tile_counter != nullptr;
  auto static_index = [&](int round) {
    return scheduler.template tile_index<Traits::kSplitTail>(blockIdx.x, kGeneralLoop ? grid_size() : gridDim.x, round);
  };
  // Producer and consumers walk the same rounds, so their pipeline states and barrier
  // phases stay in step: visit(round, index, tile, work) for each of the CTA's tiles, or
  // pieces of tiles in a split tail, with the K/V blocks it computes (work).
  auto for_each_tile = [&](auto&& next_index, auto&& visit) {
    for (int round = 0;; ++round) {
      unsigned index = next_index(round);
      if (index >= num_indices()) break;  // from the parameters each time: no register held
      // Split-KV's piece of the tile (the general loop; without a split, piece 0 of 1).
      // Branch-free and cheap: the producer thread walks this in 24-32 registers.
      [[maybe_unused]] int piece = 0;
      TileCoord tile;
      if constexpr (kGeneralLoop) {
        tile = scheduler.tile(params.split_kv.tile_of(index, piece), params.seq_q, Traits::kBlockM);
      } else {
        tile = scheduler.tile(index);
      }
      TileWork work = tile_work<Traits::kBlockM, Traits::kBlockN, Mask, Traits::kLeftPadding>(
          params.seq_q, params.seq_k, params.mask, tile.m_block, tile.batch);
      if constexpr (kGeneralLoop) {
        params.split_kv.template clip<Traits::kSplitRuns>(piece, work.n_block_begin, work.n_block_end);
      }
      if constexpr (Traits::kSplitTail) {
        if (scheduler.split.in_tail(round)) scheduler.split.clip(blockIdx.x, round, work.n_block_begin, work.n_block_end);
      }
      visit(round, index, tile, work);
    }
  };

  if (is_producer) {
    if constexpr (!kWarpSpecialization) return;  // not reached: no producer warpgroup
    cutlass::arch::warpgroup_reg_dealloc<kGeneralLoop ? Traits::kGeneralProducerRegisters : Traits::kProducerRegisters>();
    if constexpr (Traits::kFp8) {
      if (is_transposer) {
        // Every K/V block of the CTA's tiles, in the order the producer loads them.
        // Both rings advance together: one count of the blocks transposed gives both states
        // (two PipelineStates held six registers; a 24-register producer spilled them).
        int blocks = 0;
        for_each_tile(static_index, [&](int, unsigned, TileCoord, TileWork const& work) {
#pragma unroll 1
          for (int n_block = work.n_block_begin; n_block < work.n_block_end; ++n_block, ++blocks) {
            int stage = blocks % Traits::kStages;
            uint32_t phase = blocks / Traits::kStages % 2;
            typename Traits::PipelineVt::PipelineState write_vt(stage, phase ^ 1, blocks);  // (empty at first)
            pipeline_v.consumer_wait(typename PipelineKV::PipelineState(stage, phase, blocks));
            pipeline_vt.producer_acquire(write_vt);
            TransposeV<Traits>::block(storage.v.data(), storage.vt.data(), stage, stage, transpose_tid);
            cutlass::arch::fence_view_async_shared();  // the WGMMAs read V^T through the async proxy
            pipeline_vt.producer_commit(write_vt);
            storage.pipeline_v.empty_barrier_[stage].arrive();
          }
        });
        return;
      }
    }
    // One thread loads, or, with a gathered paged cache (paged_kv.h), the first warp: its
    // lane 0 then does what the one thread does but the K/V loads, which the first warp
    // shares with the other three (Loads::gather_posted_blocks).
    auto produce = [&](auto gathers) {
      constexpr bool kGathers = decltype(gathers)::value;
      // Lane 0 of the warp, read where needed: a register held through the tile loop
      // spilled the 32-register producers.
      auto leader = [] {
        if constexpr (!kGathers) {
          return true;
        } else {
          return PagedKv::lane_id() == 0;
        }
      };
      auto write = cutlass::make_producer_start_state<PipelineKV>();
      auto next_index = [&](int round) {
        if (!dynamic_tiles) return static_index(round);
        unsigned index = 0;
        if (leader()) index = round == 0 ? blockIdx.x : grid_size() + atomicAdd(params.tile_counter, 1u);
        if constexpr (kGathers) index = __shfl_sync(0xffffffff, index, 0);
        if (index >= num_indices() && leader()) {  // the end, passed on to the consumers
          QBuffers::pass_q_empty_tile_producer(storage, round, index);
        }
        return index;
      };
      for_each_tile(next_index, [&](int round, unsigned index, TileCoord tile, TileWork const& work) {
        if (work.empty()) {
          if (leader()) QBuffers::pass_q_empty_tile_producer(storage, round, index);
        } else if constexpr (kGathers) {
          Loads::load_gathered(params, storage, pipeline_k, pipeline_v, write, index, tile, work, round);
        } else {
          Loads::template load<kGeneralLoop>(params, storage, pipeline_k, pipeline_v, write, index, tile, work,
                                                round);
        }
      });
      if constexpr (kGathers) Loads::post_gather(storage, GatherJob{-1, 0, 0, 0}, write);  // the others' end
      // The CTA stays until the partner's consumers have released every slot (they arrive
      // on this CTA's barriers).
      if constexpr (Traits::kClusterM > 1) {
        pipeline_k.producer_tail(write);
        pipeline_v.producer_tail(write);
      }
    };
    if constexpr (kGeneralLoop && Traits::kPagedKv) {
      if (params.paged.gather) {
        int warp = threadIdx.x / cutlass::NumThreadsPerWarp;
        if (warp == 0) {
          produce(std::true_type{});
        } else {
          Loads::gather_posted_blocks(params, storage, pipeline_k, pipeline_v, warp);
        }
        return;
      }
    }
    if (threadIdx.x != 0) return;
    produce(std::false_type{});
  } else {
    if constexpr (kWarpSpecialization) {
      cutlass::arch::warpgroup_reg_alloc<kGeneralLoop ? Traits::kGeneralConsumerRegisters : Traits::kConsumerRegisters>();
    }
    int consumer_tid = threadIdx.x - Traits::kProducerThreads;
    using Pingpong = PingpongScheduler<Traits::kConsumerWarpgroups, Traits::kPingpongTurns>;
    Pingpong pingpong{consumer_tid / cutlass::NumThreadsPerWarpGroup};
    pingpong.start();
    typename PipelineKV::PipelineState read_k;  // V's state trails it (Mainloop::previous)
    auto write = cutlass::make_producer_start_state<PipelineKV>();  // used without warp specialization
    auto next_index = [&](int round) {
      return dynamic_tiles ? QBuffers::published_tile_index(storage, round) : static_index(round);
    };
    for_each_tile(next_index, [&](int round, unsigned index, TileCoord tile, TileWork work) {
      typename Traits::TiledMmaPV mma_pv;
      Tensor acc_o = partition_fragment_C(mma_pv, Shape<typename Traits::BlockM, typename Traits::HeadDimV>{});
      clear(acc_o);
      constexpr int kRows = decltype(size<0>(rowcol_layout(acc_o.layout())))::value;
      // FP8: the scores of the dequantized Q and K are q_descale * k_descale times those of
      // the e4m3 values, and Q's block scale of this warpgroup's 64 rows (K's per block:
      // the mainloop).
      float scale_log2 = params.scale_log2;
      if constexpr (Traits::kFp8) {
        // (The last row's block where this warpgroup's rows lie past seqlen_q: its scale
        // array ends there. Block scales come with dense sequences only.)
        int warpgroup_row = min(tile.m_block * Traits::kBlockM + consumer_tid / cutlass::NumThreadsPerWarpGroup * 64,
                                params.seq_q.seqlen - 1);
        scale_log2 *= descale(params, params.q_descale, tile) * descale(params, params.k_descale, tile) *
                      params.q_block_scale.at(tile.batch, tile.head, warpgroup_row);
      }
      OnlineSoftmax<kRows, Traits::kLazyRescale> softmax(scale_log2);
      // A tile that sees no key (causal rows above the diagonal, seqlen_k = 0, outside the
      // window) keeps O = 0.
      float o_unit = 1.f;  // what O is still to be multiplied by (FP8's V block scales)
      // The general loop's tiles may end within their first warpgroup's rows (decode,
      // short sequences): a warpgroup with none of them takes no part in the GEMMs. (Not
      // in d=64's three consumer warpgroups of 160 registers, where the branch spilled:
      // forward_variant() gives their few-row problems to the two-warpgroup kernel.)
      constexpr bool kSkipsEmptyWarpgroups =
          kGeneralLoop && !Traits::kFp8 && kWarpSpecialization && Traits::kConsumerWarpgroups == 2;
      bool rows_of_warpgroup = !kSkipsEmptyWarpgroups ||
                               tile.m_block * Traits::kBlockM + (warpgroup - 1) * 64 < work.mask.rows();
      if (work.empty()) {
        if (is_consumer_that_loads) QBuffers::pass_q_empty_tile_producer(storage, round, index);
        QBuffers::pass_q_empty_tile_consumer(storage, round);
      } else if (!rows_of_warpgroup) {
        if constexpr (kSkipsEmptyWarpgroups) {
          Mainloop::pass_blocks(storage, pipeline_k, pipeline_v, read_k, pingpong, work, round);
        }
      } else {
        if constexpr (Traits::kFp8) {
          o_unit = Mainloop::template mma<Mask>(params, storage, pipeline_k, pipeline_vt, read_k, pingpong, index, tile,
                                                work, round, consumer_tid, acc_o, softmax, [](int) {});
        } else if constexpr (kWarpSpecialization) {
          Mainloop::template mma<Mask>(params, storage, pipeline_k, pipeline_v, read_k, pingpong, index, tile, work,
                                       round, consumer_tid, acc_o, softmax, [](int) {});
        } else {
          // Loads between the GEMMs: Q and the first kStages blocks up front, then block
          // n - kStages as soon as block n is released (after this thread's turn).
          auto loads = Loads::template tile_loads<false>(params, storage, pipeline_k, pipeline_v, index, tile, work, round);
          auto& load_q = get<0>(loads);
          auto& load_kv = get<1>(loads);
          if (is_consumer_that_loads) {
            load_q();
            for (int i = 0; i < Traits::kStages && i < work.n_block_end - work.n_block_begin; ++i) {
              load_kv(work.n_block_end - 1 - i, write);
            }
          }
          Mainloop::template mma<Mask>(params, storage, pipeline_k, pipeline_v, read_k, pingpong, index, tile, work,
                                       round, consumer_tid, acc_o, softmax, [&](int n_block) {
                          if (is_consumer_that_loads && n_block - Traits::kStages >= work.n_block_begin) {
                            load_kv(n_block - Traits::kStages, write);
                          }
                        });
        }
      }
      float lse[kRows];
      Tensor acc_o_rc = rowcol_view(acc_o);
      if constexpr (Traits::kRecomputeTileForEpilogue) {
        asm volatile("" : "+r"(index));  // keeps the compiler from reusing the coordinates
        tile = tile_of(index);
        work = tile_work<Traits::kBlockM, Traits::kBlockN, Mask, Traits::kLeftPadding>(
            params.seq_q, params.seq_k, params.mask, tile.m_block, tile.batch);
      }
      // (Sinks never reach a split tile: uniform_tiles() keeps them off the clustered kernels.)
      float o_scale = 1.f;
      if constexpr (Traits::kFp8) o_scale = descale(params, params.v_descale, tile) * o_unit;
      softmax.finalize(acc_o_rc, lse, params.sinks == nullptr ? -INFINITY : params.sinks[tile.head] * float(M_LOG2E),
                       o_scale);
      if constexpr (Traits::kSplitTail) {
        if (scheduler.split.in_tail(round)) {
          ForwardEpilogue<Traits>::template store_piece<false>(params, scheduler.split.slot(blockIdx.x, round),
                                                               consumer_tid, lse, acc_o);
          return;
        }
      }
      // A piece of a split-KV tile: its slot is its index; the rows past the sequence stay
      // unwritten (the merge reads the sequence's rows only).
      if constexpr (kGeneralLoop) {
        if (params.split_kv.active()) {
          ForwardEpilogue<Traits>::template store_piece<true>(params, int(index), consumer_tid, lse, acc_o,
                                                              work.mask.rows() - tile.m_block * Traits::kBlockM);
          if constexpr (Traits::kOInQBuffer) QBuffers::release_q(storage, round);
          return;
        }
      }
      ForwardEpilogue<Traits>::template store_lse<kGeneralLoop>(params, tile, work, consumer_tid, lse);
      ForwardEpilogue<Traits>::template store_o<kGeneralLoop>(params, storage, tile, work, round, consumer_tid, acc_o);
    });
    ForwardEpilogue<Traits>::drain(consumer_tid);
  }
}

}  // namespace warpflash::kernels
