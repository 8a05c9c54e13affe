// FP8's in-kernel transpose of V (the FlashAttention-3 paper, section 3.3): the FP8 WGMMA
// reads both operands K-major, so for O += P V the keys of V must be contiguous. TMA
// loads V as it lies in memory (keys by rows); two or three warps of the producer warpgroup copy
// each block into a V^T buffer (head_dim rows of block_n keys) while the consumers compute,
// without another pass over global memory.
//
// The keys of every 16 are stored permuted: V^T column 4 t + u (t, u < 4) holds key
// 2 t + u for u < 2 and 8 + 2 t + (u - 2) otherwise. That is the order in which a
// thread's S accumulator holds its columns (pairs at 8 i + 2 t), so P enters the FP8
// A operand without moving values between threads (accumulator_in_fp8_a_order,
// fragment.h).
#pragma once

#include <utility>

#include <cute/tensor.hpp>

namespace warpflash::kernels {

using namespace cute;

// The byte offset of (row, byte column) in a tile of kRows rows of kRowBytes bytes laid out
// as tile_to_shape(SmemAtomOfRow<e4m3, kRowBytes>, (kRows, kRowBytes)) (traits.h): swizzle
// atoms of 128-, 64- or 32-byte rows, stacked along the rows first, whose swizzle XORs the
// 16-byte chunk index with offset bits 7 and up (CuTe's Swizzle<B, 4, 3>). Both the
// linear offset and the swizzle are linear over GF(2), so for a (row, column) split into
// two parts of disjoint bits that do not carry into each other, the offset of the sum is
// the XOR of the parts' offsets. Outside the chunk bits 4-6 the parts' offsets keep their
// linear bits, which are disjoint, so there the XOR is an addition: the transpose below
// computes each thread's part once a block and reaches a unit with one XOR of its
// compile-time chunk bits and an immediate offset (unit_address).
template <int kRows, int kRowBytes>
CUTE_HOST_DEVICE constexpr int swizzled_byte_offset(int row, int column) {
  constexpr int kAtomWidth = kRowBytes % 128 == 0 ? 128 : kRowBytes % 64 == 0 ? 64 : 32;
  int linear = column / kAtomWidth * (kRows * kAtomWidth) + row * kAtomWidth + column % kAtomWidth;
  return linear ^ ((linear >> 7 & (kAtomWidth / 16 - 1)) << 4);
}

// The address of a unit at compile-time offset kUnit from base, the thread's part's address
// (a buffer aligned to 128 bytes plus the thread's swizzled offset).
template <int kUnit>
CUTE_DEVICE uint32_t unit_address(uint32_t base) {
  return (base ^ uint32_t(kUnit & 0x70)) + uint32_t(kUnit & ~0x70);
}

template <class Traits>
struct TransposeV {
  using Element = typename Traits::Element;
  static_assert(sizeof(Element) == 1, "the byte permutes below move e4m3 values");
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDimV = Traits::kHeadDimV;
  static constexpr int kWarps = Traits::kTransposeThreads / 32;
  // A warp moves units of 16 keys x 32 columns with one ldmatrix.trans and one stmatrix
  // of four 8 x 8 16-bit matrices each: ldmatrix.trans gives a thread two neighbouring
  // keys of two neighbouring columns (16-bit pairs of bytes), keys k, k + 1 of the first
  // 8 keys and k + 8, k + 9 of the next 8 in two registers, and two byte permutes make of
  // them the permuted 4-key words of both columns' V^T rows (keys 2 t, 2 t + 1, 2 t + 8,
  // 2 t + 9 at V^T column 4 t). Each warp takes a contiguous run of the block's 16-key
  // groups (a power of two of them, so that its first key's bits stay apart from those of
  // the groups it walks) and every 32-column unit of each.
  static constexpr int kKeyGroups = kBlockN / 16;
  static constexpr int kColumnUnits = kHeadDimV / 32;
  static constexpr int kGroupsPerWarp = kKeyGroups / kWarps;
  static_assert(kBlockN % 16 == 0 && kHeadDimV % 32 == 0, "whole units");
  static_assert(kKeyGroups % kWarps == 0 && (kGroupsPerWarp & (kGroupsPerWarp - 1)) == 0,
                "each warp a power-of-two run of key groups");
  // swizzled_byte_offset against the layouts the TMA writes V in and the WGMMAs read V^T
  // from (traits.h), at every row and 16-byte chunk of a stage.
  template <class Layout, int kRows, int kRowBytes>
  static constexpr bool offsets_match() {
    for (int row = 0; row < kRows; ++row) {
      for (int column = 0; column < kRowBytes; column += 16) {
        if (int(Layout{}(row, column, 0)) != swizzled_byte_offset<kRows, kRowBytes>(row, column)) return false;
      }
    }
    return true;
  }
  static_assert(offsets_match<typename Traits::SmemLayoutV, kBlockN, kHeadDimV>() &&
                    offsets_match<typename Traits::SmemLayoutVt, kHeadDimV, kBlockN>(),
                "swizzled_byte_offset describes V's and V^T's shared-memory layouts");
  // Units whose loads are in flight together (their results in 4 registers each).
  static constexpr int kBatch = 2;
  static_assert(kColumnUnits % kBatch == 0, "whole batches");

