// Every rejection of forward()'s validation: it names the argument, the value and what is
// allowed, and never needs a GPU.
#include <algorithm>
#include <cmath>
#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

// Fake, never dereferenced: validation only looks at the numbers.
void* fake_pointer(uintptr_t address = 0x10000) { return reinterpret_cast<void*>(address); }

ForwardArgs valid_args(int64_t head_dim = 0) {
  ForwardArgs args;
  args.dtype = DType::kBFloat16;
  if (head_dim == 0) head_dim = compiled_head_dims(DType::kBFloat16).at(0);
  args.shape = {2, 100, 120, 8, 2, head_dim};
  args.q = contiguous_view(fake_pointer(), 100, 8, head_dim);
  args.k = contiguous_view(fake_pointer(), 120, 2, head_dim);
  args.v = contiguous_view(fake_pointer(), 120, 2, head_dim);
  args.o = contiguous_view(fake_pointer(), 100, 8, head_dim);
  return args;
}

bool compiled_for_fp8(int64_t head_dim) {
  std::vector<int> dims = compiled_head_dims(DType::kFloat8E4M3);
  return std::find(dims.begin(), dims.end(), head_dim) != dims.end();
}

void expect_error(const ForwardArgs& args, StatusCode code, const std::vector<std::string>& fragments) {
  Status status = validate_forward(args);
  EXPECT_EQ(status.code(), code) << status.message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message '" << status.message() << "' lacks '" << fragment << "'";
  }
}

// The tests validate BF16 problems: a build without BF16 kernels (WARPFLASH_DTYPES) skips
// them.
class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (compiled_head_dims(DType::kBFloat16).empty()) GTEST_SKIP() << "no bf16 kernels in this build (WARPFLASH_DTYPES)";
  }
};

TEST_F(Validation, AcceptsValidArguments) {
  EXPECT_TRUE(validate_forward(valid_args()).ok()) << validate_forward(valid_args()).message();
}

TEST_F(Validation, NullPointers) {
  for (auto member : {&ForwardArgs::q, &ForwardArgs::k, &ForwardArgs::v, &ForwardArgs::o}) {
    ForwardArgs args = valid_args();
    (args.*member).data = nullptr;
    expect_error(args, StatusCode::kInvalidArgument, {".data is null"});
  }
}

TEST_F(Validation, HeadDimNotCompiledListsTheCompiledOnes) {
  ForwardArgs args = valid_args();
  args.shape.head_dim = 80;
  std::string listed;
  for (HeadDims dims : compiled_head_dim_pairs(DType::kBFloat16)) {
    listed += (listed.empty() ? "" : ", ") + std::to_string(dims.qk);
    if (dims.v != dims.qk) listed += "/" + std::to_string(dims.v);
  }
  expect_error(args, StatusCode::kNotSupported, {"shape.head_dim = 80", "{" + listed + "}", "bfloat16"});
  // A V head dim that no kernel pairs with this one.
  args.shape.head_dim = compiled_head_dims(DType::kBFloat16).at(0);
  args.shape.head_dim_v = 8;
  expect_error(args, StatusCode::kNotSupported, {"head_dim_v = 8", "{" + listed + "}"});
  args.shape.head_dim_v = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.head_dim_v = -1"});
}

// (192, 128): a V head dim of its own, where the build has it.
TEST_F(Validation, ValueHeadDimOfItsOwn) {
  bool compiled = false;
  for (HeadDims dims : compiled_head_dim_pairs(DType::kBFloat16)) compiled |= dims.qk == 192 && dims.v == 128;
  if (!compiled) GTEST_SKIP() << "d=192/128 not compiled";
  ForwardArgs args = valid_args(192);
  args.shape.head_dim_v = 128;
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
  args.shape.head_dim_v = 192;
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
}

TEST_F(Validation, HeadsQNotAMultipleOfHeadsKv) {
  ForwardArgs args = valid_args();
  args.shape.heads_kv = 3;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.heads_q = 8", "shape.heads_kv = 3"});
}

TEST_F(Validation, NegativeOrZeroSizes) {
  ForwardArgs args = valid_args();
  args.shape.batch = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.batch = -1", "0 to"});
  args = valid_args();
  args.shape.seqlen_k = -5;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.seqlen_k = -5"});
  args = valid_args();
  args.shape.heads_kv = 0;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.heads_kv = 0", "1 to"});
}

TEST_F(Validation, SizesThatOverflowTheKernelIndexTypes) {
  ForwardArgs args = valid_args();
  args.shape.seqlen_q = int64_t(1) << 31;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.seqlen_q = 2147483648", "out of range"});
  args = valid_args();
  args.shape.batch = int64_t(1) << 29;
  args.shape.seqlen_q = 1 << 20;
  expect_error(args, StatusCode::kInvalidArgument, {"tiles exceeds"});
}

TEST_F(Validation, MisalignedPointer) {
  ForwardArgs args = valid_args();
  args.k.data = fake_pointer(0x10002);
  expect_error(args, StatusCode::kInvalidArgument, {"k.data = 0x10002", "16-byte aligned"});
}

