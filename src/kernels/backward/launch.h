// Host side of the backward: the preprocess, the main kernel's TMA descriptors and
// launch, the postprocess; all on the caller's stream.
#pragma once

#include <atomic>
#include <cmath>
#include <string>

#include <cute/tensor.hpp>

#include "kernels/attention/dependent_launch.h"
#include "kernels/attention/launch_common.h"
#include "kernels/backward/kernel.h"
#include "kernels/backward/prepost.h"
#include "kernels/backward/traits.h"
#include "kernels/forward/problem.h"
#include "warpflash/backward.h"

namespace warpflash::kernels {

using namespace cute;

// Expects validated, non-empty arguments and a workspace of backward_workspace(args).bytes.
template <class Element, int kHeadDim, int kHeadDimV>
Status launch_backward(BackwardArgs const& args, float softmax_scale) {
  using Traits = BackwardTraits<Element, kHeadDim, kHeadDimV>;
  using HeadDim = typename Traits::HeadDim;
  using HeadDimV = typename Traits::HeadDimV;
  using Input = Element const;
  ForwardArgs const& f = args.forward;
  AttentionShape const& shape = f.shape;
  BackwardPrepostParams prepost = backward_prepost_params(args, softmax_scale);
  Status status;
  if (args.d_sink != nullptr) {  // the preprocess adds each query tile's share
    status = check_cuda(cudaMemsetAsync(args.d_sink, 0, shape.heads_q * sizeof(float), f.stream),
                        "cudaMemsetAsync(d_sink)");
    if (!status.ok()) return status;
  }
  status = launch_backward_preprocess(f.dtype, prepost, f.stream);
  if (!status.ok()) return status;

  bool packed_q = f.cu_seqlens_q != nullptr, packed_k = f.cu_seqlens_k != nullptr;
  int64_t rows_q = packed_q ? f.total_q : shape.seqlen_q, batch_q = packed_q ? 1 : shape.batch;
  int64_t rows_k = packed_k ? f.total_k : shape.seqlen_k, batch_k = packed_k ? 1 : shape.batch;
  if (rows_k > 0 && shape.seqlen_k > 0) {
    auto gQ = make_gmem_tensor<HeadDim, Input>(f.q, rows_q, shape.heads_q, batch_q);
    auto gDO = make_gmem_tensor<HeadDimV, Input>(args.d_o, rows_q, shape.heads_q, batch_q);
    auto gK = make_gmem_tensor<HeadDim, Input>(f.k, rows_k, shape.heads_kv, batch_k);
    auto gV = make_gmem_tensor<HeadDimV, Input>(f.v, rows_k, shape.heads_kv, batch_k);
    auto gDK = make_gmem_tensor<HeadDim, Element>(args.d_k, rows_k, shape.heads_kv, batch_k);
    auto gDV = make_gmem_tensor<HeadDimV, Element>(args.d_v, rows_k, shape.heads_kv, batch_k);
    typename Traits::Params params{
        make_tma_copy(SM90_TMA_LOAD{}, gQ, take<0, 2>(typename Traits::SmemLayoutQ{}),
                      Shape<typename Traits::BlockM, HeadDim>{}, _1{}),
        make_tma_copy(SM90_TMA_LOAD{}, gDO, take<0, 2>(typename Traits::SmemLayoutDO{}),
                      Shape<typename Traits::BlockM, HeadDimV>{}, _1{}),
        make_tma_copy(SM90_TMA_LOAD{}, gK, typename Traits::SmemLayoutK{}, Shape<typename Traits::BlockN, HeadDim>{},
                      _1{}),
        make_tma_copy(SM90_TMA_LOAD{}, gV, typename Traits::SmemLayoutV{}, Shape<typename Traits::BlockN, HeadDimV>{},
                      _1{}),
        make_tma_copy(SM90_TMA_STORE{}, gDK, typename Traits::SmemLayoutK{}, Shape<typename Traits::BlockN, HeadDim>{},
                      _1{}),
        make_tma_copy(SM90_TMA_STORE{}, gDV, typename Traits::SmemLayoutV{},
                      Shape<typename Traits::BlockN, HeadDimV>{}, _1{}),
        gQ.shape(),
        gDO.shape(),
        gK.shape(),
        gV.shape(),
        args.d_k,
        args.d_v,
        static_cast<int>(shape.heads_q / shape.heads_kv),
        static_cast<float>((f.softcap > 0.f ? f.softcap : softmax_scale) * M_LOG2E),
        f.softcap > 0.f ? softmax_scale / f.softcap : 0.f,
        softmax_scale,
        prepost.seq_q,
        SequenceLengths{f.cu_seqlens_k, f.seqused_k, static_cast<int>(shape.seqlen_k), static_cast<int>(f.total_k)},
        forward_mask(f).mask,
        prepost.workspace,
        prepost.workspace_base,
        args.deterministic,
    };
    auto kernel = backward_kernel<Traits>;
    static std::atomic<uint64_t> configured{0};
    int device = 0;
    if (!(status = check_cuda(cudaGetDevice(&device), "cudaGetDevice")).ok()) return status;
    status = opt_in_shared_memory(kernel, Traits::kSharedMemoryBytes, device, configured,
                                  "cudaFuncSetAttribute(backward_kernel)");
    if (!status.ok()) return status;
    dim3 grid(unsigned((shape.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN), unsigned(shape.heads_kv),
              unsigned(shape.batch));
    // A programmatic dependent of the preprocess (kernel.h waits for its outputs).
    DependentLaunch launch(grid, Traits::kThreads, Traits::kSharedMemoryBytes, f.stream);
    status = check_cuda(cudaLaunchKernelEx(&launch.config, kernel, params), "backward_kernel launch");
    if (!status.ok()) return status;
  }
  // No keys: dK and dV are empty, dQ is 0 (the cleared accumulator).
  return launch_backward_postprocess_dq(f.dtype, prepost, f.stream);
}

}  // namespace warpflash::kernels
