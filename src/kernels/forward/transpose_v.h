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

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

namespace warpflash::kernels {

using namespace cute;

template <class Traits>
struct TransposeV {
  using Element = typename Traits::Element;
  static_assert(sizeof(Element) == 1, "the byte permutes below move e4m3 values");
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDimV = Traits::kHeadDimV;
  static constexpr int kWarps = Traits::kTransposeThreads / 32;
  // A warp moves slabs of 16 keys: each lane reads 4 columns of the 16 rows (one 4-byte
  // load per row, a warp's loads of a row cover it: no bank conflicts) and writes 4 rows of
  // V^T, 16 keys each (one 16-byte store per row).
  static constexpr int kLanesPerRow = kHeadDimV >= 128 ? 32 : kHeadDimV / 4;
  static constexpr int kGroupsPerWarp = 32 / kLanesPerRow;  // of 16 keys, side by side
  static constexpr int kColumnBlocks = kHeadDimV / (4 * kLanesPerRow);
  static constexpr int kSlabs = kBlockN / 16 / kGroupsPerWarp * kColumnBlocks;
  static_assert(kBlockN % (16 * kGroupsPerWarp) == 0 && kHeadDimV % (4 * kLanesPerRow) == 0, "whole slabs");

  // One block: V stage `v_stage` into V^T stage `vt_stage`, by transposer thread `tid` in
  // [0, kTransposeThreads).
  template <class SmemV, class SmemVt>
  CUTE_DEVICE static void block(SmemV const& sV, SmemVt& sVt, int v_stage, int vt_stage, int tid) {
    int warp = tid / 32, lane = tid % 32;
    int group_in_warp = lane / kLanesPerRow;
    int column = 4 * (lane % kLanesPerRow);
    // The four rows a lane writes, in a lane-dependent order: the 16-byte stores of 8
    // neighbouring lanes then go to 8 different rows mod 8, i.e. 8 different 16-byte
    // slots of the swizzled V^T (conflict-free).
    int rotation = (lane >> 1) & 3;
#pragma unroll 1
    for (int slab = warp; slab < kSlabs; slab += kWarps) {
      int key0 = 16 * (slab / kColumnBlocks * kGroupsPerWarp + group_in_warp);
      int col = (slab % kColumnBlocks) * 4 * kLanesPerRow + column;
      // Addresses from these each time: hoisted out of the loop, the 20 lane-dependent
      // parts took more than the producer's 56 registers.
      asm volatile("" : "+r"(key0), "+r"(col));
      uint32_t rows[16];  // keys key0 .. key0 + 15, columns col .. col + 3
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 16; ++s) rows[s] = *reinterpret_cast<uint32_t const*>(&sV(key0 + s, col, v_stage));
      CUTLASS_PRAGMA_UNROLL
      for (int step = 0; step < 4; ++step) {
        int i = (step + rotation) & 3;
        uint32_t pick = uint32_t(i) | uint32_t(i + 4) << 4;  // byte i of each of two words
        uint32_t out[4];
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < 4; ++t) {
          uint32_t low = __byte_perm(rows[2 * t], rows[2 * t + 1], pick);
          uint32_t high = __byte_perm(rows[2 * t + 8], rows[2 * t + 9], pick);
          out[t] = __byte_perm(low, high, 0x5410);
        }
        *reinterpret_cast<uint4*>(&sVt(col + i, key0, vt_stage)) = make_uint4(out[0], out[1], out[2], out[3]);
      }
    }
  }
};

}  // namespace warpflash::kernels
