// append_kv_cache() against a CPU emulation of the same fp32 arithmetic (rotary pairs as
// PyTorch computes them: products rounded, then the sum, then the 16-bit rounding), so the
// cache, q_out and every untouched element must match bit for bit. Caches contiguous, at
// rows cache_batch_idx, or paged (pages of 16 and 1 rows in a shuffled table); rotary
// interleaved, half-split, partial (rotary_dim < head_dim), fp32 or 16-bit tables. Slots
// past a cache's end, page ids outside the pages and positions past the rotary tables are
// the caller's contract: the test places some there and checks nothing else is written.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/hopper_gpu.h"
#include "common/test_seed.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::kPoison;
using testing::to_bits;

enum class Layout { kContiguous, kBatchIndex, kPaged16, kPaged1 };
enum class Rotary { kNone, kInterleaved, kHalf, kPartialHalf };

struct Param {
  DType dtype;
  int64_t head_dim, head_dim_v;
  Layout layout;
  Rotary rotary;
  bool angles_fp32;
  int64_t seqlen_new;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  const char* layouts[] = {"contiguous", "batch_idx", "paged16", "paged1"};
  const char* rotaries[] = {"no_rotary", "interleaved", "half", "partial_half"};
  return std::string(p.dtype == DType::kBFloat16 ? "bf16" : "fp16") + "_d" + std::to_string(p.head_dim) +
         (p.head_dim_v != p.head_dim ? "_dv" + std::to_string(p.head_dim_v) : "") + "_" +
         layouts[static_cast<int>(p.layout)] + "_" + rotaries[static_cast<int>(p.rotary)] +
         (p.angles_fp32 ? "_fp32_angles" : "") + "_new" + std::to_string(p.seqlen_new);
}

// The kernel's arithmetic on the CPU: each product rounded to fp32, then the sum.
void rotate_pair(float& x1, float& x2, float c, float s) {
  volatile float a = x1 * c, b = x2 * s, e = x1 * s, f = x2 * c;  // no contraction into an FMA
  x1 = a - b;
  x2 = e + f;
}

class AppendKvGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(AppendKvGpuTest, WritesExactlyTheNewSlots) {
  WARPFLASH_REQUIRE_HOPPER();
  const Param p = GetParam();
  const int64_t batch = 3, heads_kv = 2, heads_q = 4, seqlen_q = 2, d = p.head_dim, dv = p.head_dim_v;
  const bool paged = p.layout == Layout::kPaged16 || p.layout == Layout::kPaged1;
  const int64_t page_size = p.layout == Layout::kPaged1 ? 1 : 16;
  const int64_t rows = 40;  // per sequence (contiguous), or pages of the table covering them
  const int64_t max_pages = paged ? (rows + page_size - 1) / page_size : 0;
  const int64_t capacity = paged ? max_pages * page_size : rows;  // slots per sequence
  const int64_t cache_batch = paged ? batch * max_pages + 2 : batch + 1;  // spare pages / rows
  const int64_t cache_rows = paged ? page_size : rows;
  const int64_t rotary_dim = p.rotary == Rotary::kNone ? 0 : p.rotary == Rotary::kPartialHalf ? d / 2 : d;
  const bool interleaved = p.rotary == Rotary::kInterleaved;
  const int64_t positions = capacity - 2;  // rotary table rows: sequence 2's last slots lie past them
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;

  // Where each sequence's new tokens go: sequence 0 at the start, 1 in the middle, 2 at
  // the end, with its last slot past the cache when seqlen_new > 1 (not written).
  std::vector<int32_t> seqlens = {0, 13, static_cast<int32_t>(capacity - p.seqlen_new + (p.seqlen_new > 1 ? 1 : 0))};
  std::vector<int32_t> batch_idx = {2, 0, 3};  // cache rows (kBatchIndex); row 1 untouched
  std::vector<int32_t> table(paged ? batch * max_pages : 0);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  if (paged) table[1 * max_pages + 13 / page_size] = static_cast<int32_t>(cache_batch + 5);  // a bad page id: skipped

