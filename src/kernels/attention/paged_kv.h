// Paged KV caches (vLLM's block tables, FlashAttention's page_table): K and V live in
// pages of page_size rows, (num_pages, page_size, heads_kv, head_dim), and key j of
// sequence b is row j % page_size of page page_table[b][j / page_size]. The producer
// thread loads a K/V block as runs of `run_rows` = gcd(page_size, block_n) rows, each
// inside one page, with TMA from a tensor map of its own over (atom columns, page_size,
// atoms, heads_kv, num_pages): where a run is the whole block (pages that are multiples
// of block_n) one box covers all of its atoms, as the contiguous loads do (PagedKv::
// whole_blocks); otherwise one box per atom.
// Runs shorter than kGatherBelowRows (page sizes that are not multiples of 64, page size 1)
// would take a box per run and atom from one thread (page 1: 512 a block; a TMA
// instruction takes uniform registers, so a warp's lanes cannot issue theirs in
// parallel). There the producer warpgroup's four warps gather the block with 16-byte
// cp.async instead, each a quarter of its rows (find_rows, copy_rows): the first warp
// walks the tiles and posts each block (GatherJob) to the others. Decode over such pages
// takes about 1.1x the contiguous cache's time whatever the page size; the boxes take
// 1.0x at 64 rows and more (docs/perf-notes.md).
#pragma once

#include <numeric>
#include <string>
#include <type_traits>

#include <cuda.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cuda_host_adapter.hpp>

#include "kernels/attention/fast_divmod.h"
#include "warpflash/status.h"
#include "warpflash/tensor.h"

namespace warpflash::kernels {

// The gather's layout (PagedKv::copy_rows): the kGatherWarps producer warps each copy kRows
// of a block's rows (warp w rows w * kRows on, a whole number of swizzle atoms' 8 rows,
// so each warp's rows see the swizzle of the block's first). Each copy instruction moves
// one 128-byte atom row of 4 rows (8 lanes a row, 16 bytes a lane), so lane l copies the
// warp's rows l / 8 + 4 i, chunk l % 8 of each of their kAtoms atoms. The offsets of a
// lane's rows lie one after another in shared memory (entry(r)).
constexpr int kGatherWarps = 4;  // the producer warpgroup's
template <int kBlockN, int kDim, class Element>
struct GatherRows {
  static constexpr int kRows = kBlockN / kGatherWarps;
  static_assert(kRows * kGatherWarps == kBlockN && kRows % 8 == 0 && kRows <= 32,
                "a warp's rows: whole atoms, a lane each");
  static constexpr int kAtoms = kDim * int(sizeof(Element)) / 128;
  static_assert(kAtoms * 128 == kDim * int(sizeof(Element)), "rows of whole 128-byte atoms");
  static constexpr int kRowsPerLane = kRows / 4;
  CUTE_HOST_DEVICE static constexpr int entry(int row) { return row % 4 * kRowsPerLane + row / 4; }
};

// A K/V block the first producer warp posts to the others (ForwardLoads::gather_block):
// rows first_key .. of (batch, kv_head)'s pages (a left padding's rows on), of which
// `keys` are the sequence's. A negative batch ends the loop.
struct alignas(16) GatherJob {
  int batch, kv_head, first_key, keys;
};

struct PagedKv {
  // A paged K or V for the gather: its first element and strides, in bytes (16-byte
  // multiples, as TMA needs them too; row offsets in 64 bits: caches may exceed 4 GB).
  struct Rows {
    char const* data = nullptr;
    int64_t page_stride = 0, row_stride = 0, head_stride = 0;
  };
  static constexpr int kGatherBelowRows = 64;

  cute::TmaDescriptor tma_k;  // boxes of (atom columns, run_rows, atoms or 1, 1, 1)
  cute::TmaDescriptor tma_v;
  Rows rows_k, rows_v;
  int const* page_table = nullptr;  // null: K and V are not paged
  int table_batch_stride = 0;  // batch * stride + max_pages < 2^31 (validated)
  int page_size = 0;
  int run_rows = 0;
  int num_pages = 0;
  FastDivmod by_page_size;
  bool gather = false;  // runs of fewer than kGatherBelowRows rows: find_rows and copy_rows, not TMA
  bool v_rows_of_k = false;  // V's strides are K's: its rows lie at K's offsets (gather)

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

  // The gather, in two parts by each producer warp, for its rows of a block as load_block's
  // (first_key and keys counted from the warp's first row). find_rows: lane l finds where
  // the warp's key l lies (page from the table, row in the page) and stores its byte offset
  // from the cache's start at `rows` (the warp's kRows int64 in shared memory). V reuses
  // K's offsets where their strides agree.
  template <int kBlockN, int kDim, class Element>
  CUTE_DEVICE void find_rows(Rows const& cache, uint32_t rows, int batch, int kv_head, int first_key, int keys) const {
    using Layout = GatherRows<kBlockN, kDim, Element>;
    int row = lane_id();
    if (row < Layout::kRows) {
      unsigned in_page;
      unsigned page_index = by_page_size.divmod(unsigned(first_key + row), in_page);
      int64_t offset = kv_head * cache.head_stride;
      if (row < keys) {
        offset += page_table[batch * table_batch_stride + page_index] * cache.page_stride + in_page * cache.row_stride;
      }
      asm volatile("st.shared.s64 [%0], %1;" ::"r"(rows + Layout::entry(row) * 8), "l"(offset) : "memory");
    }
    __syncwarp();
  }

