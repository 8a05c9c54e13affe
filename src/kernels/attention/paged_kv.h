// Paged KV caches (vLLM's block tables, FlashAttention's page_table): K and V live in
// pages of page_size rows, (num_pages, page_size, heads_kv, head_dim), and key j of
// sequence b is row j % page_size of page page_table[b][j / page_size]. The producer
// thread loads a K/V block as runs of `run_rows` = gcd(page_size, block_n) rows, each
// inside one page, with a TMA box of that many rows from a tensor map of its own over
// (head_dim, page_size, heads_kv, num_pages). With page sizes that are multiples of 8 a
// run is whole 8-row swizzle atoms; smaller runs land inside an atom (TMA swizzles by
// the shared-memory address, as the WGMMA reads it).
#pragma once

#include <numeric>
#include <string>

#include <cuda.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/cuda_host_adapter.hpp>

#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash::kernels {

struct PagedKv {
  cute::TmaDescriptor tma_k;  // boxes of (swizzle atom columns, run_rows, 1, 1)
  cute::TmaDescriptor tma_v;
  int const* page_table = nullptr;  // null: K and V are not paged
  int table_batch_stride = 0;  // batch * stride + max_pages < 2^31 (validated)
  int page_size = 0;
  int run_rows = 0;
  int num_pages = 0;

  CUTE_HOST_DEVICE bool active() const { return page_table != nullptr; }

  // Issues the loads of one K/V block (block_n keys) into the stages sK and sV (the
  // (block_n, dim) tiles of the swizzled rings), completing on barrier_k and barrier_v:
  // keys first_key .. first_key + block_n - 1 of (batch, kv_head), of which those from
  // key_end on are past the sequence: their runs read page num_pages, outside the map,
  // which TMA fills with zeros (the barriers still count the full boxes), so the table is
  // never read past the sequence's pages. One table lookup per run serves K and V.
  template <int kBlockN, int kDimK, int kDimV, int kAtomColumnsK, int kAtomColumnsV, class StageK, class StageV>
  CUTE_DEVICE void load_block(uint64_t& barrier_k, uint64_t& barrier_v, StageK sK, StageV sV, int batch, int kv_head,
                              int first_key, int key_end) const {
    int slot = batch * table_batch_stride + first_key / page_size, row = first_key % page_size;
    int keys = key_end - first_key;
#pragma unroll 1
    for (int run = 0; run < kBlockN; run += run_rows) {
      int page = run < keys ? page_table[slot] : num_pages;
      // The run's first row unswizzled (TMA swizzles by address): atoms of 8 rows stack
      // along the rows, each row kAtomColumns elements.
      // Unrolled up to two atoms: d=256's four, unrolled, spilled its producer's registers.
#pragma unroll(kDimK / kAtomColumnsK <= 2 ? kDimK / kAtomColumnsK : 1)
      for (int column = 0; column < kDimK; column += kAtomColumnsK) {
        cute::SM90_TMA_LOAD_4D::copy(&tma_k, &barrier_k, kCacheHint, &sK(0, column) + run * kAtomColumnsK, column, row,
                                     kv_head, page);
      }
#pragma unroll(kDimV / kAtomColumnsV <= 2 ? kDimV / kAtomColumnsV : 1)
      for (int column = 0; column < kDimV; column += kAtomColumnsV) {
        cute::SM90_TMA_LOAD_4D::copy(&tma_v, &barrier_v, kCacheHint, &sV(0, column) + run * kAtomColumnsV, column, row,
                                     kv_head, page);
      }
      row += run_rows;
      if (row == page_size) {
        row = 0;
        ++slot;
      }
    }
  }
  static constexpr uint64_t kCacheHint = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);
};

// The tensor map of a paged K or V (view: (num_pages, page_size, heads_kv, dim)) for
// boxes of atom_columns x run_rows with the swizzle of shared-memory atoms atom_columns
// elements wide.
inline Status make_paged_tma(cute::TmaDescriptor& map, TensorView4d const& view, CUtensorMapDataType type,
                             int element_bytes, int dim, int64_t page_size, int64_t heads, int64_t num_pages,
                             int atom_columns, int run_rows) {
  cuuint64_t sizes[4] = {cuuint64_t(dim), cuuint64_t(page_size), cuuint64_t(heads), cuuint64_t(num_pages)};
  cuuint64_t strides[3] = {cuuint64_t(view.seqlen_stride * element_bytes), cuuint64_t(view.head_stride * element_bytes),
                           cuuint64_t(view.batch_stride * element_bytes)};
  cuuint32_t box[4] = {cuuint32_t(atom_columns), cuuint32_t(run_rows), 1, 1};
  cuuint32_t element_strides[4] = {1, 1, 1, 1};
  int atom_bytes = atom_columns * element_bytes;
  CUtensorMapSwizzle swizzle = atom_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : atom_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_32B;
  CUresult result = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      &map, type, 4, view.data, sizes, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return Status::CudaError("warpflash::forward: cuTensorMapEncodeTiled (paged K/V) failed with CUresult " +
                             std::to_string(int(result)));
  }
  return Status::Ok();
}

// Rows per run: the largest count that divides both the page and the block.
inline int paged_run_rows(int64_t page_size, int block_n) { return int(std::gcd(page_size, int64_t(block_n))); }

}  // namespace warpflash::kernels
