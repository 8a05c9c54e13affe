// The launcher of the FP8 quantization kernel (quantize_fp8.cu), for src/api/quantize.cpp.
#pragma once

#include <array>
#include <cstdint>

#include "warpflash/quantize.h"
#include "warpflash/status.h"

namespace warpflash::kernels {

// The most rows one CTA quantizes at a time: block_rows 64 or 128 take one CTA per block;
// block_rows 0 takes one per (batch, head) up to this many rows, else two passes over
// chunks of this many rows (the group's amax first).
constexpr int64_t kQuantizeMaxChunkRows = 128;

// Launches the quantization on args.stream. The arguments are validated (validate_quantize_fp8)
// and batch > 0; sign_bits are hadamard_sign_bits(head_dim, seed) when args.hadamard.
Status launch_quantize_fp8(const QuantizeFp8Args& args, const std::array<uint64_t, 4>& sign_bits);

}  // namespace warpflash::kernels
