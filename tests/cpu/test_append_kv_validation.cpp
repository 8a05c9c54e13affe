// append_kv_cache()'s validation without a GPU: every rejection names the argument, the
// value and what is allowed, and nothing is launched for a rejected call.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

void* fake_pointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

// Decode: batch 4, one new token, a paged cache of 64 pages of 16 rows, rotary on half of
// d = 128 from fp32 tables.
AppendKvArgs valid_args() {
  AppendKvArgs args;
  args.dtype = DType::kBFloat16;
  args.batch = 4, args.seqlen_new = 1, args.seqlen_q = 1, args.heads_q = 32, args.heads_kv = 8;
  args.head_dim = 128, args.head_dim_v = 128;
  args.k_new = contiguous_view(fake_pointer(0x10000), 1, 8, 128);
  args.v_new = contiguous_view(fake_pointer(0x20000), 1, 8, 128);
  args.k_cache = contiguous_view(fake_pointer(0x100000), 16, 8, 128);
  args.v_cache = contiguous_view(fake_pointer(0x200000), 16, 8, 128);
  args.cache_batch = 64, args.cache_seqlen = 16;
  args.cache_seqlens = static_cast<const int32_t*>(fake_pointer(0x300000));
  args.page_table = static_cast<const int32_t*>(fake_pointer(0x310000));
  args.page_table_stride = 16, args.max_pages = 16;
  args.rotary_cos = fake_pointer(0x400000), args.rotary_sin = fake_pointer(0x500000);
  args.rotary_positions = 256, args.rotary_dim = 64, args.rotary_fp32 = true;
  args.q = contiguous_view(fake_pointer(0x600000), 1, 32, 128);
  args.q_out = contiguous_view(fake_pointer(0x700000), 1, 32, 128);
  return args;
}

void expect_invalid(const AppendKvArgs& args, const std::vector<std::string>& fragments) {
  Status status = validate_append_kv_cache(args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message '" << status.message() << "' lacks '" << fragment << "'";
  }
  EXPECT_EQ(append_kv_cache(args).code(), StatusCode::kInvalidArgument);  // validated before any GPU call
}

TEST(AppendKvValidation, AcceptsValidArguments) {
  EXPECT_TRUE(validate_append_kv_cache(valid_args()).ok()) << validate_append_kv_cache(valid_args()).message();
  AppendKvArgs contiguous = valid_args();
  contiguous.page_table = nullptr;
  contiguous.cache_batch = 4, contiguous.cache_seqlen = 4096;
  contiguous.k_cache = contiguous_view(contiguous.k_cache.data, 4096, 8, 128);
  contiguous.v_cache = contiguous_view(contiguous.v_cache.data, 4096, 8, 128);
  EXPECT_TRUE(validate_append_kv_cache(contiguous).ok()) << validate_append_kv_cache(contiguous).message();
  AppendKvArgs no_rotary = valid_args();
  no_rotary.rotary_dim = 0, no_rotary.rotary_cos = no_rotary.rotary_sin = nullptr;
  EXPECT_TRUE(validate_append_kv_cache(no_rotary).ok());
  AppendKvArgs empty = valid_args();
  empty.batch = 0;
  EXPECT_TRUE(append_kv_cache(empty).ok());  // nothing to do: no GPU needed
}

TEST(AppendKvValidation, RejectsBadArguments) {
  AppendKvArgs args = valid_args();
  args.dtype = DType::kFloat8E4M3;
  expect_invalid(args, {"dtype", "float8", "float16, bfloat16"});
  args = valid_args();
  args.head_dim = 129;
  expect_invalid(args, {"head_dim = 129", "even"});
  args = valid_args();
  args.head_dim_v = 512;
  expect_invalid(args, {"head_dim_v = 512", "256"});
  args = valid_args();
  args.rotary_dim = 130;
  expect_invalid(args, {"rotary_dim = 130", "head_dim = 128"});
  args = valid_args();
  args.rotary_dim = 63;
  expect_invalid(args, {"rotary_dim = 63", "even"});
  args = valid_args();
  args.rotary_sin = nullptr;
  expect_invalid(args, {"rotary_cos and rotary_sin", "null"});
  args = valid_args();
  args.cache_seqlens = nullptr;
  expect_invalid(args, {"cache_seqlens is null"});
  args = valid_args();
  args.heads_kv = 0;
  expect_invalid(args, {"heads_kv = 0", "1 to"});
  args = valid_args();
  args.seqlen_new = -1;
  expect_invalid(args, {"seqlen_new = -1"});
  args = valid_args();
  args.k_new.data = nullptr;
  expect_invalid(args, {"k_new.data is null"});
  args = valid_args();
  args.v_cache.seqlen_stride = 100;
  expect_invalid(args, {"v_cache.seqlen_stride = 100"});
  args = valid_args();
  args.q_out.data = fake_pointer(0x700002);
  expect_invalid(args, {"q_out.data", "aligned"});
  args = valid_args();
  args.cache_batch_idx = static_cast<const int32_t*>(fake_pointer(0x800000));
  expect_invalid(args, {"cache_batch_idx", "page_table"});
  args = valid_args();
  args.page_table_stride = 8;
  expect_invalid(args, {"page_table_stride = 8", "max_pages = 16"});
  args = valid_args();
  args.cache_seqlen = 0;
  expect_invalid(args, {"caches are empty", "cache_seqlen = 0"});
}

}  // namespace
}  // namespace warpflash
