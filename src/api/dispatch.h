// The one table from (dtype, head dims, tile variant, loop) to a compiled forward kernel.
#pragma once

#include <string>
#include <vector>

#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"
#include "warpflash/forward.h"

namespace warpflash {

using ForwardLauncher = Status (*)(const ForwardArgs& args, float softmax_scale, const kernels::ForwardPlan& plan);

// The kernel variant forward() runs for these (validated) arguments, and its tiles.
// Packed or split problems run the general loop, never a clustered kernel.
inline kernels::ForwardVariant forward_variant_of(const ForwardArgs& args, const kernels::ForwardPlan& plan = {}) {
  if (args.dtype == DType::kFloat8E4M3) {
    bool kv_scales_per_128_rows =
        (args.k_block_scale != nullptr || args.v_block_scale != nullptr) && args.kv_block_rows != 0;
    return kernels::forward_variant_fp8(static_cast<int>(args.shape.head_dim), args.shape.seqlen_k,
                                        kernels::longest_key_span(args), kv_scales_per_128_rows);
  }
  kernels::ForwardVariant variant =
      kernels::forward_variant(static_cast<int>(args.shape.head_dim), args.causal, args.shape.seqlen_q,
                               args.shape.seqlen_k, kernels::uniform_tiles(args) && plan.plain(),
                               kernels::longest_key_span(args));
  // Paged caches load in the kernels with ForwardTraits::kPagedKv: d=128's default (whose
  // 128-key blocks take power-of-two pages in one or a few runs of rows, paged_kv.h),
  // d=64's short causal kernel (the same blocks; for every paged d=64 problem) and d=256's
  // short one (their producers have the registers). Left-padded caches too
  // (ForwardTraits::kLeftPadding).
  if (args.page_table != nullptr || args.leftpad_k != nullptr) {
    if (args.shape.head_dim == 64) return kernels::ForwardVariant::kShortCausal;
    bool d256 = args.shape.head_dim == 256 && args.shape.value_head_dim() == 256;
    return d256 ? kernels::ForwardVariant::kShort : kernels::ForwardVariant::kDefault;
  }
  return variant;
}
inline kernels::ForwardTileConfig forward_tile_config_of(const ForwardArgs& args,
                                                         const kernels::ForwardPlan& plan = {}) {
  return kernels::forward_tile_config(static_cast<int>(args.shape.head_dim),
                                      static_cast<int>(args.shape.value_head_dim()), forward_variant_of(args, plan),
                                      args.dtype == DType::kFloat8E4M3);
}

// nullptr when this build has no instance of the variant for the head dims with a loop
// for the problem: a plain one (kernels::plain_problem) runs on either loop, others on the
// general one. A head-dim pair that is compiled has every variant and loop that
// forward_variant() picks for it (DispatchTable.EveryPickedVariantIsCompiled).
ForwardLauncher find_forward_launcher(DType dtype, int64_t head_dim, int64_t head_dim_v,
                                      kernels::ForwardVariant variant, bool plain);

// Every compiled instance as "bfloat16 d192/128 default (general loop), ...", for
// "not supported" messages.
std::string compiled_kernels();

}  // namespace warpflash
