// quantize_fp8(): validation of every argument, the Hadamard signs, the device checks and
// the launch (kernels/quantize/quantize_fp8.cu).
#include <algorithm>
#include <random>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "api/device_checks.h"
#include "api/limits.h"
#include "api/tensor_checks.h"
#include "api/text.h"
#include "kernels/quantize/quantize_fp8.h"
#include "warpflash/quantize.h"

namespace warpflash {
namespace {

using text::concat;
using text::Hex;

constexpr const char* kApi = "warpflash::quantize_fp8";
constexpr int64_t kMaxHadamardDim = 256;

Status invalid(const std::string& message) { return Status::InvalidArgument(concat(kApi, ": ", message)); }
Status not_supported(const std::string& message) { return Status::NotSupported(concat(kApi, ": ", message)); }

Status check_size(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return Status::Ok();
  return invalid(concat(name, " = ", value, " is out of range: allowed is ", min, " to ", max));
}

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

int64_t quantize_fp8_num_blocks(int64_t seqlen, int64_t block_rows) {
  if (seqlen < 0 || block_rows < 0) return 0;
  if (block_rows == 0) return 1;
  return (seqlen + block_rows - 1) / block_rows;
}

std::array<uint64_t, 4> hadamard_sign_bits(int64_t n, uint64_t seed) {
  std::array<uint64_t, 4> bits{};
  std::mt19937_64 generator(seed);
  for (int64_t i = 0; i < std::min(n, kMaxHadamardDim); ++i) {
    if (generator() & 1) bits[i / 64] |= uint64_t(1) << (i % 64);
  }
  return bits;
}

Status validate_quantize_fp8(const QuantizeFp8Args& args) {
  if (args.dtype != DType::kFloat16 && args.dtype != DType::kBFloat16) {
    return invalid(concat("dtype = ", static_cast<int>(args.dtype), " is not supported: allowed are float16, bfloat16"));
  }
  Status status;
  if (!(status = check_size("batch", args.batch, 0, limits::kMaxBatch)).ok()) return status;
  if (!(status = check_size("seqlen", args.seqlen, 0, limits::kMaxSeqlen)).ok()) return status;
  if (!(status = check_size("heads", args.heads, 1, limits::kMaxHeads)).ok()) return status;
  const int64_t d = args.head_dim;
  if (d != 64 && d != 96 && d != 128 && d != 192 && d != 256) {
    std::string message = concat("head_dim = ", d, " is not supported: allowed are 64, 96, 128, 192, 256");
    return d > 0 ? not_supported(message) : invalid(message);
  }
  if (args.block_rows != 0 && args.block_rows != 64 && args.block_rows != 128) {
    std::string message = concat("block_rows = ", args.block_rows,
                                 " is not supported: allowed are 0 (one scale per (batch, head)), 64, 128");
    return args.block_rows > 0 ? not_supported(message) : invalid(message);
  }
  if (args.hadamard && !is_power_of_two(d)) {
    return not_supported(concat("hadamard = true needs a power-of-two head_dim (64, 128, 256); head_dim = ", d));
  }
  if (args.batch == 0) return Status::Ok();  // nothing is read or written
  const int64_t num_blocks = quantize_fp8_num_blocks(args.seqlen, args.block_rows);
  if (args.batch * args.heads * num_blocks > limits::kMaxTiles) {
    return invalid(concat("batch * heads * num_blocks = ", args.batch, " * ", args.heads, " * ", num_blocks,
                          " exceeds ", limits::kMaxTiles, " (the kernel's grid); split the batch"));
  }
  if (num_blocks > 0) {
    if (args.scales == nullptr) return invalid("scales is null; a device pointer is required");
    if (reinterpret_cast<uintptr_t>(args.scales) % alignof(float) != 0) {
      return invalid(concat("scales = ", Hex{reinterpret_cast<uintptr_t>(args.scales)},
                            " is not 4-byte aligned (an fp32 array is required)"));
    }
  }
  if (args.seqlen == 0) return Status::Ok();  // only scales are written
  const int bytes = dtype_size_bytes(args.dtype);
  if (!(status = check_tensor_view(kApi, "input", args.input, args.batch, args.seqlen, args.heads, bytes, false)).ok()) {
    return status;
  }
  return check_tensor_view(kApi, "output", args.output, args.batch, args.seqlen, args.heads, 1, false);
}

Status quantize_fp8(const QuantizeFp8Args& args) {
  Status status = validate_quantize_fp8(args);
  if (!status.ok() || quantize_fp8_num_blocks(args.seqlen, args.block_rows) * args.batch == 0) return status;
  if (!(status = check_hopper_device(kApi)).ok()) return status;
  if (args.check_pointers) {
    const std::pair<const char*, const void*> pointers[] = {
        {"input.data", args.input.data}, {"output.data", args.output.data}, {"scales", args.scales}};
    for (const auto& [name, pointer] : pointers) {
      if (args.seqlen == 0 && pointer != args.scales) continue;  // not touched
      if (!(status = check_device_pointer(kApi, name, pointer)).ok()) return status;
    }
  }
  std::array<uint64_t, 4> signs{};
  if (args.hadamard) signs = hadamard_sign_bits(args.head_dim, args.seed);
  return kernels::launch_quantize_fp8(args, signs);
}

}  // namespace warpflash
