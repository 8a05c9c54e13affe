// The fp32 dQ accumulator's fragment order (kernels/backward/dq_order.h): for every head dim
// a permutation of the query tile, and the WGMMA accumulator's layout where it is known by
// hand (the main kernel's stores and the postprocess both follow it; the GPU backward
// tests check them end to end).
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backward/config.h"
#include "kernels/backward/dq_order.h"

namespace warpflash {
namespace {

using kernels::BackwardDqOrder;

TEST(BackwardDqOrder, IsAPermutationOfTheTile) {
  for (int head_dim : {64, 96, 128, 192, 256}) {
    BackwardDqOrder order = BackwardDqOrder::of(head_dim);
    int block_m = kernels::backward_block_m(head_dim);
    ASSERT_EQ(order.parts() * order.part_floats(), block_m * head_dim) << "head_dim " << head_dim;
    std::vector<int> hits(size_t(block_m) * head_dim, 0);
    for (int vector = 0; vector < block_m * head_dim / 4; ++vector) {
      for (int k = 0; k < 4; ++k) {
        int row = -1, column = -1;
        order.element(vector, k, row, column);
        ASSERT_TRUE(row >= 0 && row < block_m && column >= 0 && column < head_dim)
            << "head_dim " << head_dim << " vector " << vector << " value " << k << ": (" << row << ", " << column
            << ")";
        ++hits[size_t(row) * head_dim + column];
      }
    }
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "head_dim " << head_dim << " element " << i;
  }
}

TEST(BackwardDqOrder, FollowsTheWgmmaAccumulator) {
  int row = 0, column = 0;
  // d = 64: the warpgroups' 64-row halves. Thread 5 (lane 5) of warpgroup 0 holds row 1,
  // columns 2-3, and rows 9 of the same columns; its second vector is 8 columns on.
  BackwardDqOrder d64 = BackwardDqOrder::of(64);
  EXPECT_EQ(d64.split, BackwardDqOrder::Split::kRows);
  d64.element(5, 0, row, column);
  EXPECT_EQ(row, 1);
  EXPECT_EQ(column, 2);
  d64.element(5, 3, row, column);
  EXPECT_EQ(row, 9);
  EXPECT_EQ(column, 3);
  d64.element(128 + 5, 1, row, column);
  EXPECT_EQ(row, 1);
  EXPECT_EQ(column, 11);
  d64.element(64 * 64 / 4 + 32, 0, row, column);  // warpgroup 1, warp 1, lane 0
  EXPECT_EQ(row, 64 + 16);
  EXPECT_EQ(column, 0);
  // d = 128: dQ^T, so a vector's values are two queries (rows) of two head-dim columns.
  BackwardDqOrder d128 = BackwardDqOrder::of(128);
  EXPECT_EQ(d128.split, BackwardDqOrder::Split::kTransposed);
  EXPECT_EQ(d128.gemm_n, 80);
  d128.element(5, 1, row, column);
  EXPECT_EQ(row, 3);
  EXPECT_EQ(column, 1);
  d128.element(64 * 80 / 4 + 5, 2, row, column);  // warpgroup 1: head-dim columns 64 on
  EXPECT_EQ(row, 2);
  EXPECT_EQ(column, 64 + 9);
  // d = 256: the warpgroups' 128-column halves.
  BackwardDqOrder d256 = BackwardDqOrder::of(256);
  EXPECT_EQ(d256.split, BackwardDqOrder::Split::kColumns);
  d256.element(64 * 128 / 4, 0, row, column);
  EXPECT_EQ(row, 0);
  EXPECT_EQ(column, 128);
  // d = 96: one part, both warpgroups add into it.
  EXPECT_EQ(BackwardDqOrder::of(96).split, BackwardDqOrder::Split::kKeys);
  EXPECT_EQ(BackwardDqOrder::of(96).parts(), 1);
}

}  // namespace
}  // namespace warpflash
