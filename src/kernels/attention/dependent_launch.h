// Programmatic dependent launch (Hopper): a kernel launched with launch_dependent() may
// start while the kernel before it on the stream finishes (its CTAs take the SMs that the
// other's last CTAs free, its launch overlaps their tail); it calls wait_for_prerequisite()
// before it touches what that kernel writes. A kernel lets its dependents start early with
// allow_dependents() (otherwise they start as it exits).
#pragma once

#include <cuda_runtime.h>

namespace warpflash::kernels {

// Returns once the kernels this one depends on have completed and their writes are
// visible (at once when it was launched normally). A CTA whose threads all skip it may
// complete before those kernels do: one thread a CTA waits, so that kernels launched
// after this one may rely on everything before it.
__device__ __forceinline__ void wait_for_prerequisite() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// The dependent kernel may be scheduled once every CTA of this one has called this or exited.
__device__ __forceinline__ void allow_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// cudaLaunchKernelEx's configuration for a programmatic dependent of the stream's previous kernel.
struct DependentLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute{};
  DependentLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  DependentLaunch(DependentLaunch const&) = delete;  // config points at attribute
};

}  // namespace warpflash::kernels
