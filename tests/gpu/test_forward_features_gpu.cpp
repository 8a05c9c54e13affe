// The forward kernel's masking and sequence features against the double-precision
// reference, alone and combined, for every compiled dtype and head dim: variable-length
// (packed) batches with empty sequences and lengths around tile edges, seqused, sliding
// windows, chunked attention, softcap and learnable sinks, with GQA; decode, split-KV,
// paged caches and KV-cache left padding. Each sequence pair is checked against the
// reference of that pair alone.
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/head_dims.h"
#include "common/hopper_gpu.h"
#include "common/output_tolerance.h"
#include "common/test_seed.h"
#include "reference/attention_reference.h"
#include "reference/half_precision.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::head_dims_name;
using testing::is_compiled;
using testing::kTestHeadDims;
using testing::kPoison;
using testing::to_bits;

struct Case {
  const char* name;
  bool packed;                  // varlen layout (cu_seqlens) or a dense batch
  std::vector<int> seqlens_q;   // per sequence; dense: all equal
  std::vector<int> seqlens_k;
  int64_t heads_q, heads_kv;
  bool causal = false;
  int64_t window_left = -1, window_right = -1, chunk = 0;
  float softcap = 0.f;
  bool sinks = false;
  std::vector<int> seqused_q = {};  // empty: none
  std::vector<int> seqused_k = {};
  // Scratch of forward_workspace_bytes(): with sequences of different lengths, windows or
  // chunks, the dynamic tile order; without, the static one. With it, problems of few
  // tiles split their keys.
  bool workspace = true;
  int64_t num_splits = 0;  // ForwardArgs::num_splits
  // Dense K/V as a paged cache of pages this many rows long, in a shuffled order (0: not
  // paged).
  int64_t page_size = 0;
  std::vector<int> leftpad_k = {};  // ForwardArgs::leftpad_k; empty: none
};

