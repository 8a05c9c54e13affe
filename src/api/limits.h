// Limits that keep every index the kernels compute inside its type.
#pragma once

#include <cstdint>

namespace warpflash::limits {

// Token positions and tile arithmetic (row + seqlen_k - seqlen_q, tile ends) run in
// 32-bit integers on the GPU; 2^30 leaves room for a tile past the end.
constexpr int64_t kMaxSeqlen = int64_t(1) << 30;
constexpr int64_t kMaxHeads = int64_t(1) << 30;
constexpr int64_t kMaxBatch = int64_t(1) << 30;
// Page ids and a page table's row stride: int32 on the GPU.
constexpr int64_t kMaxPages = int64_t(1) << 30;
// One CTA per (m_block, head, batch) tile: the grid's x dimension.
constexpr int64_t kMaxTiles = (int64_t(1) << 31) - 1;
// TMA: global addresses and strides are multiples of 16 bytes, strides below 2^40 bytes.
constexpr int64_t kTmaAlignmentBytes = 16;
constexpr int64_t kTmaMaxStrideBytes = int64_t(1) << 40;

}  // namespace warpflash::limits
