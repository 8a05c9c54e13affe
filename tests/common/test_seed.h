// The seed of a GPU test's random inputs: a fresh one per test, or WARPFLASH_TEST_SEED to
// run a failure again with its inputs (the tests print the seed with every failure).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace warpflash::testing {

inline uint32_t test_seed() {
  if (const char* fixed = std::getenv("WARPFLASH_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10));
  return std::random_device{}();
}

}  // namespace warpflash::testing