const Case kCases[] = {
    {"varlen_causal_gqa", true, {0, 1, 127, 128, 129, 300, 0, 17}, {0, 1, 127, 128, 129, 300, 0, 17}, 4, 2, true},
    {"varlen_full_unequal", true, {5, 1000, 0, 64, 33}, {300, 7, 12, 0, 1}, 4, 1},
    {"varlen_long_keys", true, {300, 50}, {8300, 100}, 2, 1},
    {"varlen_many_tiles", true, {700, 900, 250, 1300, 16}, {700, 900, 250, 1300, 16}, 16, 4, true},
    {"varlen_many_tiles_static_order", true, {700, 900, 250, 1300, 16}, {700, 900, 250, 1300, 16}, 16, 4, true,
     -1, -1, 0, 0.f, false, {}, {}, /*workspace=*/false},
    {"varlen_full_static_order", true, {1000, 5, 640, 300}, {900, 2000, 1, 300}, 4, 2, false, -1, -1, 0, 0.f, false,
     {}, {}, /*workspace=*/false},
    {"window_causal", false, {700}, {700}, 2, 2, true, 100},
    {"window_both_sides", false, {300, 300}, {500, 500}, 4, 2, false, 50, 30},
    // A short window over long keys: d=128 takes the default tiles, not the long ones.
    {"window_long_keys", false, {300}, {8300}, 2, 1, true, 1000},
    {"window_right_only", false, {257}, {257}, 2, 1, false, -1, 5},
    {"chunk_causal", false, {600}, {600}, 2, 2, true, -1, -1, 128},
    {"softcap_causal", false, {257}, {257}, 4, 4, true, -1, -1, 0, 30.f},
    {"sinks_rows_without_keys", false, {200, 200}, {100, 100}, 4, 2, true, -1, -1, 0, 0.f, true},
    {"sinks_long", false, {1000}, {1000}, 8, 2, false, -1, -1, 0, 0.f, true},
    {"seqused_dense", false, {50, 50, 50}, {400, 400, 400}, 2, 1, false, -1, -1, 0, 0.f, false, {50, 10, 0}, {400, 0, 77}},
    {"varlen_everything", true, {200, 0, 1, 513, 129}, {260, 5, 1, 513, 129}, 8, 2, true, 96, -1, 0, 20.f, true,
     {200, 0, 1, 400, 129}, {260, 5, 0, 513, 100}},
    // Decode: one query per sequence, the query heads of a K/V head packed into one tile
    // (ratios 4, 3, 8 and MQA's 16) and the keys split among CTAs (chosen, or num_splits).
    {"decode_gqa_split", false, {1, 1, 1}, {777, 777, 777}, 8, 2},
    {"decode_gqa3_seqused_causal", false, {1, 1, 1, 1}, {777, 777, 777, 777}, 12, 4, true, -1, -1, 0, 0.f, false,
     {}, {777, 0, 5, 300}},
    {"decode_window_softcap", false, {1, 1}, {1000, 1000}, 16, 2, true, 100, -1, 0, 20.f},
    {"decode_chunk", false, {1, 1}, {1000, 1000}, 8, 4, true, -1, -1, 256},
    {"decode_mqa_unsplit", false, {1, 1}, {3000, 3000}, 16, 1, false, -1, -1, 0, 0.f, false, {}, {},
     /*workspace=*/false},
    {"decode_sinks_unpacked", false, {1, 1}, {500, 500}, 8, 2, false, -1, -1, 0, 0.f, true},
    {"decode_mha_seven_splits", false, {1, 1}, {2000, 2000}, 4, 4, false, -1, -1, 0, 0.f, false, {}, {}, true, 7},
    {"speculative_q4_causal_split", false, {4, 4}, {3001, 3001}, 8, 2, true},
    // 72 tiles of 9 sequences x 8 K/V heads: on 132 SMs the keys go in equal runs over all
    // of them (split_kv.h), a run's pieces in two tiles; equal and unequal cached lengths.
    {"decode_runs", false, std::vector<int>(9, 1), std::vector<int>(9, 600), 32, 8},
    {"decode_runs_seqused_causal", false, std::vector<int>(9, 1), std::vector<int>(9, 600), 32, 8, true, -1, -1, 0,
     0.f, false, {}, {600, 0, 1, 129, 600, 300, 77, 599, 256}},
    // Packed GQA with several query positions (the consumers load the rows): ratios 7 and
    // 8, tiles of several positions, more rows than a tile, windows, softcap, seqused.
    {"speculative_q3_gqa7_window_seqused", false, {3, 3, 3}, {900, 900, 900}, 14, 2, true, 300, -1, 0, 0.f, false,
     {}, {900, 2, 450}},
    {"prefill_q40_gqa8_causal_softcap", false, {40, 40}, {700, 700}, 16, 2, true, -1, -1, 0, 25.f},
    {"prefill_q40_gqa8_unsplit", false, {40}, {1300}, 8, 1, false, -1, -1, 0, 0.f, false, {}, {}, true, 1},
    {"prefill_causal_three_splits", false, {300}, {1500}, 4, 2, true, -1, -1, 0, 0.f, false, {}, {}, true, 3},
    {"split_more_pieces_than_blocks", false, {1}, {200}, 4, 1, false, -1, -1, 0, 0.f, false, {}, {}, true, 9},
    // Paged KV caches: page sizes of whole swizzle atoms, single rows, odd ones.
    {"paged16_decode_seqused", false, {1, 1, 1}, {1000, 1000, 1000}, 8, 2, true, -1, -1, 0, 0.f, false, {},
     {1000, 0, 333}, true, 0, 16},
    {"paged1_q3_causal_split", false, {3, 3}, {300, 300}, 8, 2, true, -1, -1, 0, 0.f, false, {}, {300, 7}, true, 3, 1},
    {"paged5_prefill_window", false, {200, 200}, {700, 700}, 4, 2, true, 64, -1, 0, 0.f, false, {}, {}, true, 0, 5},
    {"paged256_mqa", false, {1, 1, 1}, {900, 900, 900}, 8, 1, true, -1, -1, 0, 0.f, false, {}, {900, 100, 899}, true,
     0, 256},
    // KV-cache left padding (the keys of sequence b from row leftpad_k[b] on): all of a
    // sequence padded, padding inside and across tiles, with seqused, splits, windows,
    // packed GQA, varlen and pages (gathered whatever their size).
    {"leftpad_decode_gqa_split", false, {1, 1, 1, 1}, {900, 900, 900, 900}, 8, 2, true, -1, -1, 0, 0.f, false, {},
     {900, 500, 0, 300}, true, 0, 0, {0, 123, 0, 300}},
    {"leftpad_prefill_window_causal", false, {40, 40, 40}, {700, 700, 700}, 4, 2, true, 100, -1, 0, 0.f, false, {},
     {}, true, 0, 0, {5, 650, 129}},
    {"leftpad_speculative_q3_split", false, {3, 3}, {2000, 2000}, 8, 1, true, -1, -1, 0, 0.f, false, {}, {1999, 2000},
     true, 3, 0, {1000, 1}},
    {"leftpad_varlen", true, {100, 1, 0, 300}, {400, 50, 7, 300}, 4, 2, true, -1, -1, 0, 0.f, false, {}, {}, true, 0, 0,
     {200, 49, 3, 0}},
    {"paged64_leftpad_decode", false, {1, 1, 1}, {1000, 1000, 1000}, 8, 2, true, -1, -1, 0, 0.f, false, {},
     {1000, 333, 64}, true, 0, 64, {17, 333, 63}},
    {"paged256_leftpad_q3_window", false, {3, 3}, {900, 900}, 8, 2, true, 200, -1, 0, 0.f, false, {}, {900, 700},
     true, 0, 256, {255, 1}},
    {"paged1_leftpad_prefill", false, {50}, {300}, 4, 4, false, -1, -1, 0, 0.f, false, {}, {}, true, 0, 1, {77}},
};

