// The main backward kernel for fp16, head dim 128 (the first the backward supports).
#include "kernels/backward/launch.h"

namespace warpflash::kernels {

Status backward_fp16_d128(BackwardArgs const& args, float softmax_scale) {
  return launch_backward<cutlass::half_t, 128, 128>(args, softmax_scale);
}

}  // namespace warpflash::kernels
