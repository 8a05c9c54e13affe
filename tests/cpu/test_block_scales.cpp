// FP8 block scales as the kernels index them (kernels/attention/block_scales.h) agree with
// quantize_fp8's layout: (batch, heads, ceil(seqlen / block_rows)), one per (batch, head)
// for block_rows 0.
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/block_scales.h"
#include "warpflash/quantize.h"

namespace warpflash::kernels {
namespace {

TEST(BlockScales, EveryRowReadsTheScaleOfItsBlockInQuantizeFp8sLayout) {
  const int64_t batch = 2, heads = 3;
  for (int64_t block_rows : {0, 64, 128}) {
    for (int64_t seqlen : {1, 63, 64, 65, 1000}) {
      SCOPED_TRACE(::testing::Message() << "block_rows " << block_rows << ", seqlen " << seqlen);
      const int64_t blocks = quantize_fp8_num_blocks(seqlen, block_rows);
      std::vector<float> data(batch * heads * blocks);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
      BlockScales scales = make_block_scales(data.data(), heads, seqlen, block_rows);
      EXPECT_EQ(scales.blocks, blocks);
      for (int b = 0; b < batch; ++b) {
        for (int h = 0; h < heads; ++h) {
          for (int row = 0; row < seqlen; ++row) {
            int64_t block = block_rows == 0 ? 0 : row / block_rows;
            ASSERT_EQ(scales.at(b, h, row), data[(b * heads + h) * blocks + block]) << "row " << row;
          }
        }
      }
    }
  }
}

TEST(BlockScales, WithoutDataEveryScaleIsOne) {
  BlockScales scales = make_block_scales(nullptr, 4, 1000, 128);
  EXPECT_EQ(scales.at(1, 3, 999), 1.f);
  EXPECT_EQ(scales.of(0, 0).at(5), 1.f);
}

}  // namespace
}  // namespace warpflash::kernels