  // copy_rows: 16-byte cp.async of the rows find_rows found into the swizzled tile, the
  // warp's first row at shared-memory address `stage` (GatherRows: lane l copies rows
  // l / 8 + 4 i). Rows past the keys read zeros (src-size 0). The barrier completes once
  // every lane's copies have landed (cp.async.mbarrier.arrive, counted on top of the
  // barrier's one arrival, which the first warp's lane 0 makes once every producer warp
  // has issued its copies: the others arrive at the named barrier `issued`, the first
  // waits there); the consumers fence the generic-proxy writes before their WGMMAs read
  // them. A lane's row costs a shared load, a 64-bit add and a compare, then one copy per
  // atom whose addresses are registers plus immediates (instructions per copy set the
  // pace; with a shuffle per copy for its row's address, decode over 1-row pages took
  // 831 us with one warp, 608 without).
  template <int kBlockN, int kDim, class Element>
  CUTE_DEVICE void copy_rows(Rows const& cache, uint32_t rows, uint64_t& barrier, uint32_t stage, int keys,
                            uint32_t issued, bool first_warp) const {
    using Layout = GatherRows<kBlockN, kDim, Element>;
    int lane = lane_id();
    int chunk = lane % 8, sub = lane / 8;
    // Tile layout (gather_layout_matches): atom a of row r at a * kBlockN * 128 + r * 128,
    // chunk c at (c ^ (r % 8)) * 16 in it (the 128-byte swizzle). r % 8 = sub + 4 (i % 2)
    // (the warp's first row a multiple of 8): two destinations, the rest immediates.
    uint32_t to_even = stage + sub * 128 + ((chunk ^ sub) * 16);
    uint32_t to_odd = stage + sub * 128 + ((chunk ^ (sub + 4)) * 16);
    uint32_t lane_rows = rows + Layout::entry(sub) * 8;
    char const* from = cache.data + chunk * 16;
    int rows_left = keys - sub;  // row sub + 4 i is a key while 4 i is below this
    CUTE_UNROLL
    for (int i = 0; i < Layout::kRowsPerLane; ++i) {
      int64_t offset;
      asm volatile("ld.shared.s64 %0, [%1];" : "=l"(offset) : "r"(lane_rows + i * 8));
      char const* source = from + offset;
      uint32_t size = 4 * i < rows_left ? 16 : 0;
      CUTE_UNROLL
      for (int atom = 0; atom < Layout::kAtoms; ++atom) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((i % 2 == 0 ? to_even : to_odd) +
                                                                          (4 * i * 128 + atom * kBlockN * 128)),
                     "l"(source + atom * 128), "r"(size)
                     : "memory");
      }
    }
    uint32_t full = cute::cast_smem_ptr_to_uint(&barrier);
    asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(full) : "memory");
    __syncwarp();  // every lane has read `rows` before the next block's rows replace them
    constexpr int kThreads = kGatherWarps * 32;
    if (first_warp) {
      cutlass::arch::NamedBarrier::sync(kThreads, issued);
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(full) : "memory");
    } else {
      cutlass::arch::NamedBarrier::arrive(kThreads, issued);
    }
  }

  // The lane, read where used (volatile): ptxas would otherwise hoist the lane's addresses
  // out of the producer's tile loop and spill them.
  CUTE_DEVICE static int lane_id() {
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
  }
};

// Whether a K/V tile layout (rows, columns, stages) of 16-bit elements puts chunk c (16 bytes)
// of row r where PagedKv::copy_rows writes it: unswizzled at (c / 8) * kRows * 128 +
// r * 128 + (c % 8) * 16, with the 128-byte swizzle on the shared-memory address (bits 4-6
// xor bits 7-9: chunk c % 8 xor r % 8, stages 1024-byte aligned). Checked on the first 16
// rows and the last.
template <class Layout, int kRows, int kDim>
constexpr bool gather_layout_matches() {
  if (!std::is_same_v<decltype(cute::get_swizzle_portion(Layout{})), cute::Swizzle<3, 4, 3>>) return false;
  auto unswizzled = cute::get_nonswizzle_portion(Layout{});
  for (int row = 0; row < kRows; row = row == 15 ? kRows - 1 : row + 1) {
    for (int chunk = 0; chunk < kDim / 8; ++chunk) {
      if (int(unswizzled(row, chunk * 8, 0)) * 2 != (chunk / 8) * kRows * 128 + row * 128 + (chunk % 8) * 16) {
        return false;
      }
    }
  }
  return true;
}

// The tensor map of a paged K or V (view: (num_pages, page_size, heads_kv, dim)) over
// (atom_columns, page_size, dim / atom_columns, heads, num_pages), with the swizzle of
// shared-memory atoms atom_columns elements wide, for boxes of atom_columns x run_rows x
// (all atoms with whole_blocks, else one). L2 promotion of 128 bytes, as CuTe's maps of the
// contiguous cache: with 256 the loads asked L2 for 25% more sectors (ncu; decode over
// pages of 64 and 256 rows took 1.07x the contiguous cache's time, now 1.00x).
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
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return Status::CudaError("warpflash::forward: cuTensorMapEncodeTiled (paged K/V) failed with CUresult " +
                             std::to_string(int(result)));
  }
  return Status::Ok();
}

// Rows per run: the largest count that divides both the page and the block.
inline int paged_run_rows(int64_t page_size, int block_n) { return int(std::gcd(page_size, int64_t(block_n))); }

}  // namespace warpflash::kernels
