// backward()'s validation and workspace, without a GPU: every rejection names the
// argument, the value and what is allowed; the workspace's padded rows never overlap.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/seqlen.h"
#include "kernels/backward/workspace.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

void* fake_pointer(uintptr_t address = 0x10000) { return reinterpret_cast<void*>(address); }

BackwardArgs valid_args() {
  BackwardArgs args;
  ForwardArgs& f = args.forward;
  int64_t d = compiled_head_dims(DType::kBFloat16).at(0);
  f.dtype = DType::kBFloat16;
  f.shape = {2, 100, 120, 8, 2, d};
  f.q = contiguous_view(fake_pointer(), 100, 8, d);
  f.k = contiguous_view(fake_pointer(), 120, 2, d);
  f.v = contiguous_view(fake_pointer(), 120, 2, d);
  f.o = contiguous_view(fake_pointer(), 100, 8, d);
  f.lse = static_cast<float*>(fake_pointer());
  args.d_o = f.o;
  args.d_q = f.q;
  args.d_k = f.k;
  args.d_v = f.v;
  args.workspace = fake_pointer(0x100000);
  args.workspace_bytes = backward_workspace_bytes(args);
  return args;
}

void expect_error(const BackwardArgs& args, StatusCode code, const std::vector<std::string>& fragments) {
  Status status = validate_backward(args);
  EXPECT_EQ(status.code(), code) << status.message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message '" << status.message() << "' lacks '" << fragment << "'";
  }
}

// The tests validate BF16 problems: a build without BF16 kernels (WARPFLASH_DTYPES) skips
// them.
class BackwardValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (compiled_head_dims(DType::kBFloat16).empty()) GTEST_SKIP() << "no bf16 kernels in this build (WARPFLASH_DTYPES)";
  }
};

TEST_F(BackwardValidation, AcceptsValidArguments) {
  BackwardArgs args = valid_args();
  EXPECT_GT(args.workspace_bytes, 0u);
  EXPECT_TRUE(validate_backward(args).ok()) << validate_backward(args).message();
}

TEST_F(BackwardValidation, ForwardErrorsNameTheForwardArgument) {
  BackwardArgs args = valid_args();
  args.forward.shape.batch = -1;
  expect_error(args, StatusCode::kInvalidArgument, {"warpflash::backward: in forward: shape.batch = -1"});
  EXPECT_EQ(backward_workspace_bytes(args), 0u);
}

TEST_F(BackwardValidation, RefusesKvCacheIndices) {
  int indices[2] = {0, 1};
  BackwardArgs args = valid_args();
  args.forward.kv_batch_idx = indices;
  args.forward.kv_batch = 2;
  expect_error(args, StatusCode::kNotSupported, {"forward.kv_batch_idx is not supported"});
  args = valid_args();
  args.forward.leftpad_k = indices;
  expect_error(args, StatusCode::kNotSupported, {"forward.leftpad_k is not supported"});
  args = valid_args();
  args.forward.page_table = indices;
  args.forward.page_table_batch_stride = 1;
  args.forward.max_pages = 1;
  args.forward.num_pages = 2;
  args.forward.page_size = 120;
  args.forward.k.batch_stride = args.forward.v.batch_stride = 120 * args.forward.k.seqlen_stride;
  expect_error(args, StatusCode::kNotSupported, {"forward.page_table is not supported"});
}

TEST_F(BackwardValidation, GradientsAndLse) {
  for (auto member : {&BackwardArgs::d_o, &BackwardArgs::d_q, &BackwardArgs::d_k, &BackwardArgs::d_v}) {
    BackwardArgs args = valid_args();
    (args.*member).data = nullptr;
    expect_error(args, StatusCode::kInvalidArgument, {"warpflash::backward: d_", ".data is null"});
  }
  BackwardArgs args = valid_args();
  args.d_q.seqlen_stride = 7;
  expect_error(args, StatusCode::kInvalidArgument, {"d_q.seqlen_stride = 7"});
  args = valid_args();
  args.forward.lse = nullptr;
  expect_error(args, StatusCode::kInvalidArgument, {"forward.lse is null"});
}