using Param = std::tuple<DType, HeadDims, Case>;

constexpr int64_t kGuard = 64;

// Rows of (heads, head_dim) one after the other: packed sequences, or a dense batch
// (which has the same storage). Random values rounded to the dtype, kept as doubles.
struct Rows {
  int64_t rows, heads, head_dim;
  std::vector<uint16_t> storage;  // kGuard poison before and after
  std::vector<double> values;
  Rows(int64_t r, int64_t h, int64_t d) : rows(r), heads(h), head_dim(d) {
    storage.assign(2 * kGuard + std::max<int64_t>(r * h * d, 1), kPoison);
    values.assign(r * h * d, 0.0);
  }
  void fill(DType dtype, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = 0; i < values.size(); ++i) {
      storage[kGuard + i] = to_bits(dtype, normal(rng));
      values[i] = from_bits(dtype, storage[kGuard + i]);
    }
  }
  // Rows [first, first + count) as a dense (1, count, heads, head_dim) tensor.
  std::vector<double> slice(int64_t first, int64_t count) const {
    return std::vector<double>(values.begin() + first * heads * head_dim,
                               values.begin() + (first + count) * heads * head_dim);
  }
};

std::vector<int> prefix_sums(const std::vector<int>& lengths) {
  std::vector<int> cu(1, 0);
  for (int n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

class ForwardFeaturesGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardFeaturesGpuTest, MatchesReference) {
  WARPFLASH_REQUIRE_HOPPER();
  auto [dtype, dims, c] = GetParam();
  if (!is_compiled(dtype, dims)) GTEST_SKIP() << head_dims_name(dims) << " not compiled for " << dtype_name(dtype);
  const int64_t head_dim = dims.qk, head_dim_v = dims.v;
  const int64_t batch = static_cast<int64_t>(c.seqlens_q.size());
  std::vector<int> cu_q = prefix_sums(c.seqlens_q), cu_k = prefix_sums(c.seqlens_k);
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  const int64_t max_q = *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
  const int64_t max_k = *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "inputs of seed " << seed << " (again: WARPFLASH_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  Rows q(total_q, c.heads_q, head_dim), k(total_k, c.heads_kv, head_dim), v(total_k, c.heads_kv, head_dim_v),
      o(total_q, c.heads_q, head_dim_v);
  q.fill(dtype, rng);
  k.fill(dtype, rng);
  v.fill(dtype, rng);
  std::vector<float> sinks(c.heads_q);
  std::uniform_real_distribution<float> sink_logit(-2.f, 3.f);
  for (float& s : sinks) s = sink_logit(rng);

  DeviceBuffer<uint16_t> q_dev(q.storage.size()), k_dev(k.storage.size()), v_dev(v.storage.size()),
      o_dev(o.storage.size());
  const int64_t lse_count = c.heads_q * total_q;
  DeviceBuffer<float> lse_dev(lse_count + 2 * kGuard), sinks_dev(sinks.size());
  std::vector<float> lse_host(lse_dev.size(), NAN);
  DeviceBuffer<int> cu_q_dev(cu_q.size()), cu_k_dev(cu_k.size()), used_q_dev(c.seqused_q.size()),
      used_k_dev(c.seqused_k.size()), leftpad_dev(c.leftpad_k.size());
  ASSERT_TRUE(q_dev.upload(q.storage) && k_dev.upload(k.storage) && v_dev.upload(v.storage) &&
              o_dev.upload(o.storage) && lse_dev.upload(lse_host) && sinks_dev.upload(sinks) &&
              cu_q_dev.upload(cu_q) && cu_k_dev.upload(cu_k) && used_q_dev.upload(c.seqused_q) &&
              used_k_dev.upload(c.seqused_k) && leftpad_dev.upload(c.leftpad_k));

  ForwardArgs args;
  args.dtype = dtype;
  auto rows_view = [&](uint16_t* base, int64_t seqlen, int64_t heads, int64_t width) {
    return contiguous_view(base + kGuard, seqlen, heads, width);
  };
  if (c.packed) {
    args.shape = {batch, max_q, max_k, c.heads_q, c.heads_kv, head_dim, head_dim_v};
    args.cu_seqlens_q = cu_q_dev.get();
    args.cu_seqlens_k = cu_k_dev.get();
    args.total_q = total_q;
    args.total_k = total_k;
  } else {
    args.shape = {batch, c.seqlens_q[0], c.seqlens_k[0], c.heads_q, c.heads_kv, head_dim, head_dim_v};
  }
  args.q = rows_view(q_dev.get(), args.shape.seqlen_q, c.heads_q, head_dim);
  args.k = rows_view(k_dev.get(), args.shape.seqlen_k, c.heads_kv, head_dim);
  args.v = rows_view(v_dev.get(), args.shape.seqlen_k, c.heads_kv, head_dim_v);
  args.o = rows_view(o_dev.get(), args.shape.seqlen_q, c.heads_q, head_dim_v);
  args.lse = lse_dev.get() + kGuard;
  args.causal = c.causal;
  args.window_left = c.window_left;
  args.window_right = c.window_right;
  args.attention_chunk = c.chunk;
  args.softcap = c.softcap;
  if (c.sinks) args.learnable_sink = sinks_dev.get();
  if (!c.seqused_q.empty()) args.seqused_q = used_q_dev.get();
  if (!c.seqused_k.empty()) args.seqused_k = used_k_dev.get();
  if (!c.leftpad_k.empty()) args.leftpad_k = leftpad_dev.get();
  args.num_splits = c.num_splits;
  // A paged copy of the dense K and V (Case::page_size): sequence b's rows [p * page_size,
  // (p + 1) * page_size) in page page_table[b][p], the pages in a shuffled order, one more
  // page unused; rows past the keys are zeros (read as part of a block, so finite).
  const int64_t size = c.page_size, seqlen_k = args.shape.seqlen_k;
  const int64_t max_pages = size > 0 ? (seqlen_k + size - 1) / size : 0;
  const int64_t num_pages = size > 0 ? batch * max_pages + 1 : 0;
  std::vector<int> order(num_pages);
  for (int64_t i = 0; i < num_pages; ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> page_table(order.begin(), order.begin() + batch * max_pages);
  auto paged_copy = [&](const Rows& dense) {
    const int64_t row = dense.heads * dense.head_dim;
    std::vector<uint16_t> pages(2 * kGuard + num_pages * size * row, 0);
    for (int64_t b = 0; b < batch && size > 0; ++b) {
      for (int64_t t = 0; t < seqlen_k; ++t) {
        int64_t page = page_table[b * max_pages + t / size];
        std::copy_n(dense.storage.begin() + kGuard + (b * seqlen_k + t) * row, row,
                    pages.begin() + kGuard + (page * size + t % size) * row);
      }
    }
    return pages;
  };
  std::vector<uint16_t> k_pages = paged_copy(k), v_pages = paged_copy(v);
  DeviceBuffer<int> page_table_dev(page_table.size());
  DeviceBuffer<uint16_t> k_pages_dev(size > 0 ? k_pages.size() : 0), v_pages_dev(size > 0 ? v_pages.size() : 0);
  ASSERT_TRUE(page_table_dev.upload(page_table) && k_pages_dev.upload(k_pages) && v_pages_dev.upload(v_pages));
  if (size > 0) {
    args.k = rows_view(k_pages_dev.get(), size, c.heads_kv, head_dim);
    args.v = rows_view(v_pages_dev.get(), size, c.heads_kv, head_dim_v);
    args.page_table = page_table_dev.get();
    args.page_table_batch_stride = max_pages;
    args.max_pages = max_pages;
    args.num_pages = num_pages;
    args.page_size = size;
  }
  DeviceBuffer<uint8_t> workspace(c.workspace ? forward_workspace_bytes(args) : 0);
  args.workspace = workspace.get();
  args.workspace_bytes = workspace.size();
  Status status = forward(args);
  // Paged and left-padded caches: head dims 64, 128 and 256; the others are refused by name.
  const bool cache_dims = dims.qk == dims.v && (dims.qk == 64 || dims.qk == 128 || dims.qk == 256);
  if ((size > 0 || !c.leftpad_k.empty()) && !cache_dims) {
    ASSERT_EQ(status.code(), StatusCode::kNotSupported) << status.message();
    const std::string& message = status.message();
    ASSERT_TRUE(message.find("page_table") != std::string::npos || message.find("leftpad_k") != std::string::npos)
        << message;
    GTEST_SKIP() << "paged and left-padded caches: head dims 64, 128, 256 (refused: " << status.message() << ")";
  }
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> o_out = o_dev.download();
  std::vector<float> lse_out = lse_dev.download();

  const int64_t row_elements = c.heads_q * head_dim_v;  // of O
  std::vector<bool> written(o.storage.size(), false);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t sq = c.seqused_q.empty() ? c.seqlens_q[b] : std::min(c.seqlens_q[b], c.seqused_q[b]);
    const int64_t used_k = c.seqused_k.empty() ? c.seqlens_k[b] : std::min(c.seqlens_k[b], c.seqused_k[b]);
    const int64_t pad = c.leftpad_k.empty() ? 0 : c.leftpad_k[b], sk = used_k - pad;  // keys [pad, used_k)
    SCOPED_TRACE(::testing::Message() << "sequence " << b << ": seqlen_q " << sq << ", seqlen_k " << sk);
    if (sq == 0) continue;
    reference::Problem p{1, sq, sk, c.heads_q, c.heads_kv, head_dim, 1.0 / std::sqrt(double(head_dim)), c.causal};
    p.head_dim_v = head_dim_v;
    p.window_left = c.window_left;
    p.window_right = c.window_right;
    p.attention_chunk = c.chunk;
    p.softcap = c.softcap;
    if (c.sinks) p.sinks.assign(sinks.begin(), sinks.end());
    std::vector<double> o_ref, lse_ref, o_low;
    std::vector<double> q_seq = q.slice(cu_q[b], sq), k_seq = k.slice(cu_k[b] + pad, sk),
                        v_seq = v.slice(cu_k[b] + pad, sk);
    reference::forward(p, q_seq, k_seq, v_seq, o_ref, lse_ref);
    reference::forward_low_precision(
        p, dtype == DType::kBFloat16 ? reference::Precision::kBFloat16 : reference::Precision::kFloat16, q_seq, k_seq,
        v_seq, o_low);
    std::vector<double> o_seq(o_ref.size());
    for (int64_t i = 0; i < sq * row_elements; ++i) {
      int64_t index = kGuard + cu_q[b] * row_elements + i;
      written[index] = true;
      o_seq[i] = from_bits(dtype, o_out[index]);
    }
    double max_err = 0, max_low = 0, sq_err = 0, sq_low = 0, sq_ref = 0;
    for (size_t i = 0; i < o_ref.size(); ++i) {
      double err = std::fabs(o_seq[i] - o_ref[i]), low = std::fabs(o_low[i] - o_ref[i]);
      max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
      max_low = std::max(max_low, low);
      sq_err += std::isnan(err) ? INFINITY : err * err;
      sq_low += low * low;
      sq_ref += o_ref[i] * o_ref[i];
    }
    const double atol = testing::output_rounding(dtype, o_ref);
    EXPECT_LE(max_err, 2 * max_low + atol) << "max abs error (low-precision reference: " << max_low << ")";
    double rel = std::sqrt(sq_err / std::max(sq_ref, 1e-300)), rel_low = std::sqrt(sq_low / std::max(sq_ref, 1e-300));
    if (sq_ref > 0) EXPECT_LE(rel, 2 * rel_low + 1e-4) << "relative L2 error (low precision: " << rel_low << ")";
    int bad_lse = 0;
    for (int64_t h = 0; h < c.heads_q; ++h) {
      for (int64_t r = 0; r < sq; ++r) {
        // Packed: (heads, total_q); dense: (batch, heads, seqlen_q).
        int64_t index = c.packed ? h * total_q + cu_q[b] + r : (b * c.heads_q + h) * args.shape.seqlen_q + r;
        double got = lse_out[kGuard + index], want = lse_ref[h * sq + r];
        bool ok = std::isinf(want) ? (std::isinf(got) && got < 0) : std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want));
        if (!ok && bad_lse++ < 5) ADD_FAILURE() << "lse head " << h << " row " << r << " = " << got << ", reference " << want;
      }
    }
  }
  // Rows past seqused and everything around the output stay poison.
  for (size_t i = 0; i < o_out.size(); ++i) {
    if (!written[i]) ASSERT_EQ(o_out[i], kPoison) << "write outside the sequences' rows at storage index " << i;
  }
  for (int64_t i = 0; i < kGuard; ++i) {
    ASSERT_TRUE(std::isnan(lse_out[i]) && std::isnan(lse_out[lse_count + kGuard + i])) << "write outside LSE";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  auto [dtype, dims, c] = info.param;
  std::ostringstream name;
  name << (dtype == DType::kBFloat16 ? "bf16" : "fp16") << "_" << head_dims_name(dims) << "_" << c.name;
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Features, ForwardFeaturesGpuTest,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::ValuesIn(kTestHeadDims), ::testing::ValuesIn(kCases)),
                         param_name);

}  // namespace
}  // namespace warpflash
