// Standard-normal test inputs from a fixed seed, for the CPU tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace warpflash::testing {

inline std::vector<double> random_values(int64_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(n);
  for (double& v : x) v = normal(generator);
  return x;
}

}  // namespace warpflash::testing
