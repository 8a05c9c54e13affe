// Checks of a (batch, seqlen, heads, head_dim) tensor view for what TMA can address,
// shared by the validation of every entry point.
#pragma once

#include <cstdint>
#include <string>

#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash {

// `api` prefixes the message ("warpflash::forward"); `name` is the argument's.
Status check_tensor_view(const char* api, const char* name, const TensorView4d& view, int64_t batch, int64_t seqlen,
                         int64_t heads, int element_bytes, bool may_be_null);

}  // namespace warpflash
