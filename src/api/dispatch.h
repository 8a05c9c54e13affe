// The one table from (dtype, head dim, tile variant) to a compiled forward kernel.
#pragma once

#include <string>
#include <vector>

#include "kernels/forward/config.h"
#include "kernels/forward/problem.h"
#include "warpflash/forward.h"

namespace warpflash {

using ForwardLauncher = Status (*)(const ForwardArgs& args, float softmax_scale);

// The kernel variant forward() runs for these (validated) arguments.
inline kernels::ForwardVariant forward_variant_of(const ForwardArgs& args) {
  return kernels::forward_variant(static_cast<int>(args.shape.head_dim), args.causal, args.shape.seqlen_q,
                                  args.shape.seqlen_k, kernels::uniform_tiles(args));
}

// nullptr when this build has no kernel for the triple. A head dim that is compiled has
// every variant that forward_variant() picks for it.
ForwardLauncher find_forward_launcher(DType dtype, int64_t head_dim,
                                      kernels::ForwardVariant variant = kernels::ForwardVariant::kDefault);

// Every compiled kernel as "bfloat16 d128 variant 2, ...", for "not supported" messages.
std::string compiled_kernels();

}  // namespace warpflash
