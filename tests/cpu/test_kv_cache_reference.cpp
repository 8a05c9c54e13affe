// The KV-cache reference: rotary embedding (against complex rotation, its relative-position
// property, both pair layouts) and the paged cache read back as dense rows.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/random_values.h"
#include "reference/kv_cache.h"

namespace warpflash::reference {
namespace {

struct Tables {
  std::vector<double> cos, sin;
  double angle(int64_t position, int64_t i, int64_t rotary_dim) const {
    return position * std::pow(10000.0, -2.0 * i / rotary_dim);
  }
};

// cos / sin of position * 10000^(-2i / rotary_dim), as the models' rotary tables.
Tables make_tables(int64_t positions, int64_t rotary_dim) {
  Tables t;
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
      t.cos.push_back(std::cos(t.angle(p, i, rotary_dim)));
      t.sin.push_back(std::sin(t.angle(p, i, rotary_dim)));
    }
  return t;
}

using warpflash::testing::random_values;

TEST(Rotary, RotatesEachPairAsAComplexNumberAndLeavesTheRest) {
  const int64_t head_dim = 12, rotary_dim = 8, half = rotary_dim / 2;
  const Tables tables = make_tables(50, rotary_dim);
  const std::vector<int64_t> positions = {0, 7, 49};
  for (bool interleaved : {true, false}) {
    std::vector<double> rows = random_values(3 * head_dim, 1), original = rows;
    apply_rotary(rows, head_dim, rotary_dim, positions, tables.cos, tables.sin, interleaved);
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        std::complex<double> z(original[r * head_dim + a], original[r * head_dim + b]);
        z *= std::polar(1.0, tables.angle(positions[r], i, rotary_dim));
        EXPECT_NEAR(rows[r * head_dim + a], z.real(), 1e-12);
        EXPECT_NEAR(rows[r * head_dim + b], z.imag(), 1e-12);
      }
      for (int64_t c = rotary_dim; c < head_dim; ++c) EXPECT_EQ(rows[r * head_dim + c], original[r * head_dim + c]);
    }
  }
}

TEST(Rotary, ScoresDependOnlyOnTheDistance) {
  const int64_t d = 16;
  const Tables tables = make_tables(100, d);
  auto score = [&](int64_t m, int64_t n, bool interleaved) {
    std::vector<double> q = random_values(d, 2), k = random_values(d, 3);
    apply_rotary(q, d, d, {m}, tables.cos, tables.sin, interleaved);
    apply_rotary(k, d, d, {n}, tables.cos, tables.sin, interleaved);
    return std::inner_product(q.begin(), q.end(), k.begin(), 0.0);
  };
  for (bool interleaved : {true, false}) {
    EXPECT_NEAR(score(10, 3, interleaved), score(60, 53, interleaved), 1e-12);
    EXPECT_GT(std::fabs(score(10, 3, interleaved) - score(10, 4, interleaved)), 1e-6);
  }
}

TEST(Rotary, RejectsBadDimsAndPositions) {
  const Tables tables = make_tables(4, 8);
  std::vector<double> rows(16);
  EXPECT_THROW(apply_rotary(rows, 16, 7, {0}, tables.cos, tables.sin, true), std::invalid_argument);
  EXPECT_THROW(apply_rotary(rows, 16, 8, {4}, tables.cos, tables.sin, true), std::invalid_argument);
  EXPECT_THROW(apply_rotary(rows, 16, 8, {0, 1}, tables.cos, tables.sin, true), std::invalid_argument);
}

TEST(PagedCache, GathersTheTokensOfASequenceThroughItsPageTable) {
  const int64_t page_size = 3, heads = 2, head_dim = 4, row = heads * head_dim, num_pages = 7, max_pages = 3;
  const std::vector<double> cache = random_values(num_pages * page_size * row, 4);
  // Sequence 1 uses pages 5, 0, 2 (8 tokens: the last page partly).
  const std::vector<int32_t> page_table = {1, 3, 4, 5, 0, 2};
  std::vector<double> dense = gather_paged(cache, page_size, heads, head_dim, page_table, max_pages, 1, 8);
  ASSERT_EQ(static_cast<int64_t>(dense.size()), 8 * row);
  const int32_t pages[] = {5, 0, 2};
  for (int64_t t = 0; t < 8; ++t)
    for (int64_t c = 0; c < row; ++c)
      EXPECT_EQ(dense[t * row + c], cache[(pages[t / page_size] * page_size + t % page_size) * row + c]);
  EXPECT_THROW(gather_paged(cache, page_size, heads, head_dim, page_table, max_pages, 1, 10), std::invalid_argument);
  const std::vector<int32_t> bad = {0, 9, 1};
  EXPECT_THROW(gather_paged(cache, page_size, heads, head_dim, bad, max_pages, 0, 5), std::invalid_argument);
}

}  // namespace
}  // namespace warpflash::reference
