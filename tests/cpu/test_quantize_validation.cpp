// quantize_fp8()'s validation without a GPU (every rejection names the argument, the
// value and what is allowed), the scale count, and the Hadamard signs against the
// reference's.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/fp8.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

void* fake_pointer(uintptr_t address = 0x10000) { return reinterpret_cast<void*>(address); }

QuantizeFp8Args valid_args() {
  QuantizeFp8Args args;
  args.dtype = DType::kBFloat16;
  args.batch = 2, args.seqlen = 300, args.heads = 4, args.head_dim = 128;
  args.input = contiguous_view(fake_pointer(), 300, 4, 128);
  args.output = contiguous_view(fake_pointer(0x100000), 300, 4, 128);
  args.scales = static_cast<float*>(fake_pointer(0x200000));
  args.block_rows = 128;
  args.hadamard = true;
  args.seed = 42;
  return args;
}

void expect_error(const QuantizeFp8Args& args, StatusCode code, const std::vector<std::string>& fragments) {
  Status status = validate_quantize_fp8(args);
  EXPECT_EQ(status.code(), code) << status.message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message '" << status.message() << "' lacks '" << fragment << "'";
  }
  // quantize_fp8() validates before it touches the GPU.
  EXPECT_EQ(quantize_fp8(args).code(), code);
}

TEST(QuantizeValidation, AcceptsValidArguments) {
  for (int64_t head_dim : {64, 96, 128, 192, 256}) {
    for (int64_t block_rows : {0, 64, 128}) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
        QuantizeFp8Args args = valid_args();
        args.dtype = dtype;
        args.head_dim = head_dim;
        args.input = contiguous_view(args.input.data, args.seqlen, args.heads, head_dim);
        args.output = contiguous_view(args.output.data, args.seqlen, args.heads, head_dim);
        args.block_rows = block_rows;
        args.hadamard = head_dim != 96 && head_dim != 192;
        EXPECT_TRUE(validate_quantize_fp8(args).ok()) << validate_quantize_fp8(args).message();
      }
    }
  }
}

TEST(QuantizeValidation, SizesAndDtype) {
  QuantizeFp8Args args = valid_args();
  args.dtype = static_cast<DType>(7);
  expect_error(args, StatusCode::kInvalidArgument, {"warpflash::quantize_fp8: dtype = 7", "float16, bfloat16"});
  args = valid_args(), args.batch = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"batch = -1 is out of range"});
  args = valid_args(), args.seqlen = -3;
  expect_error(args, StatusCode::kInvalidArgument, {"seqlen = -3 is out of range"});
  args = valid_args(), args.heads = 0;
  expect_error(args, StatusCode::kInvalidArgument, {"heads = 0 is out of range: allowed is 1"});
  args = valid_args(), args.batch = int64_t(1) << 20, args.heads = int64_t(1) << 20;
  expect_error(args, StatusCode::kInvalidArgument, {"batch * heads * num_blocks", "split the batch"});
}

TEST(QuantizeValidation, HeadDimBlockRowsAndHadamard) {
  QuantizeFp8Args args = valid_args();
  args.head_dim = 80;
  expect_error(args, StatusCode::kNotSupported, {"head_dim = 80 is not supported", "64, 96, 128, 192, 256"});
  args.head_dim = -64;
  expect_error(args, StatusCode::kInvalidArgument, {"head_dim = -64"});
  args = valid_args(), args.block_rows = 32;
  expect_error(args, StatusCode::kNotSupported,
               {"block_rows = 32 is not supported", "0 (one scale per (batch, head)), 64, 128"});
  args.block_rows = 256;
  expect_error(args, StatusCode::kNotSupported, {"block_rows = 256"});
  args.block_rows = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"block_rows = -1"});
  for (int64_t head_dim : {96, 192}) {
    args = valid_args(), args.head_dim = head_dim;
    args.input = contiguous_view(args.input.data, args.seqlen, args.heads, head_dim);
    args.output = contiguous_view(args.output.data, args.seqlen, args.heads, head_dim);
    expect_error(args, StatusCode::kNotSupported,
                 {"hadamard = true needs a power-of-two head_dim", "head_dim = " + std::to_string(head_dim)});
    args.hadamard = false;
    EXPECT_TRUE(validate_quantize_fp8(args).ok()) << validate_quantize_fp8(args).message();
  }
}

