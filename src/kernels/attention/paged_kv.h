// Paged KV caches (vLLM's block tables, FlashAttention's page_table): K and V live in
// pages of page_size rows, (num_pages, page_size, heads_kv, head_dim), and key j of
// sequence b is row j % page_size of page page_table[b][j / page_size]. The producer
// thread loads a K/V block as runs of `run_rows` = gcd(page_size, block_n) rows, each
// inside one page, with TMA from a tensor map of its own over (atom columns, page_size,
// atoms, heads_kv, num_pages): where a run is the whole block (pages that are multiples
// of block_n) one box covers all of its atoms, as the contiguous loads do (PagedKv::
// whole_blocks); otherwise one box per atom. With page sizes that are multiples of 8 a run is whole 8-row swizzle
// atoms; smaller runs land inside an atom (TMA swizzles by the shared-memory address, as
// the WGMMA reads it).
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
  cute::TmaDescriptor tma_k;  // boxes of (atom columns, run_rows, atoms or 1, 1, 1)
  cute::TmaDescriptor tma_v;
  int const* page_table = nullptr;  // null: K and V are not paged
  int table_batch_stride = 0;  // batch * stride + max_pages < 2^31 (validated)
  int page_size = 0;
  int run_rows = 0;
  int num_pages = 0;

  CUTE_HOST_DEVICE bool active() const { return page_table != nullptr; }
  // Whether a K/V block is loaded with one box for all its atoms (the maps' boxes then
  // span them): where the run is the whole block and rows have at most two atoms.
  static constexpr bool whole_blocks_allowed(int atoms_k, int atoms_v) { return atoms_k <= 2 && atoms_v <= 2; }
  CUTE_HOST_DEVICE bool whole_blocks(int atoms_k, int atoms_v, int block_n) const {
    return whole_blocks_allowed(atoms_k, atoms_v) && run_rows == block_n;
  }

  // Issues the loads of one (block_n, dim) K or V block into `stage` (its tile of the
  // swizzled ring), completing on `barrier`: keys first_key .. first_key + block_n - 1 of
  // (batch, kv_head), of which those from the sequence's `keys`-th on are past its end:
  // their runs read page num_pages, outside the map, which TMA fills with zeros (the
  // barrier still counts the full boxes), so the table is never read past the sequence's
  // pages. (K and V each in their own call, each after its own slot is free: waiting for
  // V's slot before loading K cost decode 25%.) kAtoms of kAtomColumns columns a row.
  template <int kBlockN, int kAtoms, int kAtomColumns, bool kWholeBlocks, class Stage>
  CUTE_DEVICE void load_block(cute::TmaDescriptor const& tma, uint64_t& barrier, Stage stage, int batch, int kv_head,
                              int first_key, int keys) const {
    int slot = batch * table_batch_stride + first_key / page_size, row = first_key % page_size;
    // The block in one page: one box for all its atoms (not for d=256's four atoms a row:
    // the branch spilled its producer's registers; whole_blocks() says where).
    if (kWholeBlocks && run_rows == kBlockN) {
      cute::SM90_TMA_LOAD_5D::copy(&tma, &barrier, kCacheHint, &stage(0, 0), 0, row, 0, kv_head,
                                   keys > 0 ? page_table[slot] : num_pages);
      return;
    }
#pragma unroll 1
    for (int run = 0; run < kBlockN; run += run_rows) {
      int page = run < keys ? page_table[slot] : num_pages;
      // The run's first row unswizzled (TMA swizzles by address): atoms of 8 rows stack
      // along the rows, each row kAtomColumns elements. Unrolled up to two atoms: d=256's
      // four, unrolled, spilled its producer's registers.
#pragma unroll(kAtoms <= 2 ? kAtoms : 1)
      for (int atom = 0; atom < kAtoms; ++atom) {
        cute::SM90_TMA_LOAD_5D::copy(&tma, &barrier, kCacheHint, &stage(0, atom * kAtomColumns) + run * kAtomColumns,
                                     0, row, atom, kv_head, page);
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

// The tensor map of a paged K or V (view: (num_pages, page_size, heads_kv, dim)) over
// (atom_columns, page_size, dim / atom_columns, heads, num_pages), with the swizzle of
// shared-memory atoms atom_columns elements wide, for boxes of atom_columns x run_rows x
// (all atoms with whole_blocks, else one).
inline Status make_paged_tma(cute::TmaDescriptor& map, TensorView4d const& view, CUtensorMapDataType type,
                             int element_bytes, int dim, int64_t page_size, int64_t heads, int64_t num_pages,
                             int atom_columns, int run_rows, bool whole_blocks) {
  int atoms = dim / atom_columns;
  cuuint64_t sizes[5] = {cuuint64_t(atom_columns), cuuint64_t(page_size), cuuint64_t(atoms), cuuint64_t(heads),
                         cuuint64_t(num_pages)};
  cuuint64_t strides[4] = {cuuint64_t(view.seqlen_stride * element_bytes), cuuint64_t(atom_columns * element_bytes),
                           cuuint64_t(view.head_stride * element_bytes), cuuint64_t(view.batch_stride * element_bytes)};
  cuuint32_t box[5] = {cuuint32_t(atom_columns), cuuint32_t(run_rows), cuuint32_t(whole_blocks ? atoms : 1), 1, 1};
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  int atom_bytes = atom_columns * element_bytes;
  CUtensorMapSwizzle swizzle = atom_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : atom_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_32B;
  CUresult result = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      &map, type, 5, view.data, sizes, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
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
