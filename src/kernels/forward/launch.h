// Host side of the forward kernel: TMA descriptors, parameters, launch.
#pragma once

#include <atomic>
#include <cmath>
#include <string>

#include <cute/tensor.hpp>

#include "kernels/attention/launch_common.h"
#include "kernels/attention/split_combine.h"
#include "kernels/forward/kernel.h"
#include "kernels/forward/problem.h"
#include "kernels/forward/traits.h"
#include "warpflash/forward.h"

namespace warpflash::kernels {

using namespace cute;

// K or V: SmemLayout's (block_n, head_dim) tiles, in a cluster multicast to both CTAs.
template <class Traits, class SmemLayout, class GmemTensor>
auto make_tma_copy_kv(GmemTensor const& gKV) {
  using HeadDim = std::decay_t<decltype(get<1>(gKV.shape()))>;
  return make_tma_copy(typename Traits::CopyOpKV{}, gKV, take<0, 2>(SmemLayout{}),
                       Shape<typename Traits::BlockN, HeadDim>{}, Int<Traits::kClusterM>{});
}

// With a workspace, splits the last round of a non-causal launch along the keys
// (split_tail.h) on all `workers` (clusters), when that evens out the finish: sets
// params.scheduler.split and params.split_workspace and widens the grid to `ctas`.
template <class Traits>
Status plan_split_tail(ForwardArgs const& args, int workers, typename Traits::Params& params, int& ctas) {
  ForwardTileScheduler& scheduler = params.scheduler;
  int n_blocks = params.mask.for_lengths(params.seq_q.seqlen, params.seq_k.seqlen).n_block_end(0, Traits::kBlockM, Traits::kBlockN);
  SplitTail split = SplitTail::plan(scheduler.num_tiles() / Traits::kClusterM, workers, n_blocks, Traits::kClusterM);
  if (!split.active()) return Status::Ok();
  size_t needed = split_workspace_bytes(workers * Traits::kClusterM, Traits::kBlockM, Traits::kHeadDimV);
  if (args.workspace_bytes < needed) {
    return Status::InvalidArgument("warpflash::forward: workspace_bytes = " + std::to_string(args.workspace_bytes) +
                                   " is too small: this problem needs " + std::to_string(needed) +
                                   " (forward_workspace_bytes())");
  }
  scheduler.split = split;
  params.split_workspace = static_cast<float*>(args.workspace);
  ctas = workers * Traits::kClusterM;
  return Status::Ok();
}

// A paged KV cache's tensor maps, table and gather addressing (paged_kv.h). The maps serve
// runs of kGatherBelowRows and more (whole swizzle atoms); shorter runs, and every run of
// a left-padded cache, are gathered.
template <class Traits>
Status set_paged_kv(ForwardArgs const& args, PagedKv& paged) {
  using Element = typename Traits::Element;
  if constexpr (!Traits::kPagedKv) {
    return Status::NotSupported("warpflash::forward: page_table is not supported with head_dim = " +
                                std::to_string(args.shape.head_dim) + " and head_dim_v = " +
                                std::to_string(args.shape.value_head_dim()) +
                                " (paged caches: head dims 64, 128 and 256)");
  }
  paged.page_table = args.page_table;
  paged.table_batch_stride = static_cast<int>(args.page_table_batch_stride);
  paged.page_size = static_cast<int>(args.page_size);
  paged.num_pages = static_cast<int>(args.num_pages);
  paged.run_rows = paged_run_rows(args.page_size, Traits::kBlockN);
  // A left padding starts sequences inside a run, so its runs would straddle pages.
  paged.gather = paged.run_rows < PagedKv::kGatherBelowRows || args.leftpad_k != nullptr;
  if (paged.gather) {
    auto rows_of = [](TensorView4d const& view) {
      int64_t bytes = sizeof(Element);
      return PagedKv::Rows{static_cast<char const*>(view.data), view.batch_stride * bytes,
                           view.seqlen_stride * bytes, view.head_stride * bytes};
    };
    paged.rows_k = rows_of(args.k);
    paged.rows_v = rows_of(args.v);
    paged.v_rows_of_k = paged.rows_v.page_stride == paged.rows_k.page_stride &&
                        paged.rows_v.row_stride == paged.rows_k.row_stride &&
                        paged.rows_v.head_stride == paged.rows_k.head_stride;
    paged.by_page_size = FastDivmod(unsigned(args.page_size));
    return Status::Ok();
  }
  CUtensorMapDataType type = std::is_same_v<Element, cutlass::half_t> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  AttentionShape const& shape = args.shape;
  bool whole_blocks = paged.whole_blocks(Traits::kAtomsPerRow, Traits::kAtomsPerRowV, Traits::kBlockN);
  Status status = make_paged_tma(paged.tma_k, args.k, type, sizeof(Element), Traits::kHeadDim, args.page_size,
                                 shape.heads_kv, args.num_pages, Traits::kAtomColumnsK, paged.run_rows, whole_blocks);
  if (!status.ok()) return status;
  return make_paged_tma(paged.tma_v, args.v, type, sizeof(Element), Traits::kHeadDimV, args.page_size,
                        shape.heads_kv, args.num_pages, Traits::kAtomColumnsV, paged.run_rows, whole_blocks);
}

template <class Traits>
SplitCombineParams split_combine_params(ForwardArgs const& args, typename Traits::Params const& params, int ctas) {
  return SplitCombineParams{params.split_workspace,
                            params.scheduler,
                            params.split_kv,
                            params.mask.by_pack,
                            params.o_group_stride,
                            params.lse_group_stride,
                            ctas,
                            Traits::kBlockM,
                            Traits::kHeadDimV,
                            params.seq_q.seqlen,
                            args.o.data,
                            args.o.batch_stride,
                            args.o.seqlen_stride,
                            args.o.head_stride,
                            args.lse};
}

// Expects validated arguments (src/api/validate.cpp) with a non-empty query side, and a
// plain problem where kLoops has only the plain loop (find_forward_launcher() routes so).
// With plan.pack > 1 the arguments are packed_gqa_view()'s; plan.split() needs
// forward_workspace_bytes(), split_kv_allowed() and the general loop.
template <class Element, int kHeadDim, int kHeadDimV, ForwardVariant kVariant, int kLoops>
Status launch_forward(ForwardArgs const& args, float softmax_scale, ForwardPlan const& plan) {
  using Traits = ForwardTraits<Element, kHeadDim, kHeadDimV, kVariant>;
  using HeadDim = typename Traits::HeadDim;
  using HeadDimV = typename Traits::HeadDimV;
  using Input = Element const;
  using ElementO = typename Traits::ElementO;
  AttentionShape const& shape = args.shape;

  // Packed (varlen) sides are one batch of total rows: (total, head_dim, heads, 1).
  bool packed_q = args.cu_seqlens_q != nullptr;
  int64_t rows_q = packed_q ? args.total_q : shape.seqlen_q, batch_q = packed_q ? 1 : shape.batch;
  auto [batch_k, rows_k] = kv_extent(args);
  auto gQ = make_gmem_tensor<HeadDim, Input>(args.q, rows_q, shape.heads_q, batch_q);
  // TMA tensor maps need a valid address and every dimension >= 1. Without keys no K/V
  // load is ever issued (every tile's block range is empty), so the K/V maps may
  // describe the first row of Q (at least d_v wide) instead of the (possibly null) empty
  // K and V.
  bool keys_empty = rows_k == 0 || shape.seqlen_k == 0;
  TensorView4d const& k_view = keys_empty ? args.q : args.k;
  TensorView4d const& v_view = keys_empty ? args.q : args.v;
  int64_t rows_kv = keys_empty ? 1 : rows_k;
  auto gK = make_gmem_tensor<HeadDim, Input>(k_view, rows_kv, shape.heads_kv, batch_k);
  auto gV = make_gmem_tensor<HeadDimV, Input>(v_view, rows_kv, shape.heads_kv, batch_k);
  auto gO_shape = make_shape(static_cast<int>(rows_q), HeadDimV{}, static_cast<int>(shape.heads_q),
                             static_cast<int>(batch_q));

  ForwardMask mask = forward_mask(args);
  mask.mask.set_pack(plan.pack);
  // Split tiles' pieces take neighbouring indices in the order of equal tiles.
  if (plan.split()) mask.causal_order = false;
  // Sequences of different lengths: empty tiles past the shorter ones (ForwardTileScheduler).
  bool lengths_vary = !dense_equal_lengths(args);
  float softcap = args.softcap;
  typename Traits::Params params{
      make_tma_copy(SM90_TMA_LOAD{}, gQ, typename Traits::SmemLayoutQ{}, Shape<typename Traits::BlockM, HeadDim>{}, _1{}),
      make_tma_copy_kv<Traits, typename Traits::SmemLayoutK>(gK),
      make_tma_copy_kv<Traits, typename Traits::SmemLayoutV>(gV),
      gQ.shape(),
      gK.shape(),
      gV.shape(),
      gO_shape,
      static_cast<ElementO*>(args.o.data),
      args.o.batch_stride,
      args.o.seqlen_stride,
      args.o.head_stride,
      args.lse,
      packed_q ? 0 : shape.heads_q * shape.seqlen_q,  // lse: (batch, heads, seqlen_q) or (heads, total_q)
      packed_q ? args.total_q : shape.seqlen_q,
      static_cast<int>(shape.heads_q / shape.heads_kv),
      static_cast<float>((softcap > 0.f ? softcap : softmax_scale) * M_LOG2E),
      softcap > 0.f ? softmax_scale / softcap : 0.f,
      args.learnable_sink,
      plain_problem(args) && plan.plain(),
      SequenceLengths{args.cu_seqlens_q, args.seqused_q, static_cast<int>(shape.seqlen_q), static_cast<int>(args.total_q)},
      SequenceLengths{args.cu_seqlens_k, args.seqused_k, static_cast<int>(shape.seqlen_k), static_cast<int>(args.total_k),
                      args.leftpad_k},
      mask.mask,
      ForwardTileScheduler{ForwardTileScheduler::m_blocks_for(shape.seqlen_q, Traits::kBlockM),
                           static_cast<int>(shape.heads_q), static_cast<int>(shape.batch),
                           mask.causal_order},
      {},       // tma_o, below
      nullptr,  // split_workspace, below
      nullptr,  // tile_counter, below
      args.q_descale,
      args.k_descale,
      args.v_descale,
      shape.heads_kv,
      make_block_scales(args.q_block_scale, shape.heads_q, shape.seqlen_q, args.q_block_rows),
      make_block_scales(args.k_block_scale, shape.heads_kv, shape.seqlen_k, args.kv_block_rows),
      make_block_scales(args.v_block_scale, shape.heads_kv, shape.seqlen_k, args.kv_block_rows),
      SplitKv{},  // below
      nullptr,    // q_rows and the packed rows' strides, below
      0,
      0,
      0,
      0,
      0,
      nullptr,  // kv_batch_idx, below
      {},       // paged, below
      FastDivmod(static_cast<unsigned>(shape.heads_q / shape.heads_kv)),
  };

  if constexpr (Traits::kTmaStoreO) {
    auto gO = make_gmem_tensor<HeadDimV, ElementO>(args.o, rows_q, shape.heads_q, batch_q);
    if (packed_q) {
      // TMA clips a box at the tensor's ends only, and past a packed sequence's last row
      // lies the next one's. So O is seen as (seqlen_q, d_v, heads, total_q + 1): the last
      // mode is where a sequence ends, with the row stride, and the base lies seqlen_q rows
      // before O. Row seqlen_q - length + r of the sequence that ends at row e is O's row
      // e - length + r, and the box is clipped at r = length (epilogue.h).
      int64_t row_stride = args.o.seqlen_stride;
      auto layout = make_layout(make_shape(static_cast<int>(shape.seqlen_q), HeadDimV{}, static_cast<int>(shape.heads_q),
                                           static_cast<int>(rows_q + 1)),
                                make_stride(row_stride, _1{}, args.o.head_stride, row_stride));
      gO = make_tensor(make_gmem_ptr(static_cast<ElementO*>(args.o.data) - shape.seqlen_q * row_stride), layout);
      params.shape_o = gO.shape();
    }
    params.tma_o = make_tma_copy(SM90_TMA_STORE{}, gO, typename Traits::SmemLayoutOWarpgroup{},
                                 Shape<_64, HeadDimV>{}, _1{});
  }

  // The plain kernel or the general one (kernel.h), of those the instance compiles.
  static_assert(kLoops == kPlainLoop || kLoops == kGeneralLoop || kLoops == kBothLoops, "kernels.manifest's loops");
  if constexpr (kLoops == kPlainLoop) {
    if (!params.plain) {
      return Status::InvalidArgument("warpflash::forward: this kernel instance has only the plain loop (dense "
                                     "equal-length sequences, no mask but causal, no softcap)");
    }
  }
  if constexpr (kLoops == kGeneralLoop) params.plain = false;
  params.kv_batch_idx = args.kv_batch_idx;
  if (args.leftpad_k != nullptr && !Traits::kLeftPadding) {
    return Status::NotSupported("warpflash::forward: leftpad_k is not supported with head_dim = " +
                                std::to_string(shape.head_dim) + " and head_dim_v = " +
                                std::to_string(shape.value_head_dim()) + " (left-padded caches: head dims 64, 128 "
                                "and 256)");
  }
  if (args.page_table != nullptr && !keys_empty) {
    Status paged = set_paged_kv<Traits>(args, params.paged);
    if (!paged.ok()) return paged;
  }
  params.q_rows = static_cast<Input*>(plan.q_rows.data);
  params.q_batch_stride = plan.q_rows.batch_stride;
  params.q_seqlen_stride = plan.q_rows.seqlen_stride;
  params.q_head_stride = plan.q_rows.head_stride;
  params.o_group_stride = plan.o_head_stride;
  params.lse_group_stride = shape.seqlen_q / plan.pack;
  if (plan.pack > 1 && params.plain) {
    return Status::InvalidArgument("warpflash::forward: packed GQA needs the general loop");
  }
  if (plan.split()) {
    if (params.plain || args.workspace_bytes < split_kv_workspace_bytes(args, plan, Traits::kBlockM)) {
      return Status::InvalidArgument("warpflash::forward: split-KV needs the general loop and a workspace of "
                                     "forward_workspace_bytes()");
    }
    if (plan.split_workers > 0 && !Traits::kSplitRuns) {
      return Status::InvalidArgument("warpflash::forward: this kernel has no split-KV runs (split_runs_compiled)");
    }
    params.split_kv = plan.split_workers > 0 ? SplitKv::runs(int(params.scheduler.num_tiles()), plan.split_workers)
                                             : SplitKv(plan.splits);
    params.split_workspace = reinterpret_cast<float*>(static_cast<char*>(args.workspace) + kTileCounterBytes);
  }
  // Tiles of unequal cost (problem.h) take their tiles in dynamic order when the caller
  // gives a workspace (kernel.h): its first word counts the tiles taken, zeroed in stream
  // order. (Windows dealt statically, 132 CTAs over 128 m-blocks a head: some CTAs took
  // most of the short tiles and the SMs idled 19% of a window 4096's time, ncu.)
  // (Not FP8's: its V-transposing warps walk the tiles in the static order.)
  // (Not split-KV's runs: a worker's two pieces are its rounds in the static order.)
  bool dynamic_order = dynamic_tile_order(args) && plan.split_workers == 0;
  if (kWarpSpecialization && !Traits::kFp8 && dynamic_order && args.workspace != nullptr &&
      args.workspace_bytes >= kTileCounterBytes) {
    params.tile_counter = static_cast<unsigned*>(args.workspace);
    Status cleared = check_cuda(cudaMemsetAsync(params.tile_counter, 0, sizeof(unsigned), args.stream),
                                "cudaMemsetAsync(tile counter)");
    if (!cleared.ok()) return cleared;
  }
  auto kernel = [&] {
    if constexpr (kLoops == kPlainLoop) return forward_kernel<Traits, CausalMask>;
    else if constexpr (kLoops == kGeneralLoop) return forward_kernel<Traits, AttentionMask>;
    else return params.plain ? forward_kernel<Traits, CausalMask> : forward_kernel<Traits, AttentionMask>;
  }();
  static std::atomic<uint64_t> configured_devices[2] = {};
  int device = 0;
  Status status = check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (!status.ok()) return status;
  status = opt_in_shared_memory(kernel, Traits::kSharedMemoryBytes, device, configured_devices[params.plain ? 0 : 1],
                                "cudaFuncSetAttribute(forward_kernel)");
  if (!status.ok()) return status;
  // Persistent grid: one CTA per SM (a CTA fills an SM's shared memory); the tile
  // scheduler deals the tiles out.
  static std::atomic<int> sm_count_of_device[64] = {};
  int sm_count = 0;
  status = cached_per_device(sm_count_of_device, device, sm_count, [&](int& value) {
    return check_cuda(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device),
                      "cudaDeviceGetAttribute(multiprocessor count)");
  });
  if (!status.ok()) return status;
  int ctas = static_cast<int>(std::min<int64_t>(params.split_kv.num_indices(params.scheduler.num_tiles()), sm_count));
  if (params.split_kv.workers > 0) ctas = params.split_kv.workers;  // a CTA per run
  if constexpr (Traits::kClusterM == 1) {
    params.scheduler.plan(ctas, Traits::kBlockM, lengths_vary);
    if (params.tile_counter != nullptr && !lengths_vary) {
      params.scheduler.plan_sections(heads_per_l2_section(args, sizeof(Input)), ctas);
    }
    kernel<<<ctas, Traits::kThreads, Traits::kSharedMemoryBytes, args.stream>>>(params);
    status = check_cuda(cudaGetLastError(), "forward_kernel launch");
    if (!status.ok() || !params.split_kv.active()) return status;
    return launch_split_combine<ElementO>(split_combine_params<Traits>(args, params, ctas), args.stream);
  } else {
    // The two CTAs of a cluster take m-blocks 2i and 2i+1 of one head in every round
    // (ForwardTileScheduler): forward_variant() picks this kernel only where both need the
    // same K/V blocks.
    if (!uniform_tiles(args) || params.scheduler.num_m_blocks % Traits::kClusterM != 0) {
      return Status::InvalidArgument(
          "forward_kernel: a clustered kernel needs dense equal-length sequences, no mask and an even number of m-blocks");
    }
    // Clusters need both CTAs on SMs of one GPC; the scheduler's rounds need every
    // cluster resident at once, so the grid is capped at the clusters that fit.
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {unsigned(Traits::kClusterM), 1, 1};
    config.attrs = &attribute;
    config.numAttrs = 1;
    config.blockDim = dim3(Traits::kThreads);
    config.dynamicSmemBytes = Traits::kSharedMemoryBytes;
    config.stream = args.stream;
    static std::atomic<int> clusters_of_device[64] = {};
    int clusters = 0;
    status = cached_per_device(clusters_of_device, device, clusters, [&](int& value) {
      config.gridDim = dim3(unsigned(sm_count / Traits::kClusterM * Traits::kClusterM));
      return check_cuda(cudaOccupancyMaxActiveClusters(&value, kernel, &config),
                        "cudaOccupancyMaxActiveClusters(forward_kernel)");
    });
    if (!status.ok()) return status;
    if (clusters == 0) return Status::CudaError("forward_kernel: no cluster of this kernel fits on the device");
    ctas = std::min(ctas / Traits::kClusterM, clusters) * Traits::kClusterM;
    if constexpr (Traits::kSplitTail) {
      if (args.workspace != nullptr) {
        status = plan_split_tail<Traits>(args, clusters, params, ctas);
        if (!status.ok()) return status;
      }
    }
    params.scheduler.plan(ctas, Traits::kBlockM, lengths_vary);
    config.gridDim = dim3(unsigned(ctas));
    status = check_cuda(cudaLaunchKernelEx(&config, kernel, params), "forward_kernel launch");
    if (!status.ok() || !params.scheduler.split.active()) return status;
    return launch_split_combine<Element>(split_combine_params<Traits>(args, params, ctas), args.stream);
  }
}

}  // namespace warpflash::kernels
