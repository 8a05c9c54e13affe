// FP8 block quantization (the FlashAttention-3 paper, section 3.3): one fp32 scale per
// block of rows of each (batch, head), in the layout quantize_fp8 writes. A tensor's
// values are its e4m3 codes times the scale of their block.
#pragma once

#include <cstdint>

#include "kernels/attention/host_device.h"

namespace warpflash::kernels {

// The scales of one (batch, head)'s rows.
struct RowScales {
  float const* data;  // null: every scale is 1
  int block_shift;

  WF_HOST_DEVICE float at(int row) const { return data == nullptr ? 1.f : data[row >> block_shift]; }
};

struct BlockScales {
  float const* data = nullptr;  // contiguous (batch, heads, blocks); null: every scale is 1
  int heads = 0;
  int blocks = 0;  // per (batch, head)
  // Rows per scale = 2^block_shift; 31 for one scale per (batch, head) (rows < 2^31).
  int block_shift = 31;

  // The scale of row `row` of head `head` of batch `batch`.
  WF_HOST_DEVICE float at(int batch, int head, int row) const { return of(batch, head).at(row); }
  WF_HOST_DEVICE RowScales of(int batch, int head) const {
    if (data == nullptr) return RowScales{nullptr, block_shift};
    return RowScales{data + (int64_t(batch) * heads + head) * blocks, block_shift};
  }
};

// The BlockScales of a tensor of `seqlen` rows with `block_rows` rows per scale (0: one
// per (batch, head); otherwise a power of two).
inline BlockScales make_block_scales(float const* data, int64_t heads, int64_t seqlen, int64_t block_rows) {
  BlockScales scales;
  scales.data = data;
  scales.heads = static_cast<int>(heads);
  if (block_rows == 0) {
    scales.blocks = 1;
    return scales;
  }
  scales.blocks = static_cast<int>((seqlen + block_rows - 1) / block_rows);
  scales.block_shift = 0;
  while ((int64_t(1) << scales.block_shift) < block_rows) ++scales.block_shift;
  return scales;
}

}  // namespace warpflash::kernels
