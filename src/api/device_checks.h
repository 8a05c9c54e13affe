// What every entry point checks of the device before it launches: a Hopper GPU, and
// pointers the GPU can read. `api` prefixes the messages ("warpflash::forward").
#pragma once

#include "warpflash/status.h"

namespace warpflash {

// The kernels use sm_90a instructions (wgmma, setmaxnreg, TMA): the current device must be
// a Hopper GPU. A device's answer never changes, so it is asked once per device.
Status check_hopper_device(const char* api);

// Pointers the GPU cannot read (host memory, freed memory) fault inside the kernel and
// poison the CUDA context; catch them here instead. null passes.
Status check_device_pointer(const char* api, const char* name, const void* pointer);

}  // namespace warpflash
