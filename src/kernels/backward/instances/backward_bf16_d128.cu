// The main backward kernel for bf16, head dim 128 (the first the backward supports).
#include "kernels/backward/launch.h"

namespace warpflash::kernels {

Status backward_bf16_d128(BackwardArgs const& args, float softmax_scale) {
  return launch_backward<cutlass::bfloat16_t, 128, 128>(args, softmax_scale);
}

}  // namespace warpflash::kernels
