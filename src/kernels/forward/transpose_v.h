// FP8's in-kernel transpose of V (the FlashAttention-3 paper, section 3.3): the FP8 WGMMA
// reads both operands K-major, so for O += P V the keys of V must be contiguous. TMA
// loads V as it lies in memory (keys by rows); three warps of the producer warpgroup copy
// each block into a V^T buffer (head_dim rows of block_n keys) while the consumers compute,
// without another pass over global memory.
//
// The keys of every 16 are stored permuted: V^T column 4 t + u (t, u < 4) holds key
// 2 t + u for u < 2 and 8 + 2 t + (u - 2) otherwise. That is the order in which a
// thread's S accumulator holds its columns (pairs at 8 i + 2 t), so P enters the FP8
// A operand without moving values between threads (accumulator_in_fp8_a_order,
// fragment.h).
#pragma once

#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm90.hpp>
#include <cute/tensor.hpp>

namespace warpflash::kernels {

using namespace cute;

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
  // 2 t + 9 at V^T column 4 t).
  static constexpr int kUnitsPerKeys = kHeadDimV / 32;
  static constexpr int kUnits = kBlockN / 16 * kUnitsPerKeys;
  static_assert(kBlockN % 16 == 0 && kHeadDimV % 32 == 0, "whole units");

  // One block: V stage `v_stage` into V^T stage `vt_stage`, by transposer thread `tid` in
  // [0, kTransposeThreads).
  template <class SmemV, class SmemVt>
  CUTE_DEVICE static void block(SmemV const& sV, SmemVt& sVt, int v_stage, int vt_stage, int tid) {
    int warp = tid / 32, lane = tid % 32;
    // ldmatrix: lanes 8 i .. 8 i + 7 address the 8 rows (keys) of matrix i: keys 0-7 and
    // 8-15 of the unit's first 16 columns, then of its second 16.
    int load_key = (lane & 7) + 8 * ((lane >> 3) & 1), load_col = 16 * (lane >> 4);
    // stmatrix: matrix i's rows are V^T rows (columns of V) 2 r + i % 2 + 16 (i / 2).
    int store_row = 2 * (lane & 7) + ((lane >> 3) & 1) + 16 * (lane >> 4);
    CUTLASS_PRAGMA_UNROLL
    for (int unit = warp; unit < kUnits; unit += kWarps) {
      int key0 = 16 * (unit / kUnitsPerKeys), col0 = 32 * (unit % kUnitsPerKeys);
      uint32_t r0, r1, r2, r3;
      SM75_U16x8_LDSM_T::copy(*reinterpret_cast<uint128_t const*>(&sV(key0 + load_key, col0 + load_col, v_stage)), r0,
                              r1, r2, r3);
      SM90_U32x4_STSM_N::copy(__byte_perm(r0, r1, 0x6420), __byte_perm(r0, r1, 0x7531), __byte_perm(r2, r3, 0x6420),
                              __byte_perm(r2, r3, 0x7531),
                              *reinterpret_cast<uint128_t*>(&sVt(col0 + store_row, key0, vt_stage)));
    }
  }
};

}  // namespace warpflash::kernels
