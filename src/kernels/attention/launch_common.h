// Host-side pieces every kernel's launch uses: TMA's view of an attention tensor, per-device
// caches and the shared-memory opt-in (and check_cuda.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>
#include <cute/tensor.hpp>

#include "kernels/attention/check_cuda.h"
#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash::kernels {

using namespace cute;

// A (seqlen, head_dim, heads, batch) view as TMA sees it, HeadDim wide; Element is const
// for the inputs.
template <class HeadDim, class Element>
auto make_gmem_tensor(TensorView4d const& view, int64_t seqlen, int64_t heads, int64_t batch) {
  auto layout = make_layout(
      make_shape(static_cast<int>(seqlen), HeadDim{}, static_cast<int>(heads), static_cast<int>(batch)),
      make_stride(view.seqlen_stride, _1{}, view.head_stride, view.batch_stride));
  return make_tensor(make_gmem_ptr(static_cast<Element*>(view.data)), layout);
}

// A per-device constant (the SM count, how many clusters fit), queried on the first launch
// on each device: query(value) sets it.
template <class Query>
Status cached_per_device(std::atomic<int> (&cache)[64], int device, int& value, Query&& query) {
  value = device < 64 ? cache[device].load(std::memory_order_relaxed) : 0;
  if (value != 0) return Status::Ok();
  Status status = query(value);
  if (status.ok() && device < 64) cache[device].store(value, std::memory_order_relaxed);
  return status;
}

// The shared-memory opt-in above 48 KB is a per-device attribute of each kernel: set once per
// device, its bit in `configured` (devices past 64 set it at every launch).
template <class Kernel>
Status opt_in_shared_memory(Kernel* kernel, int bytes, int device, std::atomic<uint64_t>& configured,
                            const char* what) {
  uint64_t device_bit = device < 64 ? uint64_t(1) << device : 0;
  if (configured.load(std::memory_order_relaxed) & device_bit) return Status::Ok();
  Status status = check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what);
  if (status.ok()) configured.fetch_or(device_bit, std::memory_order_relaxed);
  return status;
}

}  // namespace warpflash::kernels
