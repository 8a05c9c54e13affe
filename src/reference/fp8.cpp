#include "reference/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace warpflash::reference {

double round_to_e4m3(double x) {
  if (std::isnan(x)) return x;
  const double magnitude = std::fabs(x);
  if (magnitude >= kE4m3Max) return std::copysign(kE4m3Max, x);
  // Spacing of e4m3 values around the magnitude: 2^(e - 3) for normals of exponent e,
  // 2^-9 below the smallest normal 2^-6.
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  const double step = std::ldexp(1.0, std::max(exponent - 1, -6) - 3);
  const double rounded = std::nearbyint(magnitude / step) * step;  // ties to even (default mode)
  return std::copysign(std::min(rounded, kE4m3Max), x);
}

double e4m3_bits_to_double(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(mantissa, -9);
  return sign * std::ldexp(8 + mantissa, exponent - 10);
}

uint8_t double_to_e4m3_bits(double x) {
  if (std::isnan(x)) return 0x7f;
  const double rounded = round_to_e4m3(x);
  const uint8_t sign = std::signbit(rounded) && rounded != 0 ? 0x80 : 0x00;
  for (int bits = 0; bits < 0x7f; ++bits) {  // the 127 non-negative finite codes
    if (e4m3_bits_to_double(static_cast<uint8_t>(bits)) == std::fabs(rounded)) return static_cast<uint8_t>(sign | bits);
  }
  return 0x7f;  // not reached: every rounded value is a code
}

std::vector<double> hadamard_signs(int64_t n, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<double> signs(n);
  for (double& s : signs) s = (generator() & 1) ? -1.0 : 1.0;
  return signs;
}

void random_sign_hadamard(double* row, int64_t n, const std::vector<double>& signs) {
  if (n <= 0 || (n & (n - 1)) != 0 || static_cast<int64_t>(signs.size()) != n) {
    throw std::invalid_argument("reference::random_sign_hadamard: n = " + std::to_string(n) +
                                " must be a power of two with n signs");
  }
  for (int64_t i = 0; i < n; ++i) row[i] *= signs[i];
  // Fast Walsh-Hadamard transform: log2(n) butterfly stages.
  for (int64_t half = 1; half < n; half *= 2) {
    for (int64_t base = 0; base < n; base += 2 * half) {
      for (int64_t i = base; i < base + half; ++i) {
        const double a = row[i], b = row[i + half];
        row[i] = a + b;
        row[i + half] = a - b;
      }
    }
  }
  const double norm = 1.0 / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) row[i] *= norm;
}

std::vector<double> quantize_e4m3(const std::vector<double>& x, int64_t batch, int64_t seqlen, int64_t heads,
                                  int64_t head_dim, int64_t block_rows) {
  if (static_cast<int64_t>(x.size()) != batch * seqlen * heads * head_dim) {
    throw std::invalid_argument("reference::quantize_e4m3: x has " + std::to_string(x.size()) + " elements, expected " +
                                std::to_string(batch * seqlen * heads * head_dim));
  }
  std::vector<double> out(x.size());
  // Groups: the whole tensor, or (batch, head, rows [r0, r0 + block_rows)).
  auto quantize_group = [&](auto&& for_each_index) {
    double amax = 0;
    for_each_index([&](int64_t i) { amax = std::max(amax, std::fabs(x[i])); });
    const double scale = amax > 0 ? amax / kE4m3Max : 1.0;
    for_each_index([&](int64_t i) { out[i] = round_to_e4m3(x[i] / scale) * scale; });
  };
  if (block_rows <= 0) {
    quantize_group([&](auto&& visit) {
      for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) visit(i);
    });
    return out;
  }
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t r0 = 0; r0 < seqlen; r0 += block_rows) {
        quantize_group([&](auto&& visit) {
          for (int64_t r = r0; r < std::min(seqlen, r0 + block_rows); ++r) {
            for (int64_t d = 0; d < head_dim; ++d) visit(((b * seqlen + r) * heads + h) * head_dim + d);
          }
        });
      }
    }
  }
  return out;
}

void forward_fp8_emulated(const Problem& p, const Fp8Recipe& recipe, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v, std::vector<double>& o) {
  const int64_t d = p.head_dim, dv = p.value_head_dim();
  if (static_cast<int64_t>(q.size()) != p.q_elements() || static_cast<int64_t>(k.size()) != p.kv_elements() ||
      static_cast<int64_t>(v.size()) != p.v_elements() || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) {
    throw std::invalid_argument("reference::forward_fp8_emulated: tensor sizes do not match the problem");
  }
  if (p.softcap > 0 || !p.sinks.empty()) {
    throw std::invalid_argument("reference::forward_fp8_emulated: softcap and sinks are not emulated");
  }
  if (!recipe.quantize_inputs && (recipe.hadamard || recipe.block_rows_q != 0 || recipe.block_rows_kv != 0)) {
    throw std::invalid_argument("reference::forward_fp8_emulated: a recipe without quantization has no blocks or Hadamard");
  }
  std::vector<double> qt = q, kt = k;
  if (recipe.hadamard) {
    const std::vector<double> signs = hadamard_signs(d, recipe.seed);
    for (int64_t row = 0; row < static_cast<int64_t>(qt.size()) / d; ++row) random_sign_hadamard(&qt[row * d], d, signs);
    for (int64_t row = 0; row < static_cast<int64_t>(kt.size()) / d; ++row) random_sign_hadamard(&kt[row * d], d, signs);
  }
  auto quantized = [&](const std::vector<double>& x, int64_t seqlen, int64_t heads, int64_t width, int64_t block_rows) {
    return recipe.quantize_inputs ? quantize_e4m3(x, p.batch, seqlen, heads, width, block_rows) : x;
  };
  const std::vector<double> q8 = quantized(qt, p.seqlen_q, p.heads_q, d, recipe.block_rows_q);
  const std::vector<double> k8 = quantized(kt, p.seqlen_k, p.heads_kv, d, recipe.block_rows_kv);
  const std::vector<double> v8 = quantized(v, p.seqlen_k, p.heads_kv, dv, recipe.block_rows_kv);
  o.assign(p.o_elements(), 0.0);
  const int64_t group = p.heads_q / p.heads_kv;
  std::vector<double> scores(p.seqlen_k);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const auto [begin, end] = visible_range(p, i);
        const double* qi = &q8[((b * p.seqlen_q + i) * p.heads_q + h) * d];
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = begin; j < end; ++j) {
          const double* kj = &k8[((b * p.seqlen_k + j) * p.heads_kv + g) * d];
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += qi[c] * kj[c];
          scores[j] = s * p.softmax_scale;
          max = std::max(max, scores[j]);
        }
        double sum = 0;
        double* oi = &o[((b * p.seqlen_q + i) * p.heads_q + h) * dv];
        for (int64_t j = begin; j < end; ++j) {
          const double pj = std::exp(scores[j] - max);  // <= 1: e4m3 holds it without a scale
          sum += pj;
          const double p8 = round_to_e4m3(pj);
          const double* vj = &v8[((b * p.seqlen_k + j) * p.heads_kv + g) * dv];
          for (int64_t c = 0; c < dv; ++c) oi[c] += p8 * vj[c];
        }
        for (int64_t c = 0; c < dv && sum > 0; ++c) oi[c] /= sum;
      }
    }
  }
}

}  // namespace warpflash::reference
