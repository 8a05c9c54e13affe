// Special registers read again at each use (asm volatile: not hoisted), for values that a
// kernel would otherwise hold through its main loop, where ptxas spilled them.
#pragma once

#include <cute/config.hpp>

namespace warpflash::kernels {

// threadIdx.x (the backward's consumers: their addresses and barrier IDs).
CUTE_DEVICE int fresh_thread_index() {
  int thread;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
  return thread;
}

// gridDim.x (the forward's general loop: its producer thread spilled it).
CUTE_DEVICE unsigned grid_size() {
  unsigned size;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(size));
  return size;
}

}  // namespace warpflash::kernels
