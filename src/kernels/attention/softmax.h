// Online softmax on the rows of the S accumulator (FlashAttention's rescaling trick):
// keeps each row's running max and sum, turns S into unnormalized P in place and rescales
// O whenever the max grows. Runs on exp2 with the scale folded in (one FFMA per element).
#pragma once

#include <cmath>

#include <cute/tensor.hpp>
#include <cutlass/fast_math.h>

namespace warpflash::kernels {

using namespace cute;

constexpr float kLn2 = 0.69314718055994530942f;

// The four threads of a quad hold the columns of the same rows.
CUTE_DEVICE float quad_allreduce_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}

CUTE_DEVICE float quad_allreduce_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// Softcap (Gemma 2): scores become softcap * tanh(scale * s / softcap). The kernel turns S
// into tanh(s * prescale) with prescale = scale / softcap (the hardware's tanh.approx) and
// the softmax then scales by softcap instead of the softmax scale. Before the mask, so
// that masked scores stay -inf.
template <class TensorS>
CUTE_DEVICE void apply_softcap(TensorS& s, float prescale) {
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(s); ++i) s(i) = cutlass::fast_tanh(s(i) * prescale);
}

// kLazyRescale (FlashAttention-4's lazy rescaling): a row's reference max moves only
// when the row's max grows by more than 2^kRescaleThreshold, so P may reach 2^8 (the fp32
// sums and 16-bit P hold that at full precision) and after the first blocks of a long row
// O needs no rescaling: rescale_any() skips it for a warp whose rows all kept theirs.
template <int kRows, bool kLazyRescale = false>
struct OnlineSoftmax {
  static constexpr float kRescaleThreshold = 8.f;  // log2 units

  float row_max[kRows];
  float row_sum[kRows];  // this thread's partial sums; reduced across the quad at the end
  float scale_log2;

  CUTE_DEVICE explicit OnlineSoftmax(float scale_log2_) : scale_log2(scale_log2_) {
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // Folds a new block of scores into the running max and sum and turns them into
  // unnormalized probabilities in place. Returns each row's factor for rescaling O
  // (kept separate so O can be rescaled after a GEMM that is still writing it completes).
  // s is a (rows, columns) view; masked scores are -inf.
  template <class TensorS>
  CUTE_DEVICE cute::array<float, kRows> update(TensorS& s) {
    static_assert(decltype(size<0>(s))::value == kRows);
    cute::array<float, kRows> correction;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      correction[r] = update_row_max(s, r);
      exponentiate_row(s, r, correction[r]);
    }
    return correction;
  }

  // update() in two parts, so that a kernel can wait for a GEMM between them (the forward
  // mainloop's kSoftmaxBeforePvWait): every row's max and factor first, then the
  // exponentials of rows [kBegin, kEnd) at a time.
  template <class TensorS>
  CUTE_DEVICE void update_max(TensorS const& s, cute::array<float, kRows>& correction) {
    static_assert(decltype(size<0>(s))::value == kRows);
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) correction[r] = update_row_max(s, r);
  }

  template <int kBegin, int kEnd, class TensorS>
  CUTE_DEVICE void exponentiate_rows(TensorS& s, cute::array<float, kRows> const& correction) {
    CUTLASS_PRAGMA_UNROLL
    for (int r = kBegin; r < kEnd; ++r) exponentiate_row(s, r, correction[r]);
  }

  // Row r's new reference max; returns O's factor for it.
  template <class TensorS>
  CUTE_DEVICE float update_row_max(TensorS const& s, int r) {
    float new_max = row_max[r];
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(s); ++c) new_max = fmaxf(new_max, s(r, c));
    new_max = quad_allreduce_max(new_max);
    // A row that has seen only masked keys keeps max -inf; subtracting 0 instead keeps
    // exp2(-inf) = 0 and avoids inf - inf = NaN.
    // Lazily, from -inf to finite grows (correction 0); -inf to -inf (NaN) does not.
    bool grows = !kLazyRescale || new_max * scale_log2 - row_max[r] * scale_log2 > kRescaleThreshold;
    if (!grows) new_max = row_max[r];
    float max_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    float correction = grows ? exp2f(row_max[r] * scale_log2 - max_scaled) : 1.f;
    row_max[r] = new_max;
    return correction;
  }

  // Row r's P in place, relative to its reference max, and its sum.
  template <class TensorS>
  CUTE_DEVICE void exponentiate_row(TensorS& s, int r, float correction) {
    float max_scaled = row_max[r] == -INFINITY ? 0.f : row_max[r] * scale_log2;
    float sum = 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(s); ++c) {
      s(r, c) = exp2f(s(r, c) * scale_log2 - max_scaled);
      sum += s(r, c);
    }
    row_sum[r] = row_sum[r] * correction + sum;
  }

  // The next scores come in units of another scale (FP8 block quantization: their K
  // block's): the running max follows into the new units (a few ulps of the reference
  // max, which the sums and O are relative to, are lost: far below e4m3's rounding).
  CUTE_DEVICE void set_scale(float new_scale_log2) {
    float ratio = scale_log2 / new_scale_log2;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) row_max[r] *= ratio;
    scale_log2 = new_scale_log2;
  }

  // O *= correction, per row; with kLazyRescale only if some row of the warp moved its
  // reference max (a warp-uniform branch).
  template <class TensorO>
  CUTE_DEVICE static void rescale_any(TensorO& o, cute::array<float, kRows> const& correction) {
    if constexpr (kLazyRescale) {
      bool moved = false;
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) moved |= correction[r] != 1.f;
      if (!__any_sync(0xffffffff, moved)) return;
    }
    rescale(o, correction);
  }

  template <class TensorO>
  CUTE_DEVICE static void rescale(TensorO& o, cute::array<float, kRows> const& correction) {
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
    }
  }

  // Normalizes O and returns each row's natural-log LSE. A learnable sink (gpt-oss) is one
  // more logit in every row's denominator with no value row: sink_log2 is it in log2
  // units, -inf for none (then the result is the plain softmax's, to the bit). Rows that
  // saw no key get O = 0 and LSE = -inf (or the sink): both maxima -inf, no NaN.
  // o_scale multiplies O as well (FP8's V descale).
  template <class TensorO>
  CUTE_DEVICE void finalize(TensorO& o, float (&lse)[kRows], float sink_log2 = -INFINITY, float o_scale = 1.f) {
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum = quad_allreduce_sum(row_sum[r]);
      float max_scaled = row_max[r] * scale_log2;
      float max_all = fmaxf(max_scaled, sink_log2);
      float safe_max = max_all == -INFINITY ? 0.f : max_all;
      float keep = exp2f(max_scaled - safe_max);  // the scores' share against the sink
      float total = sum * keep + exp2f(sink_log2 - safe_max);
      float inv_sum = total > 0.f ? keep * o_scale / total : 0.f;
      lse[r] = (max_all + log2f(total)) * kLn2;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= inv_sum;
    }
  }
};

}  // namespace warpflash::kernels
