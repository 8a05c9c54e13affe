// The launcher of the KV-cache append with fused rotary embedding (append_kv.cu), for
// src/api/append_kv.cpp.
#pragma once

#include "warpflash/kvcache.h"
#include "warpflash/status.h"

namespace warpflash::kernels {

// Launches the append on args.stream. The arguments are validated
// (validate_append_kv_cache) and there is work (rows to write).
Status launch_append_kv(const AppendKvArgs& args);

}  // namespace warpflash::kernels