TEST_F(BackwardValidation, SinksAndTheirGradientGoTogether) {
  BackwardArgs args = valid_args();
  args.forward.learnable_sink = static_cast<float*>(fake_pointer());
  expect_error(args, StatusCode::kInvalidArgument, {"d_sink is null"});
  args = valid_args();
  args.d_sink = static_cast<float*>(fake_pointer());
  expect_error(args, StatusCode::kInvalidArgument, {"d_sink is set but forward.learnable_sink is null"});
}

TEST_F(BackwardValidation, Workspace) {
  BackwardArgs args = valid_args();
  size_t needed = args.workspace_bytes;
  args.workspace_bytes = needed - 1;
  expect_error(args, StatusCode::kInvalidArgument, {"needs " + std::to_string(needed) + " bytes"});
  args = valid_args();
  args.workspace = nullptr;
  expect_error(args, StatusCode::kInvalidArgument, {"workspace = 0x0", "backward_workspace_bytes()"});
  args = valid_args();
  args.workspace = fake_pointer(0x100008);
  expect_error(args, StatusCode::kInvalidArgument, {"16-byte aligned"});
}

TEST_F(BackwardValidation, EmptyProblemsNeedNothing) {
  BackwardArgs args = valid_args();
  args.forward.shape.batch = 0;
  args.workspace = nullptr;
  args.workspace_bytes = 0;
  EXPECT_TRUE(validate_backward(args).ok()) << validate_backward(args).message();
  EXPECT_EQ(backward_workspace_bytes(args), 0u);
}

// Each sequence's padded tiles start at a multiple of block_m, lie inside the workspace's
// rows and never overlap the next sequence's, for packed batches with empty sequences and
// lengths around the tile size, and for dense ones.
TEST(BackwardWorkspace, PaddedRowsAreAlignedAndDisjoint) {
  for (int block_m : {64, 80, 128}) {
    for (std::vector<int> lengths : {std::vector<int>{0, 1, 63, 64, 65, 0, 200}, std::vector<int>{1000},
                                     std::vector<int>{0, 0, 0}, std::vector<int>{127, 129, 128, 1, 5000}}) {
      std::vector<int> cu(1, 0);
      for (int n : lengths) cu.push_back(cu.back() + n);
      int batch = static_cast<int>(lengths.size());
      int longest = *std::max_element(lengths.begin(), lengths.end());
      kernels::SequenceLengths seq{cu.data(), nullptr, longest, cu.back()};
      kernels::BackwardWorkspace w = kernels::BackwardWorkspace::plan(batch, longest, true, cu.back(), 4, 128, block_m);
      int64_t end_of_previous = 0;
      for (int b = 0; b < batch; ++b) {
        int64_t first = w.first_row(seq, b);
        EXPECT_EQ(first % block_m, 0) << block_m << " sequence " << b;
        EXPECT_GE(first, end_of_previous) << block_m << " sequence " << b;
        end_of_previous = first + kernels::BackwardWorkspace::round_up(lengths[b], block_m);
        EXPECT_LE(end_of_previous, w.padded_rows) << block_m << " sequence " << b;
      }
      EXPECT_EQ(w.padded_rows % block_m, 0);
      for (size_t offset : {w.dpsum, w.lse_log2, w.dq_accum, w.dq_semaphore, w.sink_partials, w.bytes}) {
        EXPECT_EQ(offset % 16, 0u);
      }
      EXPECT_EQ(w.lse_log2 - w.dpsum, (size_t(4 * w.padded_rows * 4) + 15) / 16 * 16);
      EXPECT_GE(w.dq_semaphore - w.dq_accum, size_t(4 * w.padded_rows * 128 * 4));
      const size_t tiles = size_t(4 * w.padded_rows / block_m);  // one int / one float each
      EXPECT_GE(w.sink_partials - w.dq_semaphore, tiles * sizeof(int));
      EXPECT_GE(w.bytes - w.sink_partials, tiles * sizeof(float));
    }
    kernels::SequenceLengths dense{nullptr, nullptr, 100, 0};
    kernels::BackwardWorkspace w = kernels::BackwardWorkspace::plan(3, 100, false, 0, 8, 64, block_m);
    EXPECT_EQ(w.first_row(dense, 2), 2 * kernels::BackwardWorkspace::round_up(100, block_m));
    EXPECT_EQ(w.padded_rows, 3 * kernels::BackwardWorkspace::round_up(100, block_m));
  }
}

}  // namespace
}  // namespace warpflash
