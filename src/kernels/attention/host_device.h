// Lets pure index arithmetic compile for both the host (CPU tests) and the device.
#pragma once

#if defined(__CUDACC__)
#define WF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define WF_HOST_DEVICE inline
#endif
