// Views and helpers on WGMMA register fragments.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace warpflash::kernels {

using namespace cute;

// A 64xN WGMMA accumulator gives each thread ((2, 2, N/8), MMA_M, MMA_N) values:
// (column pair, row and row + 8, column block of 8). This is the same storage seen as
// (rows, columns) = ((2, MMA_M), (2, N/8, MMA_N)), so the softmax can loop over rows.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto rowcol_layout(Layout acc) {
  static_assert(decltype(rank<0>(acc))::value == 3, "expects a WGMMA accumulator layout");
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

template <class Engine, class Layout>
CUTE_DEVICE auto rowcol_view(Tensor<Engine, Layout>& acc) {
  return make_tensor(acc.data(), rowcol_layout(acc.layout()));
}

// Converts a register fragment element-wise (pairs at a time where the hardware can).
template <class To, class Engine, class Layout>
CUTE_DEVICE auto convert_fragment(Tensor<Engine, Layout> const& from) {
  using From = typename Engine::value_type;
  constexpr int kSize = decltype(size(from))::value;
  cutlass::NumericArrayConverter<To, From, kSize> convert;
  auto converted = convert(*reinterpret_cast<cutlass::Array<From, kSize> const*>(from.data()));
  Tensor out = make_fragment_like<To>(from.layout());
  *reinterpret_cast<cutlass::Array<To, kSize>*>(out.data()) = converted;
  return out;
}

// The S accumulator of one warpgroup (MMA_M = MMA_N = 1) holds, for every 16 columns,
// exactly the 8 values of that thread's A operand of a 64x16 WGMMA, in the same order:
// P can feed O += P V from registers without shuffles.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_as_a_operand(Layout) {
  static_assert(decltype(size<1>(Layout{}) == _1{} && size<2>(Layout{}) == _1{})::value,
                "one WGMMA atom per warpgroup along M and N");
  constexpr int kBlocks16 = decltype(size<0, 2>(Layout{}))::value / 2;
  return make_layout(Shape<Shape<_2, _2, _2>, _1, Int<kBlocks16>>{});
}

// FP8: the A operand of a 64x32 e4m3 WGMMA gives each thread (4, 2, 2) values: 4
// consecutive columns, of row and row + 8, and the same 16 columns further, where the S
// accumulator holds column pairs 8 apart. The P operand of a warpgroup's S block of N
// columns, compact: ((4, 2, 2), 1, N / 32).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_as_fp8_a_operand(Layout) {
  static_assert(decltype(size<1>(Layout{}) == _1{} && size<2>(Layout{}) == _1{})::value,
                "one WGMMA atom per warpgroup along M and N");
  constexpr int kBlocks32 = decltype(size<0, 2>(Layout{}))::value / 4;
  return make_layout(Shape<Shape<_4, _2, _2>, _1, Int<kBlocks32>>{});
}
// The S accumulator seen in that operand's value order: A column 16 kh + 4 t + u takes
// this thread's accumulator column 16 kh + 8 (u / 2) + 2 t + u % 2 (pair u % 2 of column
// block 2 kh + u / 2), so V^T's keys are stored in that order (transpose_v.h) and no value
// moves between threads.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_in_fp8_a_order(Layout) {
  constexpr int kBlocks32 = decltype(size<0, 2>(Layout{}))::value / 4;
  return make_layout(Shape<Shape<Shape<_2, _2>, _2, _2>, _1, Int<kBlocks32>>{},
                     Stride<Stride<Stride<_1, _4>, _2, _8>, _0, _16>{});
}

// Issues (but does not wait for) one warpgroup GEMM over all K slices of its operands.
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
CUTE_DEVICE void warpgroup_gemm(TiledMma& mma, TensorA const& a, TensorB const& b, TensorC& c) {
  // A comes from registers (P) or from shared memory through GMMA descriptors (Q).
  constexpr bool kAInRegisters = !is_same_v<typename TensorA::iterator, GMMA::DescriptorIterator>;
  if constexpr (kAInRegisters) warpgroup_fence_operand(const_cast<TensorA&>(a));
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kAInRegisters) warpgroup_fence_operand(const_cast<TensorA&>(a));
}

// ptxas schedules instructions within basic blocks, and there it may move a
// warpgroup_wait above independent work (to start sooner on what needs the GEMM done).
// A branch it cannot resolve ends the block: called with a value the caller knows to be
// false (the branch is never taken), what precedes the call stays before a wait that
// follows it.
CUTE_DEVICE void end_schedule_block(bool never) {
  if (never) asm volatile("trap;");
}

}  // namespace warpflash::kernels