TEST(QuantizeValidation, TensorsAndScales) {
  QuantizeFp8Args args = valid_args();
  args.input.data = nullptr;
  expect_error(args, StatusCode::kInvalidArgument, {"input.data is null"});
  args = valid_args(), args.input.data = fake_pointer(0x10008);
  expect_error(args, StatusCode::kInvalidArgument, {"input.data = 0x10008 is not 16-byte aligned"});
  args = valid_args(), args.input.seqlen_stride = 4 * 128 + 4;  // 8 bytes: not a multiple of 16
  expect_error(args, StatusCode::kInvalidArgument, {"input.seqlen_stride = 516 elements", "multiples of 8 elements"});
  args = valid_args(), args.output.data = nullptr;
  expect_error(args, StatusCode::kInvalidArgument, {"output.data is null"});
  args = valid_args(), args.output.head_stride = 136;  // 136 bytes of e4m3
  expect_error(args, StatusCode::kInvalidArgument, {"output.head_stride = 136 elements", "multiples of 16 elements"});
  args = valid_args(), args.output.batch_stride = 0;
  expect_error(args, StatusCode::kInvalidArgument, {"output.batch_stride = 0"});
  args = valid_args(), args.scales = nullptr;
  expect_error(args, StatusCode::kInvalidArgument, {"scales is null"});
  args = valid_args(), args.scales = static_cast<float*>(fake_pointer(0x200002));
  expect_error(args, StatusCode::kInvalidArgument, {"scales = 0x200002 is not 4-byte aligned"});
  // Strided input (a head-major buffer with padded rows) is fine.
  args = valid_args(), args.input = {fake_pointer(), 4 * 300 * 136, 136, 300 * 136};
  EXPECT_TRUE(validate_quantize_fp8(args).ok()) << validate_quantize_fp8(args).message();
}

TEST(QuantizeValidation, EmptyProblemsTouchOnlyWhatTheyWrite) {
  QuantizeFp8Args args = valid_args();
  args.batch = 0, args.input.data = nullptr, args.output.data = nullptr, args.scales = nullptr;
  EXPECT_TRUE(validate_quantize_fp8(args).ok()) << validate_quantize_fp8(args).message();
  EXPECT_TRUE(quantize_fp8(args).ok());  // no-op, no GPU needed
  args = valid_args(), args.seqlen = 0, args.input.data = nullptr, args.output.data = nullptr;
  args.scales = nullptr;  // block_rows 128: no scales
  EXPECT_TRUE(validate_quantize_fp8(args).ok()) << validate_quantize_fp8(args).message();
  EXPECT_TRUE(quantize_fp8(args).ok());
  args.block_rows = 0;  // one scale per (batch, head), written even when empty
  expect_error(args, StatusCode::kInvalidArgument, {"scales is null"});
}

TEST(QuantizeValidation, NumBlocks) {
  EXPECT_EQ(quantize_fp8_num_blocks(1000, 128), 8);
  EXPECT_EQ(quantize_fp8_num_blocks(1024, 128), 8);
  EXPECT_EQ(quantize_fp8_num_blocks(129, 64), 3);
  EXPECT_EQ(quantize_fp8_num_blocks(1, 64), 1);
  EXPECT_EQ(quantize_fp8_num_blocks(0, 64), 0);
  EXPECT_EQ(quantize_fp8_num_blocks(5000, 0), 1);
  EXPECT_EQ(quantize_fp8_num_blocks(0, 0), 1);
  EXPECT_EQ(quantize_fp8_num_blocks(-1, 64), 0);
  EXPECT_EQ(quantize_fp8_num_blocks(10, -1), 0);
}

TEST(HadamardSignBits, MatchReferenceSigns) {
  for (uint64_t seed : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(42), uint64_t(0x9e3779b97f4a7c15)}) {
    for (int64_t n : {64, 128, 256}) {
      std::vector<double> signs = reference::hadamard_signs(n, seed);
      std::array<uint64_t, 4> bits = hadamard_sign_bits(n, seed);
      int negative = 0;
      for (int64_t i = 0; i < 256; ++i) {
        bool set = (bits[i / 64] >> (i % 64)) & 1;
        if (i < n) {
          EXPECT_EQ(set, signs[i] < 0) << "seed " << seed << ", n " << n << ", sign " << i;
          negative += set;
        } else {
          EXPECT_FALSE(set) << "seed " << seed << ", n " << n << ": bit " << i << " past n";
        }
      }
      EXPECT_GT(negative, n / 4) << "seed " << seed << ", n " << n;  // random, not constant
      EXPECT_LT(negative, 3 * n / 4) << "seed " << seed << ", n " << n;
    }
  }
  EXPECT_NE(hadamard_sign_bits(128, 1), hadamard_sign_bits(128, 2));
  EXPECT_EQ(hadamard_sign_bits(512, 3), hadamard_sign_bits(256, 3));  // at most 256 drawn
}

}  // namespace
}  // namespace warpflash