  auto random_bits = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = to_bits(p.dtype, normal(rng));
    return v;
  };
  std::vector<uint16_t> k_new = random_bits(batch * p.seqlen_new * heads_kv * d);
  std::vector<uint16_t> v_new = random_bits(batch * p.seqlen_new * heads_kv * dv);
  std::vector<uint16_t> q = random_bits(batch * seqlen_q * heads_q * d);
  std::vector<float> angles(positions * std::max<int64_t>(rotary_dim / 2, 1));
  for (auto& a : angles) a = std::uniform_real_distribution<float>(0.f, 6.3f)(rng);
  // The tables as the kernel reads them, and their values as floats.
  std::vector<float> cos_f(angles.size()), sin_f(angles.size());
  std::vector<uint16_t> cos_bits(angles.size()), sin_bits(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos_bits[i] = to_bits(p.dtype, std::cos(angles[i]));
    sin_bits[i] = to_bits(p.dtype, std::sin(angles[i]));
    cos_f[i] = p.angles_fp32 ? std::cos(angles[i]) : from_bits(p.dtype, cos_bits[i]);
    sin_f[i] = p.angles_fp32 ? std::sin(angles[i]) : from_bits(p.dtype, sin_bits[i]);
  }

  // Expected: poison everywhere but the new tokens' slots.
  std::vector<uint16_t> k_cache(cache_batch * cache_rows * heads_kv * d, kPoison);
  std::vector<uint16_t> v_cache(cache_batch * cache_rows * heads_kv * dv, kPoison);
  std::vector<uint16_t> k_expected = k_cache, v_expected = v_cache, q_expected = q;
  auto rotate_row = [&](const uint16_t* from, uint16_t* to, int64_t position) {
    for (int64_t c = 0; c < d; ++c) to[c] = from[c];
    if (rotary_dim == 0 || position >= positions) return;
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
      int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rotary_dim / 2;
      float x1 = from_bits(p.dtype, from[a]), x2 = from_bits(p.dtype, from[b]);
      rotate_pair(x1, x2, cos_f[position * (rotary_dim / 2) + i], sin_f[position * (rotary_dim / 2) + i]);
      to[a] = to_bits(p.dtype, x1);
      to[b] = to_bits(p.dtype, x2);
    }
  };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < p.seqlen_new; ++t) {
      int64_t slot = seqlens[b] + t, page = b, row = slot;
      if (slot >= capacity) continue;
      if (paged) {
        page = table[b * max_pages + slot / page_size];
        row = slot % page_size;
        if (page >= cache_batch) continue;
      } else if (p.layout == Layout::kBatchIndex) {
        page = batch_idx[b];
      }
      for (int64_t h = 0; h < heads_kv; ++h) {
        int64_t from = (b * p.seqlen_new + t) * heads_kv + h, to = (page * cache_rows + row) * heads_kv + h;
        rotate_row(&k_new[from * d], &k_expected[to * d], slot);
        std::copy_n(&v_new[from * dv], dv, &v_expected[to * dv]);
      }
    }
    for (int64_t t = 0; t < seqlen_q; ++t) {
      for (int64_t h = 0; h < heads_q; ++h) {
        int64_t row = (b * seqlen_q + t) * heads_q + h;
        rotate_row(&q[row * d], &q_expected[row * d], seqlens[b] + t);
      }
    }
  }

  DeviceBuffer<uint16_t> k_new_d(k_new.size()), v_new_d(v_new.size()), q_d(q.size()), q_out_d(q.size());
  DeviceBuffer<uint16_t> k_cache_d(k_cache.size()), v_cache_d(v_cache.size());
  DeviceBuffer<int32_t> seqlens_d(batch), batch_idx_d(batch), table_d(std::max<size_t>(table.size(), 1));
  DeviceBuffer<uint16_t> cos16_d(angles.size()), sin16_d(angles.size());
  DeviceBuffer<float> cos32_d(angles.size()), sin32_d(angles.size());
  std::vector<float> cos32(angles.size()), sin32(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) cos32[i] = std::cos(angles[i]), sin32[i] = std::sin(angles[i]);
  ASSERT_TRUE(k_new_d.upload(k_new) && v_new_d.upload(v_new) && q_d.upload(q) && q_out_d.upload(q) &&
              k_cache_d.upload(k_cache) && v_cache_d.upload(v_cache) && seqlens_d.upload(seqlens) &&
              batch_idx_d.upload(batch_idx) && (table.empty() || table_d.upload(table)) && cos16_d.upload(cos_bits) &&
              sin16_d.upload(sin_bits) && cos32_d.upload(cos32) && sin32_d.upload(sin32));

  AppendKvArgs args;
  args.dtype = p.dtype;
  args.batch = batch;
  args.seqlen_new = p.seqlen_new;
  args.seqlen_q = seqlen_q;
  args.heads_q = heads_q;
  args.heads_kv = heads_kv;
  args.head_dim = d;
  args.head_dim_v = dv;
  args.k_new = contiguous_view(k_new_d.get(), p.seqlen_new, heads_kv, d);
  args.v_new = contiguous_view(v_new_d.get(), p.seqlen_new, heads_kv, dv);
  args.k_cache = contiguous_view(k_cache_d.get(), cache_rows, heads_kv, d);
  args.v_cache = contiguous_view(v_cache_d.get(), cache_rows, heads_kv, dv);
  args.cache_batch = cache_batch;
  args.cache_seqlen = cache_rows;
  args.cache_seqlens = seqlens_d.get();
  if (p.layout == Layout::kBatchIndex) args.cache_batch_idx = batch_idx_d.get();
  if (paged) {
    args.page_table = table_d.get();
    args.page_table_stride = max_pages;
    args.max_pages = max_pages;
  }
  if (rotary_dim > 0) {
    args.rotary_cos = p.angles_fp32 ? static_cast<const void*>(cos32_d.get()) : cos16_d.get();
    args.rotary_sin = p.angles_fp32 ? static_cast<const void*>(sin32_d.get()) : sin16_d.get();
    args.rotary_fp32 = p.angles_fp32;
    args.rotary_positions = positions;
    args.rotary_dim = rotary_dim;
    args.rotary_interleaved = interleaved;
    args.q = contiguous_view(q_d.get(), seqlen_q, heads_q, d);
    args.q_out = contiguous_view(q_out_d.get(), seqlen_q, heads_q, d);
  }
  Status status = append_kv_cache(args);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());

  auto mismatches = [](const std::vector<uint16_t>& got, const std::vector<uint16_t>& expected) {
    int64_t n = 0;
    for (size_t i = 0; i < got.size(); ++i) n += got[i] != expected[i];
    return n;
  };
  EXPECT_EQ(mismatches(k_cache_d.download(), k_expected), 0) << "k_cache";
  EXPECT_EQ(mismatches(v_cache_d.download(), v_expected), 0) << "v_cache";
  EXPECT_EQ(mismatches(q_out_d.download(), q_expected), 0) << "q_out";
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (int64_t d : {64, 128, 256}) {
      out.push_back({dtype, d, d, Layout::kContiguous, Rotary::kInterleaved, false, 1});
      out.push_back({dtype, d, d, Layout::kPaged16, Rotary::kHalf, true, 3});
    }
    out.push_back({dtype, 128, 128, Layout::kBatchIndex, Rotary::kPartialHalf, false, 2});
    out.push_back({dtype, 128, 128, Layout::kPaged1, Rotary::kInterleaved, true, 5});
    out.push_back({dtype, 128, 128, Layout::kPaged16, Rotary::kNone, false, 17});
    out.push_back({dtype, 192, 128, Layout::kContiguous, Rotary::kPartialHalf, true, 4});
    out.push_back({dtype, 96, 96, Layout::kPaged1, Rotary::kHalf, false, 1});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, AppendKvGpuTest, ::testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace warpflash
