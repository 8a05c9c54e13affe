// Regenerates the inputs of ForwardGpuTest *_d256_full_b7_q64_k300_h16_kv2 for a seed (FP16; BF16
// with a second argument): ./gen SEED [bf16]
#include <cstdio>
#include <random>
#include <vector>
#include <cstdint>
#include <cstdlib>
#include "common/dtype_bits.h"
using namespace warpflash;
int main(int argc, char** argv) {
  uint32_t seed = std::strtoul(argv[1], nullptr, 10);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const long sizes[3] = {7L * 64 * 16 * 256, 7L * 300 * 2 * 256, 7L * 300 * 2 * 256};
  const char* names[3] = {"q.f32", "k.f32", "v.f32"};
  for (int t = 0; t < 3; ++t) {
    std::vector<float> x(sizes[t]);
    for (long i = 0; i < sizes[t]; ++i) x[i] = testing::from_bits((argc > 2 ? DType::kBFloat16 : DType::kFloat16), testing::to_bits((argc > 2 ? DType::kBFloat16 : DType::kFloat16), normal(rng)));
    FILE* f = fopen(names[t], "wb"); fwrite(x.data(), 4, x.size(), f); fclose(f);
  }
}
