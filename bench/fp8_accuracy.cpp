// The FlashAttention-3 paper's FP8 accuracy study, emulated on the CPU: Q, K, V with
// entries N(0, 1) + N(0, 100) * Bernoulli(0.001) (rare large outliers), the RMSE of O
// against double-precision attention for 16-bit attention and for FP8 (e4m3) attention
// with per-tensor scales, per-block scales, the random-sign Hadamard transform, and both.
// The kernels' rows (warpflash's FP8 kernel, FA3's FP8) come from the GPU benchmark; this
// gives what each recipe is worth in exact arithmetic otherwise.
//   build/bench/fp8_accuracy [--seqlen 2048] [--heads 4] [--head-dim 128] [--seed 0]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/attention_reference.h"
#include "reference/fp8.h"
#include "reference/half_precision.h"

namespace {

using namespace warpflash::reference;

double rmse(const std::vector<double>& x, const std::vector<double>& reference) {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += (x[i] - reference[i]) * (x[i] - reference[i]);
  return std::sqrt(sum / static_cast<double>(x.size()));
}

// Standard attention in fp16 (the paper's baseline): S = Q K^T materialized and rounded to
// fp16 after scaling, softmax in fp32, P rounded to fp16, O accumulated in fp32 and rounded.
void standard_attention_fp16(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, std::vector<double>& o) {
  auto half = [](double x) { return static_cast<double>(half_bits_to_float(float_to_half_bits(static_cast<float>(x)))); };
  const int64_t d = p.head_dim, group = p.heads_q / p.heads_kv;
  o.assign(p.o_elements(), 0.0);
  std::vector<float> s(p.seqlen_k);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const double* qi = &q[((b * p.seqlen_q + i) * p.heads_q + h) * d];
        float max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const double* kj = &k[((b * p.seqlen_k + j) * p.heads_kv + h / group) * d];
          float dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += static_cast<float>(qi[c] * kj[c]);
          s[j] = static_cast<float>(half(dot * p.softmax_scale));
          max = std::max(max, s[j]);
        }
        for (int64_t j = 0; j < p.seqlen_k; ++j) sum += (s[j] = std::exp(s[j] - max));
        std::vector<float> acc(d, 0.f);
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const float pj = static_cast<float>(half(s[j] / sum));
          const double* vj = &v[((b * p.seqlen_k + j) * p.heads_kv + h / group) * d];
          for (int64_t c = 0; c < d; ++c) acc[c] += pj * static_cast<float>(vj[c]);
        }
        double* oi = &o[((b * p.seqlen_q + i) * p.heads_q + h) * d];
        for (int64_t c = 0; c < d; ++c) oi[c] = half(acc[c]);
      }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seqlen = 2048, heads = 4, head_dim = 128;
  uint64_t seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    long long value = std::atoll(argv[i + 1]);
    if (flag == "--seqlen") seqlen = value;
    else if (flag == "--heads") heads = value;
    else if (flag == "--head-dim") head_dim = value;
    else if (flag == "--seed") seed = static_cast<uint64_t>(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Problem p;
  p.batch = 1, p.seqlen_q = seqlen, p.seqlen_k = seqlen, p.heads_q = heads, p.heads_kv = heads, p.head_dim = head_dim;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution outlier(0.001);
  // Inputs given in fp16 (the paper's setting): the values every method starts from.
  auto make = [&] {
    std::vector<double> x(p.q_elements());
    for (double& e : x) {
      double value = normal(generator) + (outlier(generator) ? 10.0 * normal(generator) : 0.0);
      e = half_bits_to_float(float_to_half_bits(static_cast<float>(value)));
    }
    return x;
  };
  const std::vector<double> q = make(), k = make(), v = make();
  std::vector<double> o_ref, lse, o;
  forward(p, q, k, v, o_ref, lse);

  std::printf("# FP8 accuracy, emulated: seqlen %lld, heads %lld, head_dim %lld, seed %llu;\n",
              static_cast<long long>(seqlen), static_cast<long long>(heads), static_cast<long long>(head_dim),
              static_cast<unsigned long long>(seed));
  std::printf("# entries N(0,1) + N(0,100) x Bernoulli(0.001), given in fp16; RMSE of O against fp64\n");
  std::printf("| method | RMSE |\n|---|---|\n");
  standard_attention_fp16(p, q, k, v, o);
  std::printf("| standard attention, fp16 (S materialized in fp16) | %.2e |\n", rmse(o, o_ref));
  forward_low_precision(p, Precision::kFloat16, q, k, v, o);
  std::printf("| flash attention, fp16 (S in fp32, P and O rounded) | %.2e |\n", rmse(o, o_ref));
  forward_low_precision(p, Precision::kBFloat16, q, k, v, o);
  std::printf("| flash attention, bf16 P and O (S in fp32) | %.2e |\n", rmse(o, o_ref));
  struct Row {
    const char* name;
    Fp8Recipe recipe;
  };
  const Row rows[] = {
      {"FP8 e4m3, per-tensor scales", Fp8Recipe{0, 0, false, seed}},
      {"FP8, block quantization (128-row blocks of Q, K, V)", Fp8Recipe{128, 128, false, seed}},
      {"FP8, random-sign Hadamard of Q and K, per-tensor scales", Fp8Recipe{0, 0, true, seed}},
      {"FP8, block quantization + Hadamard", Fp8Recipe{128, 128, true, seed}},
  };
  for (const Row& row : rows) {
    forward_fp8_emulated(p, row.recipe, q, k, v, o);
    std::printf("| %s | %.2e |\n", row.name, rmse(o, o_ref));
  }
  return 0;
}