TEST_F(Validation, StridesThatBreakTmaAlignment) {
  ForwardArgs args = valid_args();
  args.v.seqlen_stride += 1;
  expect_error(args, StatusCode::kInvalidArgument, {"v.seqlen_stride", "multiples of 8 elements"});
  args = valid_args();
  args.q.head_stride = -args.q.head_stride;
  expect_error(args, StatusCode::kInvalidArgument, {"q.head_stride", "positive"});
  args = valid_args();
  args.o.batch_stride = int64_t(1) << 40;
  expect_error(args, StatusCode::kInvalidArgument, {"o.batch_stride"});
}

TEST_F(Validation, StrideOfASizeOneDimensionIsIgnored) {
  ForwardArgs args = valid_args();
  args.shape.batch = 1;
  args.q.batch_stride = 3;  // never used
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
}

TEST_F(Validation, SoftmaxScale) {
  ForwardArgs args = valid_args();
  args.softmax_scale = -1.f;
  expect_error(args, StatusCode::kInvalidArgument, {"softmax_scale = -1"});
  args.softmax_scale = NAN;
  expect_error(args, StatusCode::kInvalidArgument, {"softmax_scale"});
}

TEST_F(Validation, UnknownDtype) {
  ForwardArgs args = valid_args();
  args.dtype = static_cast<DType>(42);
  expect_error(args, StatusCode::kInvalidArgument, {"dtype = 42", "float16, bfloat16"});
}

TEST_F(Validation, LseMisaligned) {
  ForwardArgs args = valid_args();
  args.lse = reinterpret_cast<float*>(0x10002);
  expect_error(args, StatusCode::kInvalidArgument, {"lse = 0x10002", "4-byte aligned"});
}

TEST_F(Validation, WorkspaceMisaligned) {
  ForwardArgs args = valid_args();
  args.workspace = reinterpret_cast<void*>(0x10008);
  args.workspace_bytes = 1 << 20;
  expect_error(args, StatusCode::kInvalidArgument, {"workspace = 0x10008", "16-byte aligned"});
}

TEST_F(Validation, EmptyProblemsAreValidWithoutPointers) {
  ForwardArgs args;
  args.shape = {0, 100, 100, 4, 4, compiled_head_dims(DType::kBFloat16).at(0)};
  EXPECT_TRUE(validate_forward(args).ok());
  args.shape = {3, 0, 100, 4, 4, args.shape.head_dim};
  EXPECT_TRUE(validate_forward(args).ok());
  EXPECT_TRUE(forward(args).ok());  // no GPU needed for a no-op
  // No keys: K and V may be null, Q and O may not.
  args = valid_args();
  args.shape.seqlen_k = 0;
  args.k.data = args.v.data = nullptr;
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
}

// The masking, softcap and varlen options: each bad value is named.
TEST_F(Validation, MaskSoftcapAndVarlenOptions) {
  ForwardArgs args = valid_args();
  args.window_left = -2;
  expect_error(args, StatusCode::kInvalidArgument, {"window_size = (-2, -1)", "-1 (unbounded) or >= 0"});
  args = valid_args();
  args.attention_chunk = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"attention_chunk = -1"});
  args = valid_args();
  args.softcap = -1.f;
  expect_error(args, StatusCode::kInvalidArgument, {"softcap = -1", "finite and >= 0"});
  args = valid_args();
  args.softcap = NAN;
  expect_error(args, StatusCode::kInvalidArgument, {"softcap = nan"});
  args = valid_args();
  args.total_q = 50;
  expect_error(args, StatusCode::kInvalidArgument, {"total_q = 50 is set without cu_seqlens_q"});
  args = valid_args();
  args.cu_seqlens_q = static_cast<const int*>(fake_pointer(0x10002));
  args.total_q = 10;
  expect_error(args, StatusCode::kInvalidArgument, {"cu_seqlens_q = 0x10002 is not 4-byte aligned"});
  args = valid_args();
  args.learnable_sink = static_cast<const float*>(fake_pointer(0x10001));
  expect_error(args, StatusCode::kInvalidArgument, {"learnable_sink = 0x10001"});
  args = valid_args();
  args.cu_seqlens_k = static_cast<const int*>(fake_pointer());
  args.total_k = -3;
  expect_error(args, StatusCode::kInvalidArgument, {"total_k = -3 is out of range"});
  // A packed side is checked as (total rows, heads, head_dim): its batch stride is unused.
  args = valid_args();
  args.cu_seqlens_q = static_cast<const int*>(fake_pointer());
  args.total_q = 1000;
  args.q.batch_stride = 3;
  args.o.batch_stride = 0;
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
  args.q.seqlen_stride = 7;
  expect_error(args, StatusCode::kInvalidArgument, {"q.seqlen_stride = 7 elements"});
}

