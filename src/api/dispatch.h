// The one table from (dtype, head dim) to a compiled forward kernel.
#pragma once

#include <vector>

#include "warpflash/forward.h"

namespace warpflash {

using ForwardLauncher = Status (*)(const ForwardArgs& args, float softmax_scale);

// nullptr when this build has no kernel for the pair.
ForwardLauncher find_forward_launcher(DType dtype, int64_t head_dim);

}  // namespace warpflash
