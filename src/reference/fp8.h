// FP8 (e4m3) on the CPU, for the FP8 attention's tests and its accuracy study: rounding to
// e4m3, the random-sign Hadamard transform (the FlashAttention-3 paper's incoherent
// processing), quantization with one scale per tensor or per block of rows, and attention
// computed from quantized Q, K, V (and P) in double precision otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/attention_reference.h"

namespace warpflash::reference {

// e4m3 as Hopper's FP8 tensor cores read it (OCP E4M3FN): 1 sign, 4 exponent bits (bias 7),
// 3 mantissa bits; largest finite 448, smallest subnormal 2^-9, no infinities.
constexpr double kE4m3Max = 448.0;
// x rounded to the nearest e4m3 value (ties to even), saturating at +-448 as the
// conversions with .satfinite do; NaN stays NaN.
double round_to_e4m3(double x);
// The value of an e4m3 bit pattern (0x7f and 0xff are NaN).
double e4m3_bits_to_double(uint8_t bits);
// The bit pattern of round_to_e4m3(x) (+0 for zero; NaN: 0x7f).
uint8_t double_to_e4m3_bits(double x);

// One +-1 sign per column, from a seed: the random diagonal of the transform.
std::vector<double> hadamard_signs(int64_t n, uint64_t seed);
// row <- H diag(signs) row / sqrt(n) in place, H the Sylvester Hadamard matrix of size n (a
// power of two). Orthogonal: applied to q and k alike it leaves every q . k unchanged and
// spreads an outlier channel over all n.
void random_sign_hadamard(double* row, int64_t n, const std::vector<double>& signs);

// Quantization of a (batch, seqlen, heads, head_dim) tensor to e4m3 values times a scale:
// one scale per (batch, head, block of block_rows rows), or per tensor when block_rows is 0.
// scale = amax / 448 over the group (1 for an all-zero group); returns the dequantized
// values e4m3(x / scale) * scale.
std::vector<double> quantize_e4m3(const std::vector<double>& x, int64_t batch, int64_t seqlen, int64_t heads,
                                  int64_t head_dim, int64_t block_rows);

// How the FP8 attention emulation quantizes.
struct Fp8Recipe {
  int64_t block_rows_q = 0;   // 0: one scale per tensor
  int64_t block_rows_kv = 0;
  bool hadamard = false;      // random-sign Hadamard of Q and K along head_dim first
  uint64_t seed = 0;          // of the signs
  // false: Q, K and V are taken as given (already e4m3 values times their scales); only P
  // is rounded.
  bool quantize_inputs = true;
};

// Attention with Q, K, V quantized to e4m3 by the recipe and P quantized to e4m3 before
// P V (as an FP8 kernel converts it), everything else in double: S from the dequantized
// values, row max and sum from the exact P. Masks as Problem's (causal, windows, chunks);
// softcap and sinks are refused (std::invalid_argument). o has o_elements().
void forward_fp8_emulated(const Problem& p, const Fp8Recipe& recipe, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v, std::vector<double>& o);

}  // namespace warpflash::reference