// forward() itself (not only its validation) with fake pointers: without a GPU it says
// there is no usable device, on another GPU that it needs a Hopper one, on a Hopper GPU
// that q.data is not device memory. Whatever the machine, nothing launches.
TEST_F(Validation, NumSplits) {
  ForwardArgs args = valid_args();
  for (int64_t splits : {int64_t(0), int64_t(1), int64_t(2), int64_t(128)}) {
    args.num_splits = splits;
    EXPECT_TRUE(validate_forward(args).ok()) << splits << ": " << validate_forward(args).message();
  }
  for (int64_t splits : {int64_t(-1), int64_t(129)}) {
    args.num_splits = splits;
    expect_error(args, StatusCode::kInvalidArgument, {"num_splits = " + std::to_string(splits), "128"});
  }
  args.num_splits = 4;
  float sink = 0.f;
  args.learnable_sink = &sink;
  expect_error(args, StatusCode::kNotSupported, {"num_splits = 4", "learnable_sink", "pass 0"});
  args.learnable_sink = nullptr;
  int seqused[2] = {1, 1};
  args.seqused_q = seqused;
  expect_error(args, StatusCode::kNotSupported, {"num_splits = 4", "seqused_q"});
}

TEST_F(Validation, KvBatchIdx) {
  ForwardArgs args = valid_args();
  int rows[2] = {3, 0};
  args.kv_batch_idx = rows;
  expect_error(args, StatusCode::kInvalidArgument, {"kv_batch = 0"});
  args.kv_batch = 5;  // k and v of valid_args() describe 5 sequences as well as 2 (same strides)
  EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
  int cu[3] = {0, 60, 120};
  args.cu_seqlens_k = cu;
  args.total_k = 120;
  expect_error(args, StatusCode::kNotSupported, {"kv_batch_idx", "cu_seqlens_k"});
  args = valid_args();
  args.kv_batch = 4;
  expect_error(args, StatusCode::kInvalidArgument, {"kv_batch = 4", "without kv_batch_idx"});
}

// A paged cache: k and v of valid_args() seen as 12 pages of 10 rows.
ForwardArgs paged_args() {
  ForwardArgs args = valid_args();
  static const int table[2 * 16] = {};
  args.page_table = table;
  args.page_table_batch_stride = 16;
  args.max_pages = 16;
  args.num_pages = 12;
  args.page_size = 10;
  args.k.batch_stride = args.v.batch_stride = 10 * args.k.seqlen_stride;
  return args;
}

TEST_F(Validation, PagedKv) {
  EXPECT_TRUE(validate_forward(paged_args()).ok()) << validate_forward(paged_args()).message();
  ForwardArgs args = paged_args();
  args.max_pages = 11;
  expect_error(args, StatusCode::kInvalidArgument, {"shape.seqlen_k = 120", "max_pages * page_size = 11 * 10"});
  args = paged_args();
  args.page_size = 0;
  expect_error(args, StatusCode::kInvalidArgument, {"page_size = 0", "1 to"});
  args = paged_args();
  args.num_pages = 0;
  expect_error(args, StatusCode::kInvalidArgument, {"num_pages = 0"});
  args = paged_args();
  int rows[2] = {0, 1};
  args.kv_batch_idx = rows;
  args.kv_batch = 2;
  expect_error(args, StatusCode::kNotSupported, {"page_table", "kv_batch_idx"});
  args = paged_args();
  args.dtype = DType::kFloat8E4M3;
  // (A build without the FP8 kernel at this head dim rejects the head dim first.)
  if (compiled_for_fp8(args.shape.head_dim)) {
    expect_error(args, StatusCode::kNotSupported, {"page_table", "float8_e4m3fn"});
  }
  args = valid_args();
  args.page_size = 16;
  expect_error(args, StatusCode::kInvalidArgument, {"page_size = 16", "without page_table"});
}

TEST_F(Validation, LeftpadK) {
  int pads[2] = {3, 0};
  for (ForwardArgs args : {valid_args(), paged_args()}) {
    args.leftpad_k = pads;
    EXPECT_TRUE(validate_forward(args).ok()) << validate_forward(args).message();
    args.leftpad_k = reinterpret_cast<const int*>(reinterpret_cast<const char*>(pads) + 2);
    expect_error(args, StatusCode::kInvalidArgument, {"leftpad_k"});
  }
  ForwardArgs args = valid_args();
  args.leftpad_k = pads;
  args.dtype = DType::kFloat8E4M3;
  if (compiled_for_fp8(args.shape.head_dim)) {
    expect_error(args, StatusCode::kNotSupported, {"leftpad_k", "float8_e4m3fn"});
  }
}

TEST_F(Validation, ForwardWithFakePointersFailsWithTheReason) {
  Status status = forward(valid_args());
  int devices = 0, major = 0, minor = 0;
  bool any_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (!any_gpu) {
    EXPECT_EQ(status.code(), StatusCode::kCudaError) << status.message();
    const std::string& message = status.message();
    EXPECT_TRUE(message.find("no usable CUDA device") != std::string::npos ||
                message.find("cannot query the device") != std::string::npos)
        << message;
    return;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (major == 9 && minor == 0) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
    EXPECT_NE(status.message().find("q.data = 0x10000 is not device memory"), std::string::npos) << status.message();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kNotSupported) << status.message();
    EXPECT_NE(status.message().find("needs a Hopper GPU"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace warpflash