  // One block: V stage `v_stage` into V^T stage `vt_stage`, by transposer thread `tid` in
  // [0, kTransposeThreads).
  CUTE_DEVICE static void block(Element const* v, Element* vt, int v_stage, int vt_stage, int tid) {
    int lane = tid % 32;
    int first_key = tid / 32 * kGroupsPerWarp * 16;
    // ldmatrix: lanes 8 i .. 8 i + 7 address the 8 rows (keys) of matrix i: keys 0-7 and
    // 8-15 of the unit's first 16 columns, then of its second 16.
    int load_offset = swizzled_byte_offset<kBlockN, kHeadDimV>(first_key + (lane & 7) + 8 * ((lane >> 3) & 1),
                                                               16 * (lane >> 4));
    // stmatrix: matrix i's rows are V^T rows (columns of V) 2 r + i % 2 + 16 (i / 2).
    int store_offset = swizzled_byte_offset<kHeadDimV, kBlockN>(2 * (lane & 7) + ((lane >> 3) & 1) + 16 * (lane >> 4),
                                                                first_key);
    uint32_t load_base = cute::cast_smem_ptr_to_uint(v) + v_stage * (kBlockN * kHeadDimV) + load_offset;
    uint32_t store_base = cute::cast_smem_ptr_to_uint(vt) + vt_stage * (kBlockN * kHeadDimV) + store_offset;
    for_each_unit(std::make_integer_sequence<int, kGroupsPerWarp * kColumnUnits / kBatch>{}, load_base, store_base);
  }

 private:
  // Batches of kBatch units: their loads in flight together, then their stores.
  template <int... kBatches>
  CUTE_DEVICE static void for_each_unit(std::integer_sequence<int, kBatches...>, uint32_t load_base,
                                        uint32_t store_base) {
    (batch<kBatches>(load_base, store_base), ...);
  }
  template <int kBatchIndex>
  CUTE_DEVICE static void batch(uint32_t load_base, uint32_t store_base) {
    batch_units<kBatchIndex * kBatch / kColumnUnits, kBatchIndex * kBatch % kColumnUnits>(
        std::make_integer_sequence<int, kBatch>{}, load_base, store_base);
  }
  // Units kFirst + u of key group kGroup.
  template <int kGroup, int kFirst, int... u>
  CUTE_DEVICE static void batch_units(std::integer_sequence<int, u...>, uint32_t load_base, uint32_t store_base) {
    uint32_t r[kBatch][4];
    (load_transposed(
         unit_address<swizzled_byte_offset<kBlockN, kHeadDimV>(16 * kGroup, 32 * (kFirst + u))>(load_base), r[u]),
     ...);
    (store_permuted(
         unit_address<swizzled_byte_offset<kHeadDimV, kBlockN>(32 * (kFirst + u), 16 * kGroup)>(store_base), r[u]),
     ...);
  }
  CUTE_DEVICE static void load_transposed(uint32_t address, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
  CUTE_DEVICE static void store_permuted(uint32_t address, uint32_t const (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address),
                 "r"(__byte_perm(r[0], r[1], 0x6420)), "r"(__byte_perm(r[0], r[1], 0x7531)),
                 "r"(__byte_perm(r[2], r[3], 0x6420)), "r"(__byte_perm(r[2], r[3], 0x7531)));
  }
};

}  // namespace warpflash::kernels
